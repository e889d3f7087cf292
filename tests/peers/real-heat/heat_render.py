"""Renders configs with Heat's own code, in-process, for differential tests.

Reads a JSON list of OS::Heat::CloudConfig `cloud_config` property values on stdin and prints
the JSON list of the `config` each gets, built exactly as
heat.engine.resources.openstack.heat.cloud_config.CloudConfig.handle_create builds it (the
resource itself needs a stack and the RPC API, so only its rendering line runs here).
"""

import json
import sys

from heat.common import template_format


def cloud_config(value):
    rendered = template_format.yaml.dump(value, Dumper=template_format.yaml_dumper)
    return '#cloud-config\n%s' % rendered


def main():
    values = json.load(sys.stdin)
    json.dump([cloud_config(value) for value in values], sys.stdout)


if __name__ == '__main__':
    main()

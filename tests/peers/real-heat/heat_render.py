"""Renders configs with Heat's own code, in-process, for differential tests.

`heat_render.py cloud_config` reads a JSON list of OS::Heat::CloudConfig `cloud_config`
property values on stdin and prints the JSON list of the `config` each gets, built exactly as
heat.engine.resources.openstack.heat.cloud_config.CloudConfig.handle_create builds it (the
resource itself needs a stack and the RPC API, so only its rendering line runs here).

`heat_render.py multipart` reads a JSON list of OS::Heat::MultipartMime `parts` lists (inline
text parts) and prints the message each gets from MultipartMime's own `_append_part` and
`email.mime.multipart.MIMEMultipart(...).as_string()`, as MultipartMime.get_message does.
"""

import json
import sys

from email.mime import multipart

from heat.common import template_format
from heat.engine.resources.openstack.heat import multi_part


def cloud_config(value):
    rendered = template_format.yaml.dump(value, Dumper=template_format.yaml_dumper)
    return '#cloud-config\n%s' % rendered


def mime(parts):
    subparts = []
    for item in parts:
        multi_part.MultipartMime._append_part(
            subparts, item['config'], item.get('subtype', ''),
            item.get('filename', ''))
    return multipart.MIMEMultipart(_subparts=subparts).as_string()


def main():
    render = {'cloud_config': cloud_config, 'multipart': mime}[sys.argv[1]]
    values = json.load(sys.stdin)
    json.dump([render(value) for value in values], sys.stdout)


if __name__ == '__main__':
    main()

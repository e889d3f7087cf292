"""What Heat's API and engine make of a stack request's environment: the environment Heat
builds from the request body (heat.api.openstack.v1.stacks.InstantiationData.environment, which
ignores a merged `environment` when `environment_files` is given and adds the request's
`parameters`), then the server-side merge of `environment_files` from the `files` map
(heat.common.environment_util.merge_environments) against the parameter schemata of the
template and of every template in `files` (heat.engine.template.Template.all_param_schemata).

Usage: heat_merge_env.py < BODIES.json (a list of stack create bodies: template, parameters,
environment, environment_files, files). Prints a list with, per body, {"environment": {...}} or
{"error": "Class: message"}.
"""

import json
import sys

from heat.api.openstack.v1.stacks import InstantiationData
from heat.common import environment_util
from heat.common import template_format
from heat.engine import resources
from heat.engine import template as templatem


def merge(body):
    try:
        data = InstantiationData(body)
        environment = data.environment()
        files = data.files()
        template = templatem.Template(template_format.parse(body["template"]), files=files)
        environment_util.merge_environments(
            data.environment_files(), files, environment, template.all_param_schemata(files))
    except Exception as error:  # noqa: BLE001 -- every failure is an answer for the test
        return {"error": f"{type(error).__name__}: {error}"}
    return {"environment": environment}


def main():
    bodies = json.load(sys.stdin)
    resources.initialise()
    print(json.dumps([merge(body) for body in bodies], sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

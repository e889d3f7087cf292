"""Heat's own handling of `update_policy` and `deletion_policy`, in-process, for the shim's
differential tests (tests/tests/heat_policies.rs).

stdin: {"validate": [case...], "plan": [case...]}.
A validate case is {"version", "type", "resource": {...the resource's HOT definition...},
"parameters": {name: value}}: the template is parsed by Heat's template class, the resource's
definition built, then checked as heat.engine.resource.Resource.validate_template checks the
two policies (deletion policy, then the update policy against the type's update_policy_schema).
Answer: {"ok": {"deletion_policy": ..., "update_policy": {...resolved with defaults...}}} or
{"error": "<message>"}.
A plan case is {"servers": [names in template order], "existing": [[name, old_server]...],
"current": {name: server}, "batch_size", "create": bool}: Heat's ResourceGroup._get_batches
and SoftwareDeploymentGroup._assemble_for_rolling_update (on a stand-in carrying only what
those methods read) give each batch's member definitions; the answer lists per batch the
members created, changed and removed. No database is touched."""

import json
import logging
import sys

logging.disable(logging.CRITICAL)

from heat.common import context, exception  # noqa: E402
from heat.common import grouputils  # noqa: E402
from heat.engine import environment, resources  # noqa: E402
from heat.engine import rsrc_defn  # noqa: E402
from heat.engine import stack as parser  # noqa: E402
from heat.engine import template as tmpl  # noqa: E402
from heat.engine.resources.openstack.heat import resource_group  # noqa: E402
from heat.engine.resources.openstack.heat import software_deployment  # noqa: E402
from heat.scaling import template as scaling_template  # noqa: E402


def validate(case, ctx):
    definition = {
        "heat_template_version": case["version"],
        "parameters": {name: {"type": "string"} for name in case.get("parameters", {})},
        "resources": {"r": case["resource"]},
    }
    env = environment.Environment(case.get("parameters", {}))
    template = tmpl.Template(definition, env=env)
    stack = parser.Stack(ctx, "policy", template)
    try:
        defn = template.resource_definitions(stack)["r"]
        cls = env.get_class(case["type"], resource_name="r")
        policy = defn.deletion_policy()
        cls.validate_deletion_policy(policy)
        update = defn.update_policy(cls.update_policy_schema, ctx)
        update.validate()
        resolved = {key: update[key] for key in update}
    except exception.StackValidationFailed as error:
        # As Resource.validate_template re-raises it: the path from resources.r on.
        path = ["resources", "r"]
        if error.path:
            path.append(template.get_section_name(error.path[0]))
            path.extend(error.path[1:])
        raised = exception.StackValidationFailed(error=error.error, path=path, message=error.error_message)
        return {"error": str(raised)}
    return {"ok": {"deletion_policy": policy, "update_policy": resolved}}


class Stand:
    """What _assemble_for_rolling_update and _resource_names read of a group."""

    SERVERS = software_deployment.SoftwareDeploymentGroup.SERVERS

    def __init__(self, servers, members):
        self.properties = {"servers": servers, "config": "c"}
        self.members = members

    _resource_names = software_deployment.SoftwareDeploymentGroup._resource_names
    _name_skiplist = software_deployment.SoftwareDeploymentGroup._name_skiplist
    get_resource_def = software_deployment.SoftwareDeploymentGroup.get_resource_def
    build_resource_definition = software_deployment.SoftwareDeploymentGroup.build_resource_definition

    def get_size(self):
        return len(self.properties["servers"])

    def _add_output_defns_to_template(self, template, names):
        pass


def member_definition(name, server):
    return rsrc_defn.ResourceDefinition(name, "OS::Heat::SoftwareDeployment", {"config": "c", "server": server})


def plan(case):
    servers = {name: case["current"][name] for name in case["servers"]}
    members = [(name, member_definition(name, server)) for name, server in case["existing"]]
    stand = Stand(servers, members)
    original_members = grouputils.get_member_definitions
    original_make = scaling_template.make_template
    grouputils.get_member_definitions = lambda group: list(group.members)
    scaling_template.make_template = lambda definitions, version=None: list(definitions)
    try:
        batches = list(resource_group.ResourceGroup._get_batches(len(servers), len(members), case["batch_size"], 0))
        answer = []
        for capacity, updates in batches:
            before = dict(stand.members)
            after = resource_group.ResourceGroup._assemble_for_rolling_update(stand, capacity, updates)
            created = [name for name, _ in after if name not in before]
            changed = [name for name, defn in after if name in before and before[name] != defn]
            kept = {name for name, _ in after}
            removed = [name for name in before if name not in kept]
            answer.append({"created": created, "changed": changed, "removed": removed})
            stand.members = after
        return {"batches": answer}
    finally:
        grouputils.get_member_definitions = original_members
        scaling_template.make_template = original_make


def main():
    resources.initialise()
    ctx = context.RequestContext(user_id="policy", project_id="policy", is_admin=False)
    request = json.load(sys.stdin)
    answers = {"validate": [], "plan": []}
    for case in request.get("validate", []):
        try:
            answers["validate"].append(validate(case, ctx))
        except Exception as error:  # every refusal is an answer to compare
            answers["validate"].append({"error": "%s: %s" % (type(error).__name__, error)})
    for case in request.get("plan", []):
        answers["plan"].append(plan(case))
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()

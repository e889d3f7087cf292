"""Evaluates HOT snippets with Heat's own template classes in a stack whose resources are
created, in-process, for the shim's differential tests of `Ref`, `Fn::GetAZs` and
`get_attr` (tests/tests/heat_cfn.rs).

stdin: a JSON list of cases, each {"version", "parameters": {name: {"type", "value"}},
"resources": {name: {"type", "properties", "reference_id", "attributes"}}, "files": {...},
"snippet"}. stdout: a JSON list with, per case, {"value": ..., "attributes": {resource:
[names]}} or {"error": "<ExceptionClass>: <message>"}.

Which attributes a resource holds is Heat's own computation: the snippet is the template's
one output, and each resource, marked CREATE COMPLETE, gives the NodeData Heat's convergence
engine would send (Resource.node_data, which expands `get_attr: [name]` to every attribute of
the type but `show`, leaving out those the resource refuses). Only the values are the case's
(Heat's would need the real cloud): each attribute the NodeData names gets the case's stored
value (null when absent), and the snippet is resolved against that StackDefinition, the way
a convergence worker resolves it. Heat asks Nova for availability zones; here Nova is a
single-zone cloud (`["nova"]`)."""

import json
import logging
import sys

logging.disable(logging.CRITICAL)

from heat.engine import attributes, environment, function, node_data  # noqa: E402
from heat.engine import stack as parser  # noqa: E402
from heat.engine import stk_defn  # noqa: E402
from heat.engine import template as tmpl  # noqa: E402

from hot_eval import answer_all  # noqa: E402 -- the same loop over cases and answers

# Nova's answer for a cloud with one availability zone (Heat would ask Nova for the list).
parser.Stack.get_availability_zones = lambda self: ["nova"]
stk_defn.StackDefinition.get_availability_zones = lambda self: ["nova"]


def stored_value(attrs, key):
    """The case's value for a NodeData key: an attribute name, or a tuple (name, path...)
    for a get_attr with a path (selected as Heat selects it)."""
    if isinstance(key, str):
        return attrs.get(key)
    return attributes.select_from_attribute(attrs.get(key[0]), list(key[1:]))


def evaluate(case, ctx):
    parameters = case.get("parameters", {})
    declared = case.get("resources", {})
    definition = {
        "heat_template_version": case["version"],
        "parameters": {name: {"type": spec["type"]} for name, spec in parameters.items()},
        "resources": {
            name: {"type": spec["type"], "properties": spec.get("properties", {})} for name, spec in declared.items()
        },
        "outputs": {"snippet": {"value": case["snippet"]}},
    }
    values = {name: spec["value"] for name, spec in parameters.items()}
    template = tmpl.Template(definition, files=case.get("files", {}), env=environment.Environment(values))
    stack = parser.Stack(ctx, "hot-eval", template)
    data = {}
    names = {}
    for name, spec in declared.items():
        resource = stack[name]
        resource.action, resource.status = resource.CREATE, resource.COMPLETE
        heat_data = resource.node_data(for_resources=False, for_outputs=True)
        # The full keys, paths included (attribute_names() gives only their first part).
        keys = list(heat_data._attributes)
        stored = spec.get("attributes", {})
        attrs = {key: stored_value(stored, key) for key in keys}
        names[name] = sorted(set(heat_data.attribute_names()))
        data[name] = node_data.NodeData(None, name, None, spec["reference_id"], attrs, "CREATE", "COMPLETE")
    created = stk_defn.StackDefinition(ctx, template, stack.identifier(), data)
    parsed = template.parse(created, case["snippet"])
    function.validate(parsed)
    value = function.resolve(parsed)
    json.dumps(value)
    return {"value": value, "attributes": names}


if __name__ == "__main__":
    answer_all(evaluate)

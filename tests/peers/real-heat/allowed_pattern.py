"""Checks a string parameter's value against its allowed_pattern constraint with Heat's own
parameter classes (HOT template -> HOTParameters -> AllowedPattern, which runs Python's re),
in-process, for the shim's differential pattern tests (tests/tests/heat_functions.rs).

stdin: a JSON list of cases, each {"pattern", "value"} ("value" null: none given) and
optionally "default". stdout: a JSON list with, per case, {"value": true} when Heat accepts
the parameter, or {"error": "<ExceptionClass>: <message>"}. Parameters.validate runs as at
stack create: the schema (the pattern compiles, the default meets it) and then the value."""

import json  # noqa: F401  (answer_all reads and writes JSON)

from heat.engine import environment
from heat.engine import template as tmpl

from hot_eval import answer_all


def check(case, ctx):
    parameter = {"type": "string", "constraints": [{"allowed_pattern": case["pattern"]}]}
    if "default" in case:
        parameter["default"] = case["default"]
    definition = {"heat_template_version": "2021-04-16", "parameters": {"p": parameter}}
    values = {} if case.get("value") is None else {"p": case["value"]}
    template = tmpl.Template(definition, env=environment.Environment(values))
    template.parameters(None, values).validate(validate_value=True, context=ctx)
    return {"value": True}


if __name__ == "__main__":
    answer_all(check)

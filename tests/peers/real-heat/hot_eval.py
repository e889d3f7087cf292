"""Evaluates HOT snippets with Heat's own template classes, in-process, for the shim's
differential function tests (tests/tests/heat_functions.rs).

stdin: a JSON list of cases, each {"version", "parameters": {name: {"type", "value"}},
"conditions": {...}, "snippet"}. stdout: a JSON list with, per case, {"value": ...} or
{"error": "<ExceptionClass>: <message>"}. A template and a stack are built per case (no
database is touched: parsing, validating and resolving a snippet only read the template and
its parameters)."""

import json
import logging
import sys

logging.disable(logging.CRITICAL)

from heat.common import context  # noqa: E402
from heat.engine import environment, function, resources  # noqa: E402
from heat.engine import stack as parser  # noqa: E402
from heat.engine import template as tmpl  # noqa: E402


def evaluate(case, ctx):
    parameters = case.get("parameters", {})
    definition = {
        "heat_template_version": case["version"],
        "parameters": {name: {"type": spec["type"]} for name, spec in parameters.items()},
    }
    if case.get("conditions"):
        definition["conditions"] = case["conditions"]
    values = {name: spec["value"] for name, spec in parameters.items()}
    template = tmpl.Template(definition, env=environment.Environment(values))
    stack = parser.Stack(ctx, "hot-eval", template)
    parsed = template.parse(stack, case["snippet"])
    function.validate(parsed)
    value = function.resolve(parsed)
    value = None if value is Ellipsis else value
    json.dumps(value)  # a value JSON cannot carry (a set from yaql's keys()) is an error
    return {"value": value}


def answer_all(evaluate_case):
    """Reads the cases from stdin and prints each one's answer: evaluate_case(case, context),
    or the exception it raised."""
    resources.initialise()
    ctx = context.RequestContext(user_id="hot-eval", project_id="hot-eval", is_admin=False)
    results = []
    for case in json.load(sys.stdin):
        try:
            results.append(evaluate_case(case, ctx))
        except Exception as error:  # every failure is an answer to compare
            results.append({"error": "%s: %s" % (type(error).__name__, error)})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    answer_all(evaluate)

"""How Heat's own resource registry resolves resource types under an environment.

Usage: heat_registry.py < {"environment": {...}, "lookups": [[resource_name, type], ...]}
Prints a JSON list with, per lookup, the type name Heat's
heat.engine.environment.Environment.get_resource_info ends on, or {"error": "..."}.
"""

import json
import logging
import sys

from heat.engine import environment, resources


def main():
    logging.disable(logging.CRITICAL)
    request = json.load(sys.stdin)
    resources.initialise()
    answers = []
    for name, kind in request["lookups"]:
        # A fresh environment per lookup: get_resource_info caches what it resolved under the
        # looked-up type (ResourceRegistry._register_info), so a per-resource mapping found for
        # one resource would leak into the next lookup of the same type.
        env = environment.Environment(request["environment"])
        try:
            info = env.get_resource_info(kind, resource_name=name)
            answers.append(info.name)
        except Exception as error:  # noqa: BLE001 -- a refusal is an answer
            answers.append({"error": f"{type(error).__name__}: {error}"})
    print(json.dumps(answers))


if __name__ == "__main__":
    sys.exit(main())

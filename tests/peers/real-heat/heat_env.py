"""What python-heatclient would send for a template and environment files.

Usage: heat_env.py TEMPLATE [ENV...]
Prints one JSON object: "environment" (the merged environment), "env_files" (files the
environments named, and each environment itself under its URL, as openstackclient sends them),
"environment_files" (those URLs, in order), "files" (what the template's get_file named, keyed as heatclient keys them:
absolute file:// URLs) and "get_file" (the template's get_file arguments as written, in document
order, each with the URL heatclient replaced it with). Errors: {"error": "..."} and exit 1.
"""

import json
import sys

from heatclient.common import template_format
from heatclient.common import template_utils


def get_file_arguments(node, out):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "get_file" and isinstance(value, str):
                out.append(value)
            else:
                get_file_arguments(value, out)
    elif isinstance(node, list):
        for item in node:
            get_file_arguments(item, out)


def text(content):
    return content.decode("utf-8") if isinstance(content, bytes) else content


def main():
    template_path, env_paths = sys.argv[1], sys.argv[2:]
    try:
        # As openstackclient's stack create calls it: each environment file's URL in order, and
        # its content (the parsed environment as JSON) in env_files under that URL.
        environment_files = []
        env_files, environment = template_utils.process_multiple_environments_and_files(
            env_paths=env_paths, env_list_tracker=environment_files)
        # get_template_contents rewrites get_file arguments in place: read them before and after.
        with open(template_path, encoding="utf-8") as handle:
            written = []
            get_file_arguments(template_format.parse(handle.read()), written)
        files, template = template_utils.get_template_contents(template_file=template_path)
        rewritten = []
        get_file_arguments(template, rewritten)
    except Exception as error:  # noqa: BLE001 -- every failure is an answer for the test
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        return 1
    files = {key: text(value) for key, value in files.items()}
    env_files = {key: text(value) for key, value in env_files.items()}
    print(json.dumps({
        "environment": environment,
        "env_files": env_files,
        "environment_files": environment_files,
        "files": files,
        "get_file": [[w, r] for w, r in zip(written, rewritten)],
    }, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

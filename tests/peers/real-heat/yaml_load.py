"""Reads texts as Heat reads a template's text (heat.common.template_format.simple_parse:
json.loads first, then PyYAML with Heat's yaml_loader, which is libyaml's CSafeLoader when
PyYAML has it, then PyYAML's pure-Python SafeLoader if that fails), for the shim's YAML
differential tests (tests/tests/yaml_differential).

stdin: a JSON list of texts. stdout: a JSON list with, per text, {"error": "..."} or
{"value": ..., "loader": "json" | "libyaml" | "python", "duplicates": [[key, line], ...]}.
The value keeps every mapping's key order: a mapping is {"map": [[key, value], ...]}, a list
{"seq": [...]}. The duplicates are the keys written again in one mapping of the composed node
graph (merge keys aside), each with its 1-based line, each mapping counted once however many
aliases name it."""

import json
import logging
import sys

logging.disable(logging.CRITICAL)

import yaml  # noqa: E402
from heat.common import template_format  # noqa: E402


def ordered(value):
    if isinstance(value, dict):
        return {"map": [[key, ordered(item)] for key, item in value.items()]}
    if isinstance(value, list):
        return {"seq": [ordered(item) for item in value]}
    return value


def loader(text):
    try:
        json.loads(text)
        return "json"
    except ValueError:
        pass
    try:
        yaml.load(text, Loader=template_format.yaml_loader)
        return "libyaml" if template_format.yaml_loader.__mro__[1] is yaml.CSafeLoader else "python"
    except yaml.YAMLError:
        return "python"


def duplicates(text):
    try:
        root = yaml.compose(text, Loader=template_format.yaml_loader)
    except yaml.YAMLError:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    found, seen, pending = [], set(), [root]
    while pending:
        node = pending.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = set()
            for key, value in node.value:
                pending.append(value)
                if key.tag == "tag:yaml.org,2002:merge":
                    continue
                if key.value in keys:
                    found.append([key.value, key.start_mark.line + 1])
                keys.add(key.value)
        elif isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
    return sorted(found, key=lambda item: item[1])


def answer(text):
    try:
        value = template_format.simple_parse(text)
    except ValueError as error:
        return {"error": str(error)}
    return {"value": ordered(value), "loader": loader(text), "duplicates": duplicates(text)}


def main():
    texts = json.load(sys.stdin)
    json.dump([answer(text) for text in texts], sys.stdout)


if __name__ == "__main__":
    main()

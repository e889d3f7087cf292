#!/usr/bin/env bash
# Fetches the real-template corpus of tests/tests/heat_corpus.rs from PyPI into
# tests/peers/.cache/corpus (git-ignored). Cached: a second run fetches nothing. Pinned versions,
# each sdist checked against its sha256 before it is unpacked; nothing of it is ever committed.
#
#   heat/                    openstack-heat's heat_integrationtests/ (its templates are Python
#                            strings in the test modules: see embedded/ below)
#   heat-unit-tests/         the same sdist's heat/tests/, Heat's unit tests (templates as Python
#                            strings too: the software-config, deployed-server, wait-condition
#                            and software-component tests)
#   heat-tempest-plugin/     the whole plugin (scenario templates are standalone .yaml files;
#                            its functional tests embed theirs as Python strings)
#   tripleo-heat-templates/  the whole tree (the test picks the templates it runs)
#   tripleo-heat-templates-mitaka/
#                            tripleo-heat-templates 2.2.0, the last mitaka release, whole: the
#                            role templates (puppet/controller.yaml...: MultipartMime parts of
#                            type multipart, the duplicate NeutronL3HA key), overcloud.yaml and
#                            the overcloud-resource-registry-puppet.yaml it is deployed with
#   tripleo-heat-templates-newton/
#                            tripleo-heat-templates 5.3.13, the last newton release, whole: the
#                            first *-role.yaml templates and net-config-bond.yaml's look-ahead
#                            allowed_pattern; its Jinja templates (registry, overcloud.yaml,
#                            post and per-role config) rendered in place as tripleo-common
#                            renders them at plan creation (no process-templates.py yet)
#   tripleo-heat-templates-rendered/
#                            the same tree with its Jinja templates (*.j2.yaml) rendered by
#                            TripleO's own tools/process-templates.py, as TripleO deploys it
#   embedded/<package>/<module path>/<name>.yaml
#                            every string literal of a test module that starts with
#                            `heat_template_version`, written out as a file, named after the
#                            class, function and variable that hold it. Only literals: templates
#                            built with % or .format are written with their placeholders as-is.
#                            Module-level UPPER_CASE strings (the scripts a test sends in its
#                            files map) are written next to them as <NAME>.txt.
#
# Which of these templates the test runs is decided in tests/tests/heat_corpus.rs, not here.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
corpus="$here/.cache/corpus"
command -v python3 >/dev/null || { echo "tests/peers/corpus.sh: python3 is needed to fetch the corpus" >&2; exit 1; }
mkdir -p "$corpus"

# shellcheck source=sdist.sh
. "$here/sdist.sh"

# fetch DIRECTORY PROJECT VERSION SDIST_FILE SHA256 [MEMBER]: into $corpus/DIRECTORY (sdist.sh).
fetch() {
  fetch_sdist "$corpus/$1" "${@:2}"
}

fetch heat openstack-heat 27.0.1 openstack_heat-27.0.1.tar.gz \
  65eac7175938a3f38e7e4990ebf52aa8641a1d52f4190ea795c5872d014154b6 heat_integrationtests
fetch heat-tempest-plugin heat-tempest-plugin 3.0.0 heat_tempest_plugin-3.0.0.tar.gz \
  1fd7e7beb4027792d69a2dbf6cb629eed52a50eaa88a724cbe6a94a9c2358983
fetch tripleo-heat-templates tripleo-heat-templates 18.0.0 tripleo-heat-templates-18.0.0.tar.gz \
  09026a2ace181b1a2eeddb941504add4a10429a391bd265b4c04571f131b8b89
fetch heat-unit-tests openstack-heat 27.0.1 openstack_heat-27.0.1.tar.gz \
  65eac7175938a3f38e7e4990ebf52aa8641a1d52f4190ea795c5872d014154b6 heat/tests

# tripleo-heat-templates before pike: pip download builds an sdist's metadata, and these setup.py
# (pbr) leave package discovery to setuptools, which refuses their flat tree since setuptools 61
# ("Multiple top-level packages discovered"); they are fetched with an older one. PIP_CONSTRAINT
# reaches pip's isolated build environment; newer pips read PIP_BUILD_CONSTRAINT for it.
old_setuptools="$corpus/.setuptools-before-61.txt"
echo 'setuptools<61' >"$old_setuptools"
PIP_CONSTRAINT=$old_setuptools PIP_BUILD_CONSTRAINT=$old_setuptools \
  fetch tripleo-heat-templates-mitaka tripleo-heat-templates 2.2.0 tripleo-heat-templates-2.2.0.tar.gz \
  e8512ada6b562e641b910534408d68afca1e554626698e7fc96e74eaf603edcd
PIP_CONSTRAINT=$old_setuptools PIP_BUILD_CONSTRAINT=$old_setuptools \
  fetch tripleo-heat-templates-newton tripleo-heat-templates 5.3.13 tripleo-heat-templates-5.3.13.tar.gz \
  f052c4accb235e2b9b72c9fba7e96bdf19a44db4b1a5f401709e14aa6066da51

# --- tripleo-heat-templates-rendered/: the tree as TripleO deploys it ------------------------------
# TripleO's *.j2.yaml are Jinja templates that its own tools/process-templates.py renders (with
# roles_data.yaml and network_data_default.yaml) before Heat sees them; it is run here with the
# heat-venv's python3 (pinned jinja2 and PyYAML; real-heat/install.sh, which setup.sh runs first)
# into a copy of the tree.
rendered="$corpus/tripleo-heat-templates-rendered"
rendered_marker="$rendered/.complete-$( (ls "$corpus"/tripleo-heat-templates/.complete-*; cat "$here/corpus.sh") \
  | sha256sum | cut -c1-16)"
venv_python="$here/.cache/heat-venv/bin/python3"
[ -x "$venv_python" ] || "$here/real-heat/install.sh"
if [ ! -f "$rendered_marker" ]; then
  rm -rf "$rendered"
  if ! (cd "$corpus/tripleo-heat-templates" && "$venv_python" tools/process-templates.py -p . -o "$rendered" \
      >"$corpus/tripleo-render.log" 2>&1); then
    echo "tests/peers/corpus.sh: tripleo-heat-templates' process-templates.py failed; see $corpus/tripleo-render.log" >&2
    exit 1
  fi
  touch "$rendered_marker"
  echo "tests/peers/corpus.sh: tripleo-heat-templates rendered into $rendered" >&2
fi

# --- newton's Jinja templates, rendered as tripleo-common renders them ----------------------------
# Newton ships its registry, overcloud.yaml, puppet/post.yaml and the per-role config templates
# as Jinja only: tripleo-common (actions/templates.py) renders them when the plan is created,
# each *.j2.yaml with `roles` (roles_data.yaml) into *.yaml, each *.role.j2.yaml once per role
# with `role` (its name) into <role>-*.yaml, skipping j2_excludes.yaml's names (the role
# templates newton ships rendered). The same here, into the tree itself (the registry's paths
# are relative to it), with the heat-venv's pinned jinja2 and PyYAML. Rendering again overwrites
# the same files (none of them is shipped).
newton="$corpus/tripleo-heat-templates-newton"
newton_marker="$newton/.render-done-$( (ls "$newton"/.complete-*; cat "$here/corpus.sh") | sha256sum | cut -c1-16)"
if [ ! -f "$newton_marker" ]; then
  "$venv_python" - "$newton" <<'PYTHON'
import pathlib
import sys

import jinja2
import yaml

tree = pathlib.Path(sys.argv[1])
roles = yaml.safe_load((tree / "roles_data.yaml").read_text(encoding="utf-8"))
excluded = set(yaml.safe_load((tree / "j2_excludes.yaml").read_text(encoding="utf-8"))["name"])
rendered = 0
for source in sorted(tree.rglob("*.j2.yaml")):
    template = jinja2.Environment().from_string(source.read_text(encoding="utf-8"))
    if source.name.endswith(".role.j2.yaml"):
        outputs = [(source.with_name("%s-%s" % (role["name"].lower(),
                                                source.name.replace(".role.j2.yaml", ".yaml"))),
                    {"role": role["name"]}) for role in roles]
    else:
        outputs = [(source.with_name(source.name.replace(".j2.yaml", ".yaml")), {"roles": roles})]
    for target, variables in outputs:
        if target.relative_to(tree).as_posix() not in excluded:
            target.write_text(template.render(**variables), encoding="utf-8")
            rendered += 1
print("tests/peers/corpus.sh: %d of tripleo-heat-templates-newton's Jinja templates rendered"
      % rendered, file=sys.stderr)
PYTHON
  rm -f "$newton"/.render-done-*
  touch "$newton_marker"
fi

# --- embedded/: the templates the test modules hold as string literals ----------------------------
embedded="$corpus/embedded"
# Remade when either package's version or this script changes.
embedded_marker="$embedded/.complete-$( (ls "$corpus"/heat/.complete-* "$corpus"/heat-unit-tests/.complete-* \
  "$corpus"/heat-tempest-plugin/.complete-*; cat "$here/corpus.sh") | sha256sum | cut -c1-16)"
[ -f "$embedded_marker" ] && exit 0
rm -rf "$embedded"
mkdir -p "$embedded"
"$venv_python" - "$corpus" "$embedded" <<'PYTHON'
import ast
import pathlib
import re
import sys
import textwrap

corpus, embedded = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
sources = [("heat", corpus / "heat", "heat_integrationtests"),
           ("heat-unit-tests", corpus / "heat-unit-tests", "heat/tests"),
           ("heat-tempest-plugin", corpus / "heat-tempest-plugin", "heat_tempest_plugin/tests")]


def unindented(text):
    """The template as the test reads it: a literal whose lines are all indented (Heat's unit
    tests write `'''` then the template at the code's indentation) loses the common indentation,
    as YAML reads an indented top-level mapping."""
    return textwrap.dedent(re.sub(r"\A(?:[ \t]*\r?\n)+", "", text)).lstrip()


def literals(node, scope):
    """Yields (name, text) for each template literal assigned under `node`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from literals(child, scope + [child.name])
        elif isinstance(child, ast.Assign) and isinstance(child.value, ast.Constant) \
                and isinstance(child.value.value, str) \
                and child.value.value.lstrip().startswith("heat_template_version"):
            target = child.targets[0]
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "template")
            yield ".".join(scope + [name]), unindented(child.value.value)
        else:
            yield from literals(child, scope)


def module_constants(tree):
    """Yields (NAME, text) for each module-level UPPER_CASE string constant (the scripts a test
    passes in its files map, such as CFG1_SH)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper() \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.targets[0].id, node.value.value


count = 0
for package, root, tests in sources:
    for module in sorted((root / tests).rglob("*.py")):
        relative = module.relative_to(root).with_suffix("")
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for name, text in module_constants(tree):
            path = embedded / package / relative / (name + ".txt")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        seen = {}
        for name, text in literals(tree, []):
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = "%s.%d" % (name, seen[name])
            path = embedded / package / relative / (name + ".yaml")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            count += 1
print("tests/peers/corpus.sh: %d embedded templates written to %s" % (count, embedded), file=sys.stderr)
PYTHON
touch "$embedded_marker"

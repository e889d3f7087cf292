#!/usr/bin/env bash
# Installs a real OpenStack Heat and Keystone from PyPI into tests/peers/.cache/heat-venv
# (git-ignored), for the tests that run stacks on a real Heat engine (tests/src/real_heat.rs).
# Cached: a second run does nothing. Every dependency is pinned by constraints.txt next to this
# script (a pip freeze of a working install), so a run next year installs the same thing.
#
#   openstack-heat: heat-engine, heat-api and heat-api-cfn (run in one process by heat_all.py)
#   keystone:       the identity service (served by wsgi_serve.py)
#   python-heatclient: not used by the tests themselves; pulled so the venv can inspect a stack
#                   by hand (`heat-venv/bin/openstack stack show ...`) when a test fails
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache="$(cd "$here/.." && pwd)/.cache"
venv="$cache/heat-venv"
packages="openstack-heat==27.0.1 keystone==30.0.0 python-heatclient==5.3.0 python-openstackclient==10.5.0"
command -v python3 >/dev/null || { echo "tests/peers/real-heat/install.sh: python3 is needed to run a real Heat" >&2; exit 1; }

marker="$venv/.complete-$( (echo "$packages"; cat "$here/constraints.txt") | sha256sum | cut -c1-16)"
if [ -f "$marker" ]; then
  exit 0
fi

mkdir -p "$cache"
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "tests/peers/real-heat/install.sh: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2
  exit 1
fi
started=$(date +%s)
# One pip run: pip resolves the four together, which is faster than one run per package. When it
# fails, each package is tried alone so that the message names the one PyPI could not give.
# shellcheck disable=SC2086 # one word per package
if ! "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
    -c "$here/constraints.txt" $packages >&2; then
  for package in $packages; do
    if ! "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
        -c "$here/constraints.txt" "$package" >&2; then
      rm -rf "$venv"
      echo "tests/peers/real-heat/install.sh: cannot install $package (and its dependencies) from PyPI" \
           "into $venv; the real-Heat tests need it (is the registry reachable?)" >&2
      exit 1
    fi
  done
fi
touch "$marker"
echo "tests/peers/real-heat/install.sh: $packages ready in $venv ($(( $(date +%s) - started )) s)" >&2

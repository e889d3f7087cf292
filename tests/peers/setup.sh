#!/usr/bin/env bash
# Fetches the OpenStack peers that anneal's tests compare against, from PyPI, into
# tests/peers/.cache (git-ignored). Cached: a second run does nothing. Their code is never
# committed; tests only run it.
#
#   heat-agents (sdist): 55-heat-config, heat-config-notify, the hook scripts and the fake hooks
#   of its own test suite (tests/hook-fake.py, hook-fake-raises.py, config-tool-fake.py).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache="$here/.cache"
heat_agents_version=13.0.0
heat_agents="$cache/heat-agents"
marker="$heat_agents/.complete-$heat_agents_version"

if [ -f "$marker" ]; then
  exit 0
fi

command -v python3 >/dev/null || { echo "tests/peers/setup.sh: python3 is needed to run heat-agents' hooks" >&2; exit 1; }
mkdir -p "$cache"
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
if ! python3 -m pip download --quiet --no-deps --no-binary :all: "heat-agents==$heat_agents_version" -d "$download" >&2; then
  echo "tests/peers/setup.sh: cannot download heat-agents==$heat_agents_version from PyPI;" \
       "the compatibility tests need it (is the registry reachable?)" >&2
  exit 1
fi
rm -rf "$heat_agents"
mkdir -p "$heat_agents"
tar -xzf "$download"/heat_agents-"$heat_agents_version".tar.gz -C "$heat_agents" --strip-components=1
touch "$marker"
echo "tests/peers/setup.sh: heat-agents $heat_agents_version ready in $heat_agents" >&2

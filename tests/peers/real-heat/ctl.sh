#!/usr/bin/env bash
# The real Keystone + Heat of the tests (see ctl.py): start | status | stop [STATE_DIR].
# STATE_DIR defaults to where the tests keep the instance they share, <cargo target dir>/real-heat/shared
# (tests/src/real_heat.rs). scripts/test runs `stop` when the tests end, failing or not.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
python="$here/../.cache/heat-venv/bin/python3"
[ -x "$python" ] || { echo "tests/peers/real-heat/ctl.sh: $python is missing: run tests/peers/setup.sh" >&2; exit 1; }
exec "$python" "$here/ctl.py" "${1:?usage: ctl.sh start|status|stop [STATE_DIR]}" "${2:-${CARGO_TARGET_DIR:-$repo/target}/real-heat/shared}"

#!/usr/bin/env bash
# The real Keystone + Heat of the tests (see ctl.py): start | status | stop | revive [STATE_DIR],
# or stop-all. STATE_DIR defaults to where the tests keep the instance they share,
# <cargo target dir>/real-heat/shared; stop-all stops every instance there (the shared one and
# those a test started for itself). scripts/test runs stop-all when the tests end, failing or not.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
python="$here/../.cache/heat-venv/bin/python3"
[ -x "$python" ] || { echo "tests/peers/real-heat/ctl.sh: $python is missing: run tests/peers/setup.sh" >&2; exit 1; }
root="${CARGO_TARGET_DIR:-$repo/target}/real-heat"
command="${1:?usage: ctl.sh start|status|stop|revive [STATE_DIR] | ctl.sh stop-all}"
if [ "$command" = stop-all ]; then
  for dir in "$root"/*/; do
    if [ -f "$dir/state.json" ]; then
      "$python" "$here/ctl.py" stop "${dir%/}"
    fi
  done
  exit 0
fi
exec "$python" "$here/ctl.py" "$command" "${2:-$root/shared}"

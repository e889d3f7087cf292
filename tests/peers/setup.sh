#!/usr/bin/env bash
# Fetches the OpenStack peers that anneal's tests compare against, from PyPI, into
# tests/peers/.cache (git-ignored). Cached: a second run does nothing. Their code is never
# committed; tests only run it.
#
#   heat-agents (sdist): 55-heat-config, heat-config-notify, the hook scripts and the fake hooks
#   of its own test suite (tests/hook-fake.py, hook-fake-raises.py, config-tool-fake.py).
#   venv/ (python3 -m venv): os-collect-config, os-refresh-config, os-apply-config and
#   heat-cfntools (cfn-signal) at pinned versions, with every dependency pinned too; its python3
#   also runs heat-agents' scripts (55-heat-config needs PyYAML, heat-config-notify requests).
#   corpus/ (corpus.sh): the real templates of openstack-heat, heat-tempest-plugin and
#   tripleo-heat-templates that tests/tests/heat_corpus.rs runs through the shim.
#   ansible/ (python3 -m venv): ansible-core, whose ansible-playbook the built-in ansible hook
#   runs end to end (tests/tests/hooks_end_to_end.rs).
#   docker-py/ and salt/ (python3 -m venv): the libraries heat-agents' kubelet and salt hooks
#   import, for the differential suite (tests/tests/hooks_differential.rs).
#   prometheus/ (python3 -m venv): prometheus_client's parsers, for the metrics tests.
#   heat-venv/ (real-heat/install.sh): a real OpenStack Heat and Keystone for the tests that run
#   stacks on a real engine (real-heat/ctl.sh starts and stops them).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache="$here/.cache"
command -v python3 >/dev/null || { echo "tests/peers/setup.sh: python3 is needed to run the OpenStack peers" >&2; exit 1; }
mkdir -p "$cache"
# shellcheck source=sdist.sh
. "$here/sdist.sh"

# --- heat-agents (sdist) ------------------------------------------------------------------------
# Not pinned by sha256 (only the corpus sdists are): pip checks PyPI's own hashes.
fetch_sdist "$cache/heat-agents" heat-agents 13.0.0 heat_agents-13.0.0.tar.gz

# --- venv: os-collect-config, os-refresh-config, os-apply-config, heat-cfntools ----------------
# The packages the tests run, in install order, then every dependency's version (pip freeze of a
# working install), used as constraints so that a run next year installs the same thing.
packages="os-collect-config==14.1.0 os-refresh-config==14.1.0 os-apply-config==14.1.0 heat-cfntools==2.0.0"
constraints='attrs==26.1.0
autopage==0.6.0
boto==2.49.0
certifi==2026.10.18
cffi==2.1.1
charset-normalizer==3.5.2
cliff==4.17.0
cmd2==4.3.1
cryptography==50.0.2
debtcollector==3.1.0
decorator==5.3.1
dogpile.cache==1.5.0
idna==3.20
iso8601==2.1.0
jmespath==1.1.0
jsonpatch==1.47
jsonpointer==3.12
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
keystoneauth1==5.18.1
lxml==6.1.3
markdown-it-py==4.3.0
mdurl==0.1.2
msgpack==1.2.4
netaddr==1.3.0
openstacksdk==4.22.0
os-service-types==1.9.0
osc-lib==4.7.0
oslo.config==10.7.0
oslo.context==6.5.0
oslo.i18n==6.9.0
oslo.log==8.3.2
oslo.serialization==5.11.0
oslo.utils==10.2.0
packaging==26.3
pbr==7.1.3
platformdirs==4.14.5
prettytable==3.18.0
prompt_toolkit==3.0.53
psutil==7.2.2
pycparser==3.12
Pygments==2.21.0
pyparsing==3.3.3
pyperclip==1.11.0
pystache==0.6.8
python-dateutil==4.0.0
python-heatclient==5.3.0
python-keystoneclient==6.0.0
python-swiftclient==4.11.0
python-zaqarclient==4.7.0
PyYAML==6.0.3
referencing==0.37.0
requests==2.34.2
rfc3986==2.0.0
rich==15.0.0
rich-argparse==1.8.0
rpds-py==2026.9.1
six==1.17.0
stevedore==5.10.0
typing_extensions==4.16.0
tzdata==2026.6
urllib3==2.8.0
wcwidth==0.9.4
wrapt==2.5.2'
venv="$cache/venv"
venv_marker="$venv/.complete-$(printf '%s\n%s\n' "$packages" "$constraints" | sha256sum | cut -c1-16)"

# anneal_peer_sandbox, imported at start-up by every python of the venv (a .pth line) and active
# only while ANNEAL_PEER_SANDBOX names a directory (the tests always set it): the peers then
# write their fixed log files (cfn-signal's /var/log/cfn-signal.log, os-apply-config's
# /var/log/os-apply-config.log when run as root) into that directory instead, and may connect
# to loopback addresses only (no 169.254.169.254 metadata service, nothing off the machine).
sandbox_module='"""Keeps the OpenStack peers of anneal'"'"'s tests inside their temp dir and on loopback."""
import os

_root = os.environ.get("ANNEAL_PEER_SANDBOX")
if _root:
    import ipaddress
    import logging
    import socket
    import sys

    _file_handler_init = logging.FileHandler.__init__

    def _sandboxed_file_handler(self, filename, *args, **kwargs):
        path = os.path.abspath(os.fspath(filename))
        if not path.startswith(os.path.abspath(_root) + os.sep):
            path = os.path.join(_root, os.path.basename(path))
        _file_handler_init(self, path, *args, **kwargs)

    logging.FileHandler.__init__ = _sandboxed_file_handler

    def _check_address(sock, address):
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        host = address[0]
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host.split("%")[0]).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            message = "anneal peer sandbox: refused a connection to %r (loopback only)" % (host,)
            sys.stderr.write(message + "\n")
            raise OSError(101, message)

    _connect = socket.socket.connect
    _connect_ex = socket.socket.connect_ex

    def _sandboxed_connect(self, address):
        _check_address(self, address)
        return _connect(self, address)

    def _sandboxed_connect_ex(self, address):
        _check_address(self, address)
        return _connect_ex(self, address)

    socket.socket.connect = _sandboxed_connect
    socket.socket.connect_ex = _sandboxed_connect_ex
'

if [ ! -f "$venv_marker" ]; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >&2; then
    echo "tests/peers/setup.sh: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  printf '%s\n' "$constraints" >"$venv/constraints.txt"
  for package in $packages; do
    if ! "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
        -c "$venv/constraints.txt" "$package" >&2; then
      echo "tests/peers/setup.sh: cannot install $package (and its dependencies) from PyPI into $venv;" \
           "the compatibility tests need it (is the registry reachable?)" >&2
      exit 1
    fi
  done
  site=$("$venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s' "$sandbox_module" >"$site/anneal_peer_sandbox.py"
  echo 'import anneal_peer_sandbox' >"$site/anneal_peer_sandbox.pth"
  touch "$venv_marker"
  echo "tests/peers/setup.sh: $packages ready in $venv" >&2
fi

# --- pinned_venv NAME PACKAGES CONSTRAINTS: a venv of its own at $cache/NAME -------------------
# For peers whose dependencies clash with the main venv's. Every dependency pinned (a pip freeze
# of a working install); rebuilt only when the pins change. The sandbox module goes in too (active
# only when a test sets ANNEAL_PEER_SANDBOX).
pinned_venv() {
  local name=$1 packages=$2 constraints=$3
  local venv="$cache/$name"
  local marker
  marker="$venv/.complete-$(printf '%s\n%s\n' "$packages" "$constraints" | sha256sum | cut -c1-16)"
  [ -f "$marker" ] && return 0
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || { echo "tests/peers/setup.sh: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
  printf '%s\n' "$constraints" >"$venv/constraints.txt"
  # shellcheck disable=SC2086 # the package list is meant to split
  if ! "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check -c "$venv/constraints.txt" $packages >&2; then
    echo "tests/peers/setup.sh: cannot install $packages from PyPI into $venv (is the registry reachable?)" >&2
    exit 1
  fi
  local site
  site=$("$venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '%s' "$sandbox_module" >"$site/anneal_peer_sandbox.py"
  echo 'import anneal_peer_sandbox' >"$site/anneal_peer_sandbox.pth"
  touch "$marker"
  echo "tests/peers/setup.sh: $packages ready in $venv" >&2
}

# ansible/: ansible-core, whose ansible-playbook the built-in ansible hook runs end to end with a
# local-connection playbook.
pinned_venv ansible "ansible-core==2.18.12" 'cffi==2.1.1
cryptography==50.0.2
Jinja2==3.1.6
MarkupSafe==3.0.4
packaging==26.4
pycparser==3.12
PyYAML==6.0.4
resolvelib==1.0.1'

# docker-py/: docker-py 1.10, the Docker client heat-agents' kubelet hook imports (its
# docker.Client is gone from docker-py 2 on); the differential suite runs that hook with it
# against a fake Docker engine on loopback.
pinned_venv docker-py "docker-py==1.10.6" 'certifi==2026.10.19.post1
charset-normalizer==3.5.3
docker-pycreds==0.4.0
idna==3.20
requests==2.34.2
six==1.17.0
urllib3==2.8.0
websocket-client==1.9.2'

# prometheus/: prometheus_client, the reference parser of the Prometheus text formats, with which
# the metrics tests read the shim's /metrics and the agent's textfile.
pinned_venv prometheus "prometheus-client==0.26.0" ''

# salt/: Salt, which heat-agents' salt hook drives in-process and whose salt-call the built-in
# salt hook runs; the differential suite applies heat-agents' test states with both.
pinned_venv salt "salt==3008.4" "$(cat "$here/salt-constraints.txt")"

# --- heat-venv: openstack-heat and keystone -----------------------------------------------------
"$here/real-heat/install.sh"

# --- corpus: real Heat templates (sdists, sha256-checked; TripleO's rendered with the heat-venv) -
"$here/corpus.sh"

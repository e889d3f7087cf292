"""Starts, checks and stops the tests' real OpenStack Keystone + Heat on loopback.

usage: ctl.py start STATE_DIR    print the running instance's state (JSON), starting it if none
                                 is healthy
       ctl.py status STATE_DIR   print the state and exit 0 when healthy, exit 1 otherwise
       ctl.py stop STATE_DIR     stop the instance by the pids in its state file
       ctl.py revive STATE_DIR   start again, on the same port, each service of the instance that
                                 no longer runs (a test that killed one); print the state

Run by the python3 of tests/peers/.cache/heat-venv (install.sh). One instance serves a whole
test run: each test process runs `start`, which holds STATE_DIR.lock (flock) while it checks the
state file and, when the instance it names is not healthy, wipes STATE_DIR and starts a new one.
Keystone (fernet tokens, SQLite) and Heat (engine + heat-api + heat-api-cfn in one process,
heat_all.py) each listen on a port picked at start; the admin password is random per start and
kept in the state file (0600). The services run in their own sessions with their output in
STATE_DIR/logs, so they outlive the test that started them and hold none of its pipes; `stop`
ends them (scripts/test runs `ctl.sh stop-all` when the tests end, failing or not). Every wait is
bounded, and a failed start prints the tail of each service's logs.
"""

import fcntl
import grp
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.dirname(os.path.dirname(sys.executable))
HOST = "127.0.0.1"
REGION = "RegionOne"
START_LIMIT_SECONDS = {"keystone": 90, "heat": 150}
COMMAND_LIMIT_SECONDS = 240
STOP_GRACE_SECONDS = 10


class StartFailed(Exception):
    pass


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "status", "stop", "revive"):
        sys.exit(__doc__)
    command, state_dir = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(os.path.dirname(state_dir), exist_ok=True)
    with open(state_dir + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = read_state(state_dir)
        healthy = state is not None and is_healthy(state)
        if command == "status":
            print(json.dumps(state))
            sys.exit(0 if healthy else 1)
        if command == "stop":
            stop(state)
            shutil.rmtree(state_dir, ignore_errors=True)
            return
        if command == "revive" and state is not None:
            revive(state_dir, state)
            print(json.dumps(state))
            return
        if not healthy:
            stop(state)
            state = start(state_dir)
        print(json.dumps(state))


def read_state(state_dir):
    try:
        with open(os.path.join(state_dir, "state.json")) as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def is_healthy(state):
    if not all(process_runs(pid) for pid in state["pids"].values()):
        return False
    urls = [state["keystone_url"], state["heat_api_url"] + "/", state["heat_cfn_url"] + "/"]
    return all(answers(url) for url in urls)


def process_runs(pid):
    """Whether pid is one of ours and alive (not a zombie, not a reused pid)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as file:
            command_line = file.read()
        with open("/proc/%d/stat" % pid) as file:
            process_state = file.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return HERE.encode() in command_line and process_state != "Z"


def answers(url):
    try:
        urllib.request.urlopen(url, timeout=3).close()
        return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def stop(state):
    if state is None:
        return
    pids = [pid for pid in state["pids"].values() if process_runs(pid)]
    for pid in pids:
        kill_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline and any(process_runs(pid) for pid in pids):
        time.sleep(0.1)
    for pid in pids:
        if process_runs(pid):
            kill_group(pid, signal.SIGKILL)
    for name, pid in state["pids"].items():
        print("ctl.py: stopped %s (pid %d)" % (name, pid), file=sys.stderr)


def kill_group(pid, sig):
    # Each service leads its own session and process group (start_new_session).
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def free_ports(count):
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind((HOST, 0))
        sockets.append(sock)
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def start(state_dir):
    began = time.monotonic()
    shutil.rmtree(state_dir, ignore_errors=True)
    for sub in ("etc", "data", "logs"):
        os.makedirs(os.path.join(state_dir, sub), mode=0o700)
    keystone_port, api_port, cfn_port = free_ports(3)
    state = {
        "keystone_url": "http://%s:%d/v3" % (HOST, keystone_port),
        "heat_api_url": "http://%s:%d" % (HOST, api_port),
        "heat_cfn_url": "http://%s:%d" % (HOST, cfn_port),
        "region": REGION,
        "admin": {"user": "admin", "password": secrets.token_hex(16), "project": "admin", "domain": "Default"},
        "pids": {},
        "logs": os.path.join(state_dir, "logs"),
    }
    service_passwords = {"heat": secrets.token_hex(16), "heat_domain_admin": secrets.token_hex(16)}
    try:
        start_keystone(state_dir, state, keystone_port)
        create_heat_identities(state, service_passwords)
        start_heat(state_dir, state, service_passwords, api_port, cfn_port)
    except StartFailed as error:
        print("ctl.py: cannot start the real Heat: %s" % error, file=sys.stderr)
        print_log_tails(os.path.join(state_dir, "logs"))
        stop(state)
        sys.exit(1)
    state["start_seconds"] = round(time.monotonic() - began, 1)
    write_state(state_dir, state)
    print("ctl.py: real Keystone + Heat up in %.1f s (%s)" % (state["start_seconds"], state_dir), file=sys.stderr)
    return state


def write_state(state_dir, state):
    path = os.path.join(state_dir, "state.json")
    with open(os.open(path + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        json.dump(state, file, indent=1)
    os.rename(path + ".new", path)


def revive(state_dir, state):
    for name, pid in list(state["pids"].items()):
        if process_runs(pid):
            continue
        command = state["commands"][name]
        try:
            process = spawn(state_dir, state, name, command["argv"], command["env"], command["health"])
            wait_answering(process, name, command["health"])
        except StartFailed as error:
            print("ctl.py: cannot start %s again: %s" % (name, error), file=sys.stderr)
            print_log_tails(os.path.join(state_dir, "logs"))
            sys.exit(1)
        print("ctl.py: started %s again (pid %d)" % (name, process.pid), file=sys.stderr)
    write_state(state_dir, state)


def run(state_dir, name, argv, env=None):
    log = os.path.join(state_dir, "logs", name + ".log")
    with open(log, "ab") as output:
        try:
            result = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=output, stderr=output, env=env, timeout=COMMAND_LIMIT_SECONDS
            )
        except subprocess.TimeoutExpired:
            raise StartFailed("%s did not finish within %d s" % (" ".join(argv[:3]), COMMAND_LIMIT_SECONDS))
    if result.returncode != 0:
        raise StartFailed("%s exited %d (log: %s)" % (" ".join(argv[:3]), result.returncode, log))


def spawn(state_dir, state, name, argv, extra_env, health):
    """Starts a service in its own session; the state keeps how, for `revive`."""
    log = os.path.join(state_dir, "logs", name + ".out")
    with open(log, "ab") as output:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            env=dict(os.environ, **extra_env),
            start_new_session=True,
        )
    state["pids"][name] = process.pid
    state.setdefault("commands", {})[name] = {"argv": argv, "env": extra_env, "health": health}
    return process


def wait_answering(process, name, urls):
    deadline = time.monotonic() + START_LIMIT_SECONDS[name]
    while not all(answers(url) for url in urls):
        if process.poll() is not None:
            raise StartFailed("%s exited %d while starting" % (name, process.returncode))
        if time.monotonic() > deadline:
            raise StartFailed("%s did not answer on %s within %d s" % (name, urls, START_LIMIT_SECONDS[name]))
        time.sleep(0.25)


def start_keystone(state_dir, state, port):
    data = os.path.join(state_dir, "data")
    config = os.path.join(state_dir, "etc", "keystone.conf")
    with open(config, "w") as file:
        file.write(
            "[DEFAULT]\nlog_file = {logs}/keystone.log\n"
            # bcrypt's minimum: the stock heat collector authenticates with a password on
            # every poll, and wsgi_serve.py serves one request at a time.
            "[identity]\npassword_hash_rounds = 4\n"
            "[database]\nconnection = sqlite:///{data}/keystone.db?timeout=60\n"
            "[token]\nprovider = fernet\n"
            "[fernet_tokens]\nkey_repository = {data}/fernet-keys\n"
            "[fernet_receipts]\nkey_repository = {data}/fernet-keys\n"
            "[credential]\nkey_repository = {data}/credential-keys\n".format(logs=state["logs"], data=data)
        )
    user = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    manage = [os.path.join(VENV, "bin", "keystone-manage"), "--config-file", config]
    owner = ["--keystone-user", user, "--keystone-group", group]
    run(state_dir, "keystone-manage", manage + ["fernet_setup"] + owner)
    run(state_dir, "keystone-manage", manage + ["credential_setup"] + owner)
    run(state_dir, "keystone-manage", manage + ["db_sync"])
    url = state["keystone_url"]
    bootstrap = ["bootstrap", "--bootstrap-password", state["admin"]["password"], "--bootstrap-region-id", REGION]
    for interface in ("admin", "public", "internal"):
        bootstrap += ["--bootstrap-%s-url" % interface, url]
    run(state_dir, "keystone-manage", manage + bootstrap)
    write_ahead_log(os.path.join(data, "keystone.db"))
    server = [sys.executable, os.path.join(HERE, "wsgi_serve.py"), "keystone.wsgi.api:application", HOST, str(port)]
    process = spawn(state_dir, state, "keystone", server, {"OS_KEYSTONE_CONFIG_FILES": config}, [url])
    wait_answering(process, "keystone", [url])


def create_heat_identities(state, passwords):
    """What a Heat deployment needs in Keystone: the service user, the catalog, the stack users'
    domain with its admin, and the roles Heat gives stack owners and stack users."""
    keystone = Keystone(state)
    admin_role = keystone.find("roles", "admin")
    service = keystone.create("projects", "project", {"name": "service", "domain_id": "default"})
    heat = keystone.create("users", "user", {"name": "heat", "domain_id": "default", "password": passwords["heat"]})
    keystone.call("PUT", "/projects/%s/users/%s/roles/%s" % (service, heat, admin_role))
    catalog = (
        ("heat", "orchestration", state["heat_api_url"] + "/v1/%(tenant_id)s"),
        ("heat-cfn", "cloudformation", state["heat_cfn_url"] + "/v1"),
    )
    for name, kind, url in catalog:
        service_id = keystone.create("services", "service", {"name": name, "type": kind})
        for interface in ("public", "internal", "admin"):
            endpoint = {"service_id": service_id, "url": url, "interface": interface, "region_id": REGION}
            keystone.create("endpoints", "endpoint", endpoint)
    domain = keystone.create("domains", "domain", {"name": "heat", "description": "heat stack users"})
    domain_admin = keystone.create(
        "users", "user", {"name": "heat_domain_admin", "domain_id": domain, "password": passwords["heat_domain_admin"]}
    )
    keystone.call("PUT", "/domains/%s/users/%s/roles/%s" % (domain, domain_admin, admin_role))
    owner_role = keystone.create("roles", "role", {"name": "heat_stack_owner"})
    keystone.create("roles", "role", {"name": "heat_stack_user"})
    admin = keystone.find("users", "admin")
    admin_project = keystone.find("projects", "admin")
    keystone.call("PUT", "/projects/%s/users/%s/roles/%s" % (admin_project, admin, owner_role))


class Keystone:
    """Keystone's v3 API as the bootstrap admin (standard library only)."""

    def __init__(self, state):
        self.url = state["keystone_url"]
        admin = state["admin"]
        scope = {"project": {"name": admin["project"], "domain": {"name": admin["domain"]}}}
        user = {"name": admin["user"], "domain": {"name": admin["domain"]}, "password": admin["password"]}
        body = {"auth": {"identity": {"methods": ["password"], "password": {"user": user}}, "scope": scope}}
        self.token = None
        self.token = self.call("POST", "/auth/tokens", body, token_header=True)

    def call(self, method, path, body=None, token_header=False):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("X-Auth-Token", self.token)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                if token_header:
                    return response.headers["X-Subject-Token"]
                payload = response.read()
        except (OSError, urllib.error.HTTPError) as error:
            raise StartFailed("keystone %s %s: %s" % (method, path, error))
        return json.loads(payload) if payload else None

    def create(self, collection, kind, fields):
        return self.call("POST", "/" + collection, {kind: fields})[kind]["id"]

    def find(self, collection, name):
        found = self.call("GET", "/%s?name=%s" % (collection, name))[collection]
        if len(found) != 1:
            raise StartFailed("keystone has %d %s named %s" % (len(found), collection, name))
        return found[0]["id"]


def write_ahead_log(database):
    """Puts a SQLite database in WAL mode (it stays so): readers neither wait for the writer nor
    make it wait. Writers take turns (sqlite_writers.py), each waiting up to the connection
    URLs' timeout=60 for the other."""
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA journal_mode=WAL")


def never_reuse_ids(database):
    """Gives every integer primary key of a new (empty) database AUTOINCREMENT.

    Without it SQLite hands out the largest id + 1, so an id freed by deleting the newest row is
    given again to the next row; MySQL and PostgreSQL never reuse ids, and Heat relies on that.
    On a stack update Heat deletes a deployment's attribute data row and then, by that id,
    deletes again what it believes is the same row: on plain SQLite that is by then the
    deployment's new properties row, and the stack breaks ("ResourcePropertiesData with id ...
    not found" for every read of the stack or its server's metadata). Each table is rebuilt with
    the same columns and indexes; the other tables' foreign keys keep naming it
    (legacy_alter_table).
    """
    connection = sqlite3.connect(database, isolation_level=None)
    try:
        connection.execute("PRAGMA legacy_alter_table=ON")
        connection.execute("BEGIN")
        tables = connection.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        for name, sql in tables:
            rebuilt = re.sub(r"\n\s*id INTEGER NOT NULL,", "\n\tid INTEGER PRIMARY KEY AUTOINCREMENT,", sql, count=1)
            rebuilt = re.sub(r",\s*PRIMARY KEY \(id\)", "", rebuilt, count=1)
            if rebuilt == sql or "AUTOINCREMENT" not in rebuilt or "PRIMARY KEY (id)" in rebuilt:
                continue
            indexes = connection.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", (name,)
            ).fetchall()
            connection.execute('ALTER TABLE "%s" RENAME TO "%s_before_autoincrement"' % (name, name))
            connection.execute(rebuilt)
            connection.execute('INSERT INTO "%s" SELECT * FROM "%s_before_autoincrement"' % (name, name))
            connection.execute('DROP TABLE "%s_before_autoincrement"' % name)
            for (index,) in indexes:
                connection.execute(index)
        connection.execute("COMMIT")
    finally:
        connection.close()


def start_heat(state_dir, state, passwords, api_port, cfn_port):
    config = os.path.join(state_dir, "etc", "heat.conf")
    with open(config, "w") as file:
        file.write(heat_config(state_dir, state, passwords))
    run(state_dir, "heat-manage", [os.path.join(VENV, "bin", "heat-manage"), "--config-file", config, "db_sync"])
    never_reuse_ids(os.path.join(state_dir, "data", "heat.db"))
    write_ahead_log(os.path.join(state_dir, "data", "heat.db"))
    server = [sys.executable, os.path.join(HERE, "heat_all.py"), str(api_port), str(cfn_port), "--config-file", config]
    health = [state["heat_api_url"] + "/", state["heat_cfn_url"] + "/"]
    process = spawn(state_dir, state, "heat", server, {}, health)
    wait_answering(process, "heat", health)


def heat_config(state_dir, state, passwords):
    keystone = state["keystone_url"]
    service_user = (
        "auth_type = password\nauth_url = {keystone}\nusername = heat\npassword = {password}\n"
        "user_domain_name = Default\n"
    ).format(keystone=keystone, password=passwords["heat"])
    service_scope = "project_name = service\nproject_domain_name = Default\n"
    return (
        "[DEFAULT]\n"
        "log_file = {logs}/heat.log\n"
        "transport_url = fake://\n"
        "host = heat-local\n"
        "num_engine_workers = 1\n"
        "region_name_for_services = {region}\n"
        "heat_metadata_server_url = {cfn}\n"
        "heat_waitcondition_server_url = {cfn}/v1/waitcondition\n"
        "stack_user_domain_name = heat\n"
        "stack_domain_admin = heat_domain_admin\n"
        "stack_domain_admin_password = {domain_admin_password}\n"
        "deferred_auth_method = trusts\n"
        "[database]\nconnection = sqlite:///{data}/heat.db?timeout=60\n"
        "[paste_deploy]\napi_paste_config = {venv}/etc/heat/api-paste.ini\n"
        "[keystone_authtoken]\nwww_authenticate_uri = {keystone}\n{service_user}{service_scope}"
        "[trustee]\n{service_user}"
        "[clients_keystone]\nauth_uri = {keystone_root}\n"
        # heat-api-cfn's ec2token middleware checks signatures with Keystone through a
        # keystoneauth session: without these options every cfn request answers 500.
        "[ec2authtoken]\n{service_user}{service_scope}endpoint_override = {keystone_root}\n"
        "[oslo_messaging_notifications]\ndriver = noop\n"
        "[oslo_policy]\npolicy_file = {policy}\n"
    ).format(
        logs=state["logs"],
        region=REGION,
        cfn=state["heat_cfn_url"],
        domain_admin_password=passwords["heat_domain_admin"],
        data=os.path.join(state_dir, "data"),
        venv=VENV,
        keystone=keystone,
        keystone_root=keystone[: -len("/v3")],
        service_user=service_user,
        service_scope=service_scope,
        policy=os.path.join(HERE, "heat-policy.yaml"),
    )


def print_log_tails(logs):
    for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        with open(os.path.join(logs, name), errors="replace") as file:
            tail = file.readlines()[-25:]
        print("----- %s (last %d lines) -----\n%s" % (name, len(tail), "".join(tail)), file=sys.stderr)


if __name__ == "__main__":
    main()

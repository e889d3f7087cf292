"""Runs heat-engine, heat-api and heat-api-cfn in one process, on loopback ports.

usage: heat_all.py API_PORT CFN_PORT --config-file heat.conf

The engine and the APIs share one process because the tests run Heat with
`transport_url = fake://`, an in-process RPC transport (no message broker). openstack-heat 27
ships only heat-engine and the WSGI applications, so this script composes them: the engine is
started directly (EngineService.start()) rather than through oslo.service's launcher, whose
threading backend forks a worker process even for one worker and would put the engine out of
reach of the APIs' fake transport. Both APIs are bound before the engine starts, so a port taken
in the meantime fails the start at once. SIGTERM stops it (bounded: 10 s, then exit).
"""

import os
import signal
import socketserver
import sys
import threading
from wsgiref import simple_server

import sqlite_writers  # noqa: F401 (its effect: SQLite transactions begin IMMEDIATE)

# oslo.service 4 must choose its backend before anything imports it.
from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

import oslo_i18n  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_log import log as logging  # noqa: E402

from heat import version  # noqa: E402
from heat.common import config, messaging, profiler  # noqa: E402
from heat.engine import template  # noqa: E402
from heat.rpc import api as rpc_api  # noqa: E402

HOST = "127.0.0.1"
STOP_GRACE_SECONDS = 10


class ThreadedServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    request_queue_size = 64


def access_log_handler(name):
    log = logging.getLogger(name + ".access")

    class Handler(simple_server.WSGIRequestHandler):
        def log_message(self, format, *args):
            log.info("%s %s", self.address_string(), format % args)

    return Handler


def bind_apis(api_port, cfn_port):
    servers = []
    for name, port in (("heat-api", api_port), ("heat-api-cfn", cfn_port)):
        application = config.load_paste_app(name)
        server = simple_server.make_server(
            HOST, port, application, server_class=ThreadedServer, handler_class=access_log_handler(name)
        )
        servers.append((name, port, server))
    return servers


def main():
    api_port, cfn_port = int(sys.argv[1]), int(sys.argv[2])
    conf = cfg.CONF
    oslo_i18n.enable_lazy()
    logging.register_options(conf)
    conf(sys.argv[3:], project="heat", prog="heat-all", version=version.version_info.version_string())
    logging.setup(conf, "heat-all")
    config.set_config_defaults()
    messaging.setup()
    config.startup_sanity_check()
    log = logging.getLogger("heat-all")
    extensions = template._get_template_extension_manager()
    if not extensions or not extensions.names():
        sys.exit("heat_all.py: no template format plugins are registered")

    servers = bind_apis(api_port, cfn_port)
    from heat.engine import service as engine_service

    profiler.setup("heat-all", conf.host)
    engine = engine_service.EngineService(conf.host, rpc_api.ENGINE_TOPIC)
    engine.start()
    for name, port, server in servers:
        threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
        log.info("%s listening on %s:%d", name, HOST, port)
    print("heat-api on %s:%d, heat-api-cfn on %s:%d" % (HOST, api_port, HOST, cfn_port), flush=True)

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    while not stopping.wait(3600):
        pass
    log.info("stopping")
    for _, _, server in servers:
        server.shutdown()
    threading.Timer(STOP_GRACE_SECONDS, lambda: os._exit(0)).start()
    try:
        engine.stop()
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()

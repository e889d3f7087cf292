"""Serves one WSGI application on a loopback port with the standard library's server.

usage: wsgi_serve.py MODULE:ATTRIBUTE HOST PORT

Keystone 30 ships its WSGI application (keystone.wsgi.api) but no server script; the application
parses sys.argv with oslo.config when it is imported, so the arguments are read and removed
before the import. The configuration comes from OS_KEYSTONE_CONFIG_FILES.

Requests are served one at a time. Keystone's request handling is not safe across threads of
one process (it runs under process-based servers in production): with a thread per request,
Heat's trust creation for one stack was once judged with the domain scope of the stack domain
admin's concurrent request and refused ("identity:create_trust ... request was made with domain
scope"). One at a time costs little: ctl.py lowers the password hash rounds, so a password
authentication takes milliseconds.
"""

import importlib
import sys
from wsgiref import simple_server

import sqlite_writers  # noqa: F401 (its effect: SQLite transactions begin IMMEDIATE)


class Server(simple_server.WSGIServer):
    request_queue_size = 128


class QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format, *args):
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), format % args))


def main():
    target, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    del sys.argv[1:]
    module, attribute = target.split(":")
    application = getattr(importlib.import_module(module), attribute)
    server = simple_server.make_server(
        host, port, application, server_class=Server, handler_class=QuietHandler
    )
    print("serving %s on %s:%d" % (target, host, port), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""Makes every SQLite transaction of this process take the write lock when it begins.

oslo.db starts SQLite transactions with a plain (deferred) BEGIN: a transaction reads first and
asks for the write lock later, and when two threads do that at once SQLite cannot wait (neither
can go on) and fails one of them with "database is locked" at once, whatever the busy timeout.
Heat's engine works on two stacks at once in threads, so it hit that. With BEGIN IMMEDIATE, a
transaction takes the write lock up front and a second writer waits (the connection URLs'
`timeout=60`) instead of failing. The listener is on the Engine class, so it runs before
oslo.db's own listener on each engine, which then sees the transaction begun and skips its BEGIN.
Imported for its effect by heat_all.py and wsgi_serve.py.
"""

import sqlalchemy
from sqlalchemy.engine import Engine


@sqlalchemy.event.listens_for(Engine, "begin")
def _begin_immediate(connection):
    if connection.dialect.name == "sqlite" and "in_transaction" not in connection.info:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        connection.info["in_transaction"] = True

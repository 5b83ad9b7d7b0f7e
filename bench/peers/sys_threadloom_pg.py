"""Threadloom on PostgreSQL: the Threadloom system of ``sys_threadloom.py`` (the chat agent
of bench/_workload.py on the scripted model, a turn = ``send_message`` + ``wait_idle``),
with ``Runtime.open`` given the URL of the run's own schema instead of a SQLite file: the
PostgreSQL store (``threadloom[postgres]``, psycopg 3) with its defaults — a connection per
worker thread (``THREADLOOM_DB_POOL_SIZE``, 10), one transaction per store call, each
durable write committed with the server's ``synchronous_commit`` (on).

The two-node row of the concurrent scenario (``threadloom-pg-2-nodes``) is two processes of
this system on one schema, each with half of the threads, driven at once by the driver
(bench_peers.py)."""

from __future__ import annotations

from sys_threadloom import Threadloom

from threadloom.store.postgres.store import PostgresStore


class ThreadloomPg(Threadloom):
    name = "threadloom-pg"
    backend = "postgresql"
    packages = ("threadloom", "psycopg", "psycopg-binary")

    def store_url(self, path: str) -> str:
        return path  # the schema's postgresql:// URL

    def describe(self) -> str:
        store = self.runtime.store
        assert isinstance(store, PostgresStore)
        return (
            f"Runtime.open on PostgreSQL (PostgresStore, {store.pool_size} connections on"
            " worker threads, one transaction per store call), each message committed as it"
            " is stored"
        )


SYSTEM = ThreadloomPg()

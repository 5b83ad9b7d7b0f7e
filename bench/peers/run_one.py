"""Run one system on one scenario in this process and print the result as one JSON line:
``python bench/peers/run_one.py SYSTEM SCENARIO --workdir DIR [options]``.

Threadloom and the raw floors run on the project's ``.venv``; the peers on ``.venv-bench``
(``make bench-peers`` builds it from ``bench/peers/requirements.txt``). A system on
PostgreSQL also takes ``--database URL``: a schema of its own (``_pg.schema_url``)."""

from __future__ import annotations

import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # bench/peers, then bench/ (the turn bench)

MODULES = {
    "threadloom": "sys_threadloom",
    "threadloom-tuned-gc": "sys_threadloom_tuned_gc",
    "raw-sqlite3": "sys_raw",
    "langgraph": "sys_langgraph",
    "openai-agents": "sys_openai_agents",
    "pydantic-ai": "sys_pydantic_ai",
    "threadloom-pg": "sys_threadloom_pg",
    "raw-psycopg": "sys_raw_pg",
    "langgraph-pg": "sys_langgraph_pg",
    "openai-agents-pg": "sys_openai_agents_pg",
}


def entry(argv: list[str]) -> int:
    from _common import main

    if not argv or argv[0] not in MODULES:
        print(f"usage: run_one.py {{{','.join(MODULES)}}} SCENARIO ...", file=sys.stderr)
        return 2
    module = importlib.import_module(MODULES[argv[0]])
    return main(module.SYSTEM, argv)


if __name__ == "__main__":
    sys.exit(entry(sys.argv[1:]))

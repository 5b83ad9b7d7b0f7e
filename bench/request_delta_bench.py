"""LLM log rows at a long history: request bodies stored whole against stored as deltas.

Run with ``.venv/bin/python bench/request_delta_bench.py`` (``--help`` for the sizes). A
benchmark, not a test: it prints its table and exits 0.

Each mode inserts the same rows into a fresh database through ``Store.insert_log``: row
*i* is a model request over ``--history`` messages plus two more per earlier row (an
assistant tool call and its result, as a tool loop grows the history), ~125 bytes of
JSON per message, with a tools schema and a system prompt in its suffix. ``whole``
inserts rows without ``request_delta`` (every body stored in full, as before migration
5); ``delta`` describes each request against the previous row. Times: per row, with
building its text (as the engine does, in both modes), and ``insert_log`` alone (p50 and
max: a root's full write is the max of ``delta``). Bytes written are the
``write()`` bytes of this process (``/proc/self/io`` ``wchar``: WAL frames and
checkpoints), and the file sizes after the last insert. Reads, after the inserts: ``get_log``
of the last row (the median of 21), and ``list_logs`` of all rows once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from _report import table
from threadloom import Runtime
from threadloom.records import LogRow, json_compact, new_id
from threadloom.store.base import RequestDelta

PREFIX = '{"model":"bench-model","messages":['
TOOLS = [
    {"name": f"tool_{n}", "description": "d" * 200, "parameters": {"type": "object"}}
    for n in range(10)
]
SUFFIX = (
    '],"tools":'
    + json_compact(TOOLS)
    + ',"_metadata":'
    + json_compact({"promptName": "p", "systemPrompt": "s" * 2000})
    + "}"
)


def message(n: int) -> str:
    """One message's JSON text, ~125 bytes."""
    return json_compact(
        {"role": "user" if n % 2 else "assistant", "content": f"{n:06d} " + "w" * 88}
    )


def wchar() -> int:
    with open("/proc/self/io", encoding="ascii") as io:
        for line in io:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def files_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def run(mode: str, path: Path, history: int, rows: int) -> dict[str, float]:
    runtime = await Runtime.open(f"sqlite:///{path}")
    try:
        tid = (await runtime.create_thread("bench")).thread_id
        messages = [message(n) for n in range(history)]
        base: str | None = None
        keep = 0
        written = wchar()
        started = time.perf_counter()
        ids = []
        inserts = []
        for _ in range(rows):
            text = PREFIX + ",".join(messages) + SUFFIX
            delta = RequestDelta(base, keep, PREFIX, tuple(messages[keep:]), SUFFIX)
            row = LogRow(
                id=new_id(),
                provider="scripted",
                model="m",
                created_at=0,
                is_complete=False,
                request_body=text,
                request_delta=delta if mode == "delta" else None,
            )
            begun = time.perf_counter()
            stored, _ = await runtime.store.insert_log(tid, row)
            inserts.append((time.perf_counter() - begun) * 1000)
            ids.append(stored.id)
            base, keep = stored.id, len(messages)
            messages = [*messages, message(len(messages)), message(len(messages) + 1)]
        elapsed = time.perf_counter() - started
        written = wchar() - written
        size = files_size(path)
        await runtime.store.get_log(tid, ids[0])  # the reader connections open
        samples = []
        for _ in range(21):
            started = time.perf_counter()
            last = await runtime.store.get_log(tid, ids[-1])
            samples.append((time.perf_counter() - started) * 1000)
        get_ms = sorted(samples)[10]
        started = time.perf_counter()
        listed = await runtime.store.list_logs(tid, limit=None)
        list_ms = (time.perf_counter() - started) * 1000
        assert last is not None and len(listed) == rows
        return {
            "ms_per_row": elapsed * 1000 / rows,
            "insert_p50": sorted(inserts)[rows // 2],
            "insert_max": max(inserts),
            "kb_written_per_insert": written / rows / 1024,
            "mb_files": size / 1024 / 1024,
            "get_ms": get_ms,
            "list_ms": list_ms,
            "body_kb": len(text) / 1024,
        }
    finally:
        await runtime.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=2000, help="messages in the first row")
    parser.add_argument("--rows", type=int, default=100, help="log rows inserted per mode")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        for mode in ("whole", "delta"):
            results[mode] = await run(mode, Path(tmp) / f"{mode}.db", args.history, args.rows)
    body_kb = results["whole"]["body_kb"]
    print(f"{args.rows} LLM log rows, history {args.history}+ messages, last body {body_kb:.0f} KB")
    keys = [
        ("ms / row (building its text included)", "ms_per_row", "{:.2f}"),
        ("insert_log p50, ms", "insert_p50", "{:.2f}"),
        ("insert_log max, ms", "insert_max", "{:.2f}"),
        ("KB written / insert", "kb_written_per_insert", "{:.1f}"),
        ("DB + WAL files, MB", "mb_files", "{:.1f}"),
        ("get_log (last row), p50 ms", "get_ms", "{:.2f}"),
        (f"list_logs ({args.rows} rows), ms", "list_ms", "{:.1f}"),
    ]
    lines = []
    for label, key, fmt in keys:
        whole, delta = results["whole"][key], results["delta"][key]
        lines.append([label, fmt.format(whole), fmt.format(delta), f"{delta / whole:.3f}"])
    print(table(["", "whole", "delta", "delta / whole"], lines))


if __name__ == "__main__":
    asyncio.run(main())

"""Soak benchmark: memory, open descriptors and turn latency over minutes of load.

Run with ``make bench-soak`` (or ``.venv/bin/python bench/soak_bench.py --minutes 2``). It
is a benchmark, not a test: it prints its tables and exits 0.

A child process (this file with ``--child``) opens a Runtime on a fresh SQLite file with
the turn benchmark's agent (``_workload.py``: the scripted model calls one tool, then
answers) and serves it with uvicorn, as ``threadloom serve`` does (``websockets-sansio``,
the collector tuned). In the child, ``--workers`` tasks run turns back to back — each on
one of its ``--reused`` threads (replaced by a new one after ``--reuse-turns`` turns, so
histories stop growing), and every ``--new-every``-th turn on a thread created for it
and never used again — and every ``--sample`` seconds the child writes its resident
memory (``VmRSS``), its open file descriptors, the turns done, the turn latency of the
window (send → idle), the bus's subscribers and the entries of the hub's per-thread maps.

This process plays the slow subscribers, every ``--round-every`` seconds one round: it
opens ``--sockets`` stream WebSockets, one SSE response and one ``/api/events`` socket
that never read a byte, then PATCHes one message ``--patches`` times with
``--patch-kb`` KiB of content (each PATCH is one large ``message_data`` frame for every
subscriber), and drops the previous round's connections. The server has to cut them off
(close 4008) and give their memory back.

The table shows the samples; below it, the growth per 1,000 turns of each figure,
fitted (least squares) over the samples after ``--warmup`` seconds. RSS growth near zero
is the goal. The warm-history budget is ``--warm-messages`` (the server default of
100,000 messages would take the whole run to fill, and count as growth).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from _report import percentile, progress, table

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "soak-admin-token-" + "s" * 32
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
HUB_MAPS = (
    "_locks",
    "_deferred",
    "_terminated",
    "_histories",
    "_warm",
    "_running",
    "_warm_sizes",
    "_stale_warm",
    "_seq",
    "_queue_empty",
    "registry_checked",
)


# -- the server side (child process) ----------------------------------------------------------


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def hub_entries(hub: Any) -> int:
    """Entries of the hub's per-thread maps (those that exist in this version)."""
    total = 0
    for name in HUB_MAPS:
        value = getattr(hub, name, None)
        if value is not None:
            total += len(value)
    return total


async def serve_child(args: argparse.Namespace) -> None:
    import uvicorn

    from _workload import make_definitions, one_turn
    from threadloom import Runtime, tune_gc
    from threadloom.server.app import create_app
    from threadloom.server.settings import ServerSettings

    definitions = make_definitions(fixed_usage=True)
    model = definitions.model("M")
    assert model is not None
    provider = model.provider  # counts every model request (a turn makes 2: call, answer)
    runtime = await Runtime.open(
        args.store, definitions=definitions, warm_messages=args.warm_messages
    )
    app = create_app(runtime, ServerSettings(auth="required", admin_token=TOKEN))
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="error", lifespan="off", ws="websockets-sansio"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    tune_gc()
    port = server.servers[0].sockets[0].getsockname()[1]
    print(json.dumps({"port": port}), flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    turns = 0
    threads = 0
    window: list[float] = []

    async def worker(w: int) -> None:
        nonlocal turns, threads
        reused = [(await runtime.create_thread("chat")).thread_id for _ in range(args.reused)]
        uses = [0] * len(reused)
        threads += len(reused)
        i = 0
        while not stop.is_set():
            if i % args.new_every == args.new_every - 1:
                thread_id = (await runtime.create_thread("chat")).thread_id
                threads += 1
            else:
                slot = i % len(reused)
                if uses[slot] == args.reuse_turns:  # retired: its history stops growing
                    reused[slot] = (await runtime.create_thread("chat")).thread_id
                    uses[slot] = 0
                    threads += 1
                uses[slot] += 1
                thread_id = reused[slot]
            start = time.perf_counter()
            await one_turn(runtime, thread_id, i)
            window.append(time.perf_counter() - start)
            turns += 1
            i += 1

    workers = [asyncio.create_task(worker(w)) for w in range(args.workers)]
    started = time.monotonic()

    def sample() -> None:
        lat = sorted(window)
        window.clear()
        line = {
            "t": round(time.monotonic() - started, 1),
            "turns": turns,
            "threads": threads,
            "rss_kib": rss_kib(),
            "fds": open_fds(),
            "p50_ms": percentile(lat, 50) * 1000 if lat else None,
            "p99_ms": percentile(lat, 99) * 1000 if lat else None,
            "subscribers": runtime.events.subscriber_count,
            "hub": hub_entries(runtime.hub),
            "requests": getattr(provider, "request_count", 0),
            "kept": getattr(runtime.hub, "_warm_total", 0),
        }
        print(json.dumps(line), flush=True)

    sample()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), args.sample)
        sample()
    for task in workers:
        task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    server.should_exit = True
    await serving
    await runtime.close(drain=0)


# -- the slow subscribers (this process) -----------------------------------------------------


class Round:
    """The connections of one round, kept open (unread) until the next round ends."""

    def __init__(self) -> None:
        self.sockets: list[ClientConnection] = []
        self.sse: list[contextlib.AsyncExitStack] = []

    async def drop(self) -> None:
        for ws in self.sockets:
            ws.transport.abort()
        for stack in self.sse:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stack.aclose(), 5)


async def target(http: httpx.AsyncClient) -> tuple[str, str]:
    """A thread of its own with one stored message to PATCH."""
    response = await http.post(
        "/api/threads",
        json={"agent_id": "chat", "initial_messages": [{"role": "user", "content": "hello"}]},
    )
    response.raise_for_status()
    thread: str = response.json()["threadId"]
    page = (await http.get(f"/api/threads/{thread}/messages")).json()
    message: str = page["messages"][0]["id"]
    return thread, message


async def slow_round(
    http: httpx.AsyncClient, base: str, thread: str, message: str, n: int, args: argparse.Namespace
) -> Round:
    ws_base = base.replace("http://", "ws://")
    opened = Round()
    for _ in range(args.sockets):
        opened.sockets.append(
            await connect(
                f"{ws_base}/api/threads/{thread}/stream",
                additional_headers=HEADERS,
                max_queue=1,
                max_size=None,
                compression=None,
            )
        )
    opened.sockets.append(
        await connect(
            f"{ws_base}/api/events?scope=all",
            additional_headers=HEADERS,
            max_queue=1,
            compression=None,
        )
    )
    stack = contextlib.AsyncExitStack()
    sse_client = await stack.enter_async_context(
        httpx.AsyncClient(base_url=base, headers=HEADERS, timeout=30)
    )
    await stack.enter_async_context(
        sse_client.stream(
            "GET", f"/api/threads/{thread}/stream", headers={"Accept": "text/event-stream"}
        )
    )
    opened.sse.append(stack)
    filler = "x" * (args.patch_kb * 1024)
    for p in range(args.patches):
        body = {"content": f"round {n} patch {p} " + filler}
        response = await http.patch(f"/api/threads/{thread}/messages/{message}", json=body)
        response.raise_for_status()
    return opened


async def drive(base: str, args: argparse.Namespace, deadline: float, done: list[int]) -> None:
    """Slow rounds until ``deadline``; ``done[0]`` counts the rounds finished."""
    rounds = 0
    async with httpx.AsyncClient(base_url=base, headers=HEADERS, timeout=60) as http:
        thread, message = await target(http)
        previous: Round | None = None
        while time.monotonic() < deadline:
            began = time.monotonic()
            current = await slow_round(http, base, thread, message, rounds, args)
            if previous is not None:
                await previous.drop()
            previous = current
            rounds += 1
            done[0] = rounds
            rest = args.round_every - (time.monotonic() - began)
            await asyncio.sleep(max(0.0, min(rest, deadline - time.monotonic())))
        if previous is not None:
            await previous.drop()


# -- the report -------------------------------------------------------------------------------


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    n = len(points)
    if n < 2:
        return float("nan")
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    if den == 0:
        return float("nan")
    return sum((x - mx) * (y - my) for x, y in points) / den


def report(samples: list[dict[str, Any]], rounds_at: list[int], args: argparse.Namespace) -> None:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    rows = [
        [
            f"{s['t']:.0f}",
            str(s["turns"]),
            str(s["threads"]),
            str(r),
            f"{s['rss_kib'] / 1024:.1f}",
            str(s["fds"]),
            ms(s["p50_ms"]),
            ms(s["p99_ms"]),
            str(s["subscribers"]),
            str(s["hub"]),
            str(s.get("kept", "-")),
            f"{s['requests'] / s['turns']:.2f}" if s.get("requests") and s["turns"] else "-",
        ]
        for s, r in zip(samples, rounds_at, strict=True)
    ]
    headers = [
        "t (s)",
        "turns",
        "threads",
        "slow rounds",
        "RSS MB",
        "fds",
        "p50 ms",
        "p99 ms",
        "subscribers",
        "hub entries",
        "kept msgs",
        "requests/turn",
    ]
    print(
        f"soak of {args.minutes:g} min: {args.workers} turn workers ({args.reused} reused threads "
        f"each, retired after {args.reuse_turns} turns; a new thread every {args.new_every} "
        f"turns), warm budget {args.warm_messages} messages; every {args.round_every:g} s "
        f"{args.sockets} WebSocket + 1 SSE + 1 /api/events subscriber that never read, then "
        f"{args.patches} PATCHes of {args.patch_kb} KiB"
    )
    print(table(headers, rows))
    print(
        "(kept msgs: the messages of the histories the hub keeps, warm and running; "
        "requests/turn: model requests per turn so far, 2.00 = one tool call and one answer)"
    )
    steady = [s for s in samples if s["t"] >= args.warmup]
    print()
    print(
        f"growth per 1,000 turns, fitted over {len(steady)} samples after {args.warmup:.0f} s "
        f"({steady[0]['turns'] if steady else 0} → {steady[-1]['turns'] if steady else 0} turns):"
    )

    def fit(key: str, scale: float = 1.0) -> float:
        pts = [(s["turns"] / 1000, s[key] * scale) for s in steady if s[key] is not None]
        return slope(pts)

    growth = [
        ["RSS", "MB", f"{fit('rss_kib', 1 / 1024):+.2f}"],
        ["open fds", "", f"{fit('fds'):+.2f}"],
        ["hub entries", "", f"{fit('hub'):+.1f}"],
        ["turn p99", "ms", f"{fit('p99_ms'):+.2f}"],
    ]
    print(table(["figure", "unit", "per 1,000 turns"], growth))


async def parent(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        store = args.store or f"sqlite:///{Path(tmp) / 'soak.db'}"
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(__file__).parent), env.get("PYTHONPATH", "")) if p
        )
        command = [
            sys.executable,
            __file__,
            "--child",
            "--store",
            store,
            "--workers",
            str(args.workers),
            "--reused",
            str(args.reused),
            "--new-every",
            str(args.new_every),
            "--reuse-turns",
            str(args.reuse_turns),
            "--sample",
            str(args.sample),
            "--warm-messages",
            str(args.warm_messages),
        ]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, env=env, text=True)
        assert child.stdout is not None
        first = json.loads(child.stdout.readline())
        base = f"http://127.0.0.1:{first['port']}"
        samples: list[dict[str, Any]] = []
        rounds_at: list[int] = []
        rounds = [0]
        loop = asyncio.get_running_loop()

        def read_samples() -> None:
            assert child.stdout is not None
            for line in child.stdout:
                sample = json.loads(line)
                samples.append(sample)
                rounds_at.append(rounds[0])
                progress(
                    f"  t={sample['t']:.0f}s turns={sample['turns']} "
                    f"rss={sample['rss_kib'] / 1024:.0f}MB fds={sample['fds']} "
                    f"subscribers={sample['subscribers']} rounds={rounds[0]}"
                )

        reader = loop.run_in_executor(None, read_samples)
        deadline = time.monotonic() + args.minutes * 60
        progress(f"soak: {args.minutes} min against {base} (store {store})")
        try:
            if args.patches > 0:
                await drive(base, args, deadline, rounds)
            else:
                await asyncio.sleep(args.minutes * 60)
            await asyncio.sleep(args.sample + 1)  # one more sample after the last round
        finally:
            child.send_signal(signal.SIGTERM)
            await reader
            child.wait(timeout=60)
    report(samples, rounds_at, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="length of the soak")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds left out of the fit")
    parser.add_argument("--workers", type=int, default=2, help="concurrent turn loops")
    parser.add_argument("--reused", type=int, default=10, help="reused threads per worker")
    parser.add_argument("--new-every", type=int, default=3, help="every Nth turn: a new thread")
    parser.add_argument(
        "--reuse-turns", type=int, default=10, help="turns of a reused thread before a new one"
    )
    parser.add_argument("--warm-messages", type=int, default=2000, help="warm-history budget")
    parser.add_argument("--round-every", type=float, default=10.0, help="seconds per slow round")
    parser.add_argument("--sockets", type=int, default=1, help="non-reading stream sockets")
    parser.add_argument("--patches", type=int, default=120, help="PATCHes per round (0: none)")
    parser.add_argument("--patch-kb", type=int, default=900, help="KiB of content per PATCH")
    parser.add_argument("--store", default=None, help="store URL (default: a fresh SQLite file)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(serve_child(args))
    else:
        asyncio.run(parent(args))


if __name__ == "__main__":
    main()

"""HTTP API benchmark: GET messages under concurrent clients on loopback.

Run with ``make bench-api`` (or ``.venv/bin/python bench/api_bench.py --help``). It is a
benchmark, not a test: it prints its tables and exits 0.

Section 1 — a ``threadloom serve`` child process serves ``examples/`` on a fresh SQLite file (WAL,
``synchronous=FULL``, the defaults), authenticated by a static admin token. This process
seeds one thread holding ``--history`` messages, then, for 1, 16 and 64 concurrent clients
(asyncio tasks sharing one httpx connection pool, each sending its next request as soon
as the previous answer arrived), issues ``GET /api/threads/{id}/messages`` (the default
page: the newest 100) for ``--seconds`` after a one-second warm-up, and prints requests per
second with the p50 and p99 latency. The load comes from ``wrk`` (a C load generator, one
thread, keep-alive connections) when it is installed — Debian's package ``wrk`` — since a
Python client saturates its own core long before the server at 64 connections; without it
the httpx client above is used and the table says so. Client and server share the
machine's cores either way.

Section 2 — persist → WebSocket frame latency: a client holds the thread's stream socket
open and sends ``--sends`` messages one after the other (each after the previous run
settled). For each, the latency is from the queue entry's ``created_at`` (stamped in the
transaction that commits it, on this machine's clock) to the arrival of its
``message_data`` frame; the send's round trip (POST → 202) is printed beside it. Goal:
frame latency p50 ≤ 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from _report import filesystem_of, percentile, progress, table, verdict

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-admin-token-" + "b" * 32
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(db: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["THREADLOOM_ADMIN_TOKEN"] = TOKEN
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "threadloom.cli",
            "serve",
            str(ROOT / "examples"),
            "--port",
            str(port),
            "--store",
            f"sqlite:///{db}",
            "--log-level",
            "warning",
        ],
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not become ready")


async def seed(client: httpx.AsyncClient, history: int) -> str:
    items = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 80}
        for i in range(history)
    ]
    response = await client.post(
        "/api/threads", json={"agent_id": "support", "initial_messages": items}
    )
    response.raise_for_status()
    thread: str = response.json()["threadId"]
    return thread


async def load(client: httpx.AsyncClient, path: str, clients: int, seconds: float) -> list[float]:
    """Latencies (ns) of the requests completed in the measured window."""
    samples: list[float] = []
    measuring = False
    stop = False

    async def worker() -> None:
        while not stop:
            start = time.perf_counter_ns()
            response = await client.get(path)
            took = time.perf_counter_ns() - start
            if response.status_code != 200:
                raise SystemExit(f"GET {path} answered {response.status_code}")
            if measuring:
                samples.append(took)

    tasks = [asyncio.create_task(worker()) for _ in range(clients)]
    await asyncio.sleep(1.0)
    measuring = True
    await asyncio.sleep(seconds)
    measuring = False
    stop = True
    await asyncio.gather(*tasks)
    return samples


async def frame_latency(
    client: httpx.AsyncClient, base: str, sends: int
) -> tuple[list[float], list[float]]:
    """(commit → frame, POST → 202) latencies in ns for ``sends`` sequential sends."""
    thread = await seed(client, 0)
    url = base.replace("http://", "ws://") + f"/api/threads/{thread}/stream"
    frame_ns: list[float] = []
    post_ns: list[float] = []
    async with connect(url, additional_headers=HEADERS, compression=None) as ws:
        json.loads(await ws.recv())  # thread_status
        for i in range(sends):
            start = time.perf_counter_ns()
            response = await client.post(
                f"/api/threads/{thread}/messages", json={"content": f"ping {i}"}
            )
            post_ns.append(time.perf_counter_ns() - start)
            response.raise_for_status()
            wanted = response.json()["messageId"]
            measured = False
            while True:
                frame = json.loads(await ws.recv())
                arrived_us = time.time_ns() // 1000
                data = frame.get("data") or {}
                if not measured and frame["type"] == "message_data" and data["id"] == wanted:
                    frame_ns.append((arrived_us - data["created_at"]) * 1000)
                    measured = True
                status = frame.get("status") or {}
                if frame["type"] == "thread_status" and measured and status["state"] != "running":
                    break
    return frame_ns, post_ns


def _wrk_ms(text: str) -> float:
    """A wrk latency cell (``812.00us``, ``2.35ms``, ``1.02s``) in milliseconds."""
    for suffix, scale in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    raise ValueError(f"unexpected wrk latency {text!r}")


def wrk_load(url: str, clients: int, seconds: float) -> tuple[int, float, float, float]:
    """(requests, req/s, p50 ms, p99 ms) measured by wrk with ``clients`` connections."""
    done = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{clients}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "-H",
            HEADERS["Authorization"].join(("Authorization: ", "")),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = done.stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    p50 = _wrk_ms(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _wrk_ms(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    if "Non-2xx" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    return total, rate, p50, p99


async def run(base: str, args: argparse.Namespace) -> None:
    limits = httpx.Limits(max_connections=128, max_keepalive_connections=128)
    async with httpx.AsyncClient(
        base_url=base, headers=HEADERS, limits=limits, timeout=30
    ) as client:
        thread = await seed(client, args.history)
        path = f"/api/threads/{thread}/messages"
        rows = []
        use_wrk = shutil.which("wrk") is not None and not args.httpx
        for clients in args.clients:
            progress(f"GET messages with {clients} concurrent client(s) for {args.seconds:g} s …")
            if use_wrk:
                total, rate, p50, p99 = await asyncio.to_thread(
                    wrk_load, base + path, clients, args.seconds
                )
            else:
                samples = await load(client, path, clients, args.seconds)
                total, rate = len(samples), len(samples) / args.seconds
                p50, p99 = percentile(samples, 50) / 1e6, percentile(samples, 99) / 1e6
            rows.append([str(clients), f"{total:,}", f"{rate:,.0f}", f"{p50:,.2f}", f"{p99:,.2f}"])
        progress(f"{args.sends} sends with a stream socket open …")
        frame_ns, post_ns = await frame_latency(client, base, args.sends)
    generator = "wrk" if shutil.which("wrk") and not args.httpx else "httpx (no wrk installed)"
    print(
        f"\nGET /api/threads/{{id}}/messages (newest 100 of {args.history}), "
        f"{args.seconds:g} s per row, loopback, load from {generator}"
    )
    print(table(["clients", "requests", "req/s", "p50 (ms)", "p99 (ms)"], rows))
    frame_p50 = percentile(frame_ns, 50) / 1e6
    print(f"\npersist → WebSocket frame, {len(frame_ns)} sequential sends")
    print(
        table(
            ["latency", "p50 (ms)", "p99 (ms)", "goal", "result"],
            [
                [
                    "commit → message_data frame",
                    f"{frame_p50:,.2f}",
                    f"{percentile(frame_ns, 99) / 1e6:,.2f}",
                    "p50 ≤ 5 ms",
                    verdict(frame_p50 <= 5.0),
                ],
                [
                    "POST → 202 (for reference)",
                    f"{percentile(post_ns, 50) / 1e6:,.2f}",
                    f"{percentile(post_ns, 99) / 1e6:,.2f}",
                    "",
                    "",
                ],
            ],
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per row")
    parser.add_argument("--history", type=int, default=500, help="messages in the thread")
    parser.add_argument(
        "--clients", type=int, nargs="+", default=[1, 16, 64], help="concurrency levels"
    )
    parser.add_argument("--sends", type=int, default=200, help="sends for the frame latency")
    parser.add_argument("--httpx", action="store_true", help="use the httpx client, not wrk")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="threadloom-api-bench-", dir=ROOT) as tmp:
        db = Path(tmp) / "bench.db"
        print(f"machine: {os.cpu_count()} CPUs, {sys.platform}, Python {sys.version.split()[0]}")
        print(f"store:   {db} ({filesystem_of(tmp)}), WAL, synchronous=FULL")
        proc, base = start_server(db)
        try:
            asyncio.run(run(base, args))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


if __name__ == "__main__":
    main()

"""HTTP API benchmark: GET messages under concurrent clients on loopback.

Run with ``make bench-api`` (or ``.venv/bin/python bench/api_bench.py --help``). It is a
benchmark, not a test: it prints its tables and exits 0.

A ``threadloom serve`` child process serves ``examples/`` on a fresh SQLite file (WAL,
``synchronous=FULL``, the defaults), authenticated by a static admin token. This process
seeds one thread holding ``--history`` messages, then, for 1, 16 and 64 concurrent clients
(asyncio tasks sharing one httpx connection pool, each sending its next request as soon
as the previous answer arrived), issues ``GET /api/threads/{id}/messages`` (the default
page: the newest 100) for ``--seconds`` after a one-second warm-up, and prints requests per
second with the p50 and p99 latency. Client and server share the machine's cores, so at
high concurrency the client's own CPU is part of what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from _report import filesystem_of, percentile, progress, table

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


async def run(base: str, args: argparse.Namespace) -> None:
    limits = httpx.Limits(max_connections=128, max_keepalive_connections=128)
    async with httpx.AsyncClient(
        base_url=base, headers=HEADERS, limits=limits, timeout=30
    ) as client:
        thread = await seed(client, args.history)
        path = f"/api/threads/{thread}/messages"
        rows = []
        for clients in args.clients:
            progress(f"GET messages with {clients} concurrent client(s) for {args.seconds:g} s …")
            samples = await load(client, path, clients, args.seconds)
            rows.append(
                [
                    str(clients),
                    f"{len(samples):,}",
                    f"{len(samples) / args.seconds:,.0f}",
                    f"{percentile(samples, 50) / 1e6:,.2f}",
                    f"{percentile(samples, 99) / 1e6:,.2f}",
                ]
            )
    print(
        f"\nGET /api/threads/{{id}}/messages (newest 100 of {args.history}), "
        f"{args.seconds:g} s per row, loopback"
    )
    print(table(["clients", "requests", "req/s", "p50 (ms)", "p99 (ms)"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per row")
    parser.add_argument("--history", type=int, default=500, help="messages in the thread")
    parser.add_argument(
        "--clients", type=int, nargs="+", default=[1, 16, 64], help="concurrency levels"
    )
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

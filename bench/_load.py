"""The load of ``make bench-api``, from a process of its own: ``wrk`` (a C load generator)
when it is installed, else this file run as a script — ``clients`` keep-alive HTTP/1.1
connections on asyncio, each sending its next GET as soon as the previous answer is read —
which prints its figures as JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx

from _report import percentile


@dataclass
class Load:
    requests: int  # answered in the measured window
    seconds: float
    p50_ms: float
    p99_ms: float
    served: int  # answered while the generator ran (its warm-up too): CPU per request


def _wrk_ms(text: str) -> float:
    """A wrk latency cell (``812.00us``, ``2.35ms``, ``1.02s``, ``1.00m``) in ms."""
    for suffix, scale in (("us", 1e-3), ("ms", 1.0), ("s", 1e3), ("m", 60e3)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    raise ValueError(f"unexpected wrk latency {text!r}")


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise SystemExit(f"unexpected wrk output (no {pattern!r}):\n{text}")
    return match.group(1)


def wrk_load(url: str, token: str, clients: int, threads: int, seconds: float) -> Load:
    done = subprocess.run(
        [
            "wrk",
            f"-t{min(threads, clients)}",
            f"-c{clients}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "-H",
            f"Authorization: Bearer {token}",
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = done.stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    total = int(_found(r"(\d+) requests in", out))
    took = _wrk_ms(_found(r"requests in ([\d.]+\w+),", out)) / 1e3
    return Load(
        requests=total,
        seconds=took,
        p50_ms=_wrk_ms(_found(r"\s50%\s+(\S+)", out)),
        p99_ms=_wrk_ms(_found(r"\s99%\s+(\S+)", out)),
        served=total,
    )


def python_load(url: str, token: str, clients: int, seconds: float) -> Load:
    """The fallback generator: this file run as a process of its own."""
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            url,
            token,
            "--clients",
            str(clients),
            "--seconds",
            str(seconds),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(done.stdout)
    return Load(data["requests"], data["seconds"], data["p50_ms"], data["p99_ms"], data["served"])


async def _python_load(url: str, token: str, clients: int, seconds: float) -> dict[str, float]:
    """``clients`` keep-alive HTTP/1.1 connections, each sending its next GET as soon as
    the previous answer is read; latencies of the answers completed in the window."""
    split = httpx.URL(url)
    request = (
        f"GET {split.raw_path.decode()} HTTP/1.1\r\nHost: {split.host}:{split.port}\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()
    samples: list[float] = []
    served = [0]
    window = [float("inf"), float("inf")]

    async def client() -> None:
        reader, writer = await asyncio.open_connection(split.host, split.port)
        try:
            while True:
                start = time.perf_counter()
                if start >= window[1]:
                    return
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise SystemExit(f"GET answered {head[:40]!r}")
                length = int(_found(r"(?i)content-length:\s*(\d+)", head.decode("latin-1")))
                await reader.readexactly(length)
                end = time.perf_counter()
                served[0] += 1
                if window[0] <= start and end <= window[1]:
                    samples.append((end - start) * 1e3)
        finally:
            writer.close()

    now = time.perf_counter()
    window[0], window[1] = now + 1.0, now + 1.0 + seconds  # a second of warm-up
    await asyncio.gather(*(client() for _ in range(clients)))
    return {
        "requests": len(samples),
        "seconds": seconds,
        "p50_ms": percentile(samples, 50),
        "p99_ms": percentile(samples, 99),
        "served": served[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="GET url from keep-alive connections")
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_python_load(args.url, args.token, args.clients, args.seconds))))


if __name__ == "__main__":
    main()

"""The thread and the stream of ``make bench-api`` (``bench/api_bench.py``): the seeded
conversation every server answers the same page of, the admin token the load uses, and the
commit → WebSocket frame latency section."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import httpx
from websockets.asyncio.client import connect

from _report import percentile, progress, table, verdict

TOKEN = "bench-admin-token-" + "b" * 32
HEADERS = {"Authorization": f"Bearer {TOKEN}"}

# -- the thread ---------------------------------------------------------------------------


def turn_items(turns: int) -> list[dict[str, Any]]:
    """``turns`` turns of a support conversation as ``initial_messages`` items."""
    items: list[dict[str, Any]] = []
    for t in range(turns):
        order = f"A-{10_000 + t}"
        call = f"call_{t:04d}"
        items.append(
            {
                "role": "user",
                "content": f"Hi, my order {order} arrived yesterday but the kettle's lid does"
                " not close properly and the base wobbles. Is it still under warranty, and"
                " can I get a replacement sent to my address in Zürich? Thanks — Zoë",
                "metadata": {"client_message_id": f"web-{t:06d}"},
            }
        )
        items.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {
                            "name": "lookup_order",
                            "arguments": json.dumps(
                                {"order_id": order, "include": ["warranty", "shipping"]}
                            ),
                        },
                    }
                ],
            }
        )
        result = {
            "order_id": order,
            "status": "delivered",
            "delivered_at": "2026-11-30T14:05:00Z",
            "items": [{"sku": "KT-200", "name": "Electric kettle 1.7 l", "quantity": 1}],
            "warranty": {"months": 24, "ends": "2028-11-30", "covers": ["defects", "parts"]},
            "shipping": {"carrier": "Swiss Post", "address": "Bahnhofstrasse 1, 8001 Zürich"},
        }
        items.append(
            {
                "role": "tool",
                "tool_call_id": call,
                "tool_status": "success",
                "content": json.dumps(result, ensure_ascii=False),
            }
        )
        items.append(
            {
                "role": "assistant",
                "content": f"Thanks for the details. Order {order} was delivered on 30"
                " November and its kettle is under warranty for 24 months, until 30 November"
                " 2028; a wobbling base and a lid that does not close are covered defects."
                " I have asked for a replacement to be sent to Bahnhofstrasse 1 in Zürich:"
                " it usually arrives within three working days, and you can keep the old one"
                " until then. Is there anything else I can help with?",
            }
        )
    return items


async def seed(client: httpx.AsyncClient, items: list[dict[str, Any]]) -> str:
    response = await client.post(
        "/api/threads", json={"agent_id": "support", "initial_messages": items}
    )
    response.raise_for_status()
    thread: str = response.json()["threadId"]
    return thread


_MASKS = (
    (re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), b"<id>"),
    (re.compile(rb'"created_at":\d+'), b'"created_at":0'),
    (re.compile(rb'"seq":\d+'), b'"seq":0'),
)


def masked(body: bytes) -> bytes:
    """A page's bytes with what differs between two servers of the same data masked."""
    for pattern, replacement in _MASKS:
        body = pattern.sub(replacement, body)
    return body


# -- section 2 ----------------------------------------------------------------------------


async def frame_latency(base: str, sends: int) -> tuple[list[float], list[float]]:
    """(commit → frame, POST → 202) latencies in ns for ``sends`` sequential sends."""
    async with httpx.AsyncClient(base_url=base, headers=HEADERS, timeout=30) as client:
        thread = await seed(client, [])
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
                    if (
                        frame["type"] == "thread_status"
                        and measured
                        and status["state"] != "running"
                    ):
                        break
    return frame_ns, post_ns


def frame_section(base: str, sends: int) -> str:
    progress(f"{sends} sends with a stream socket open …")
    frame_ns, post_ns = asyncio.run(frame_latency(base, sends))
    frame_p50 = percentile(frame_ns, 50) / 1e6
    rows = [
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
    ]
    return (
        f"\npersist → WebSocket frame, {len(frame_ns)} sequential sends (this tree, SQLite)\n"
        + table(["latency", "p50 (ms)", "p99 (ms)", "goal", "result"], rows)
    )

"""Load on real nodes while their database fails over, and what the clients saw (issue 36
item 6): the failover tests and ``bench/failover_bench.py`` share it.

- ``Load``: senders that post messages to the threads round robin through every node, and
  readers that page a thread's messages and list the threads, each request with a client
  timeout; every answer is kept with its start and end time.
- ``Watch``: a thread's WebSocket stream that reconnects with ``since`` after every close
  (as spec 09 §9.11 rule 5 tells a client), keeping every frame and every close code.
- ``window``, ``lost_sends``, ``wait_settled``: the row of the failover table — time to
  recover (from the moment the primary was down to the end of the first send answered 2xx
  that started after it), what the clients saw (counts by
  status, 503s without ``Retry-After``, timeouts), acknowledged sends lost, and how long
  until every run settled and every thread answered its last message.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

CLIENT_TIMEOUT_S = 15.0
"""A request not answered within this is counted a timeout (a hang): the bound the
failover promises hold requests to."""


@dataclass
class Answer:
    kind: str
    """``send``, ``page`` or ``list``."""
    started: float
    ended: float
    status: int | str
    """The HTTP status, or ``timeout`` / ``no answer`` (a transport error)."""
    retry_after: str | None = None


class Load:
    """``senders`` clients sending, ``readers`` reading, through every node, until ``stop``."""

    def __init__(
        self, bases: list[str], threads: list[str], senders: int = 4, readers: int = 2
    ) -> None:
        self.bases = bases
        self.threads = threads
        self.acked: dict[str, list[str]] = {t: [] for t in threads}
        self.acked_at: dict[str, float] = {}
        """When each acknowledged send's answer came (``time.monotonic()``)."""
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._workers = [
            threading.Thread(target=self._send, args=(k,), daemon=True) for k in range(senders)
        ] + [threading.Thread(target=self._read, args=(k,), daemon=True) for k in range(readers)]

    def start(self) -> None:
        for worker in self._workers:
            worker.start()

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=CLIENT_TIMEOUT_S + 5)

    def _call(self, client: httpx.Client, kind: str, method: str, url: str, **kw: Any) -> Any:
        started = time.monotonic()
        try:
            response = client.request(method, url, timeout=CLIENT_TIMEOUT_S, **kw)
        except httpx.TimeoutException:
            self._keep(Answer(kind, started, time.monotonic(), "timeout"))
            return None
        except httpx.TransportError:
            self._keep(Answer(kind, started, time.monotonic(), "no answer"))
            time.sleep(0.05)
            return None
        self._keep(
            Answer(
                kind,
                started,
                time.monotonic(),
                response.status_code,
                response.headers.get("Retry-After"),
            )
        )
        if response.status_code >= 500:
            time.sleep(0.05)  # a client that was told to come back later
        return response

    def _keep(self, answer: Answer) -> None:
        with self._lock:
            self.answers.append(answer)

    def _send(self, k: int) -> None:
        i = 0
        with httpx.Client() as client:
            while not self._stop.is_set():
                i += 1
                thread = self.threads[(k * 7 + i) % len(self.threads)]
                base = self.bases[(k + i) % len(self.bases)]
                text = f"s{k}-{i}"
                response = self._call(
                    client,
                    "send",
                    "POST",
                    f"{base}/api/threads/{thread}/messages",
                    json={"content": text},
                )
                if response is not None and response.status_code == 202:
                    with self._lock:
                        self.acked[thread].append(text)
                        self.acked_at[text] = time.monotonic()
                time.sleep(0.02)

    def _read(self, k: int) -> None:
        i = 0
        with httpx.Client() as client:
            while not self._stop.is_set():
                i += 1
                base = self.bases[(k + i) % len(self.bases)]
                if i % 2:
                    thread = self.threads[i % len(self.threads)]
                    url = f"{base}/api/threads/{thread}/messages"
                    self._call(client, "page", "GET", url, params={"limit": 20})
                else:
                    self._call(client, "list", "GET", f"{base}/api/threads", params={"limit": 20})
                time.sleep(0.02)


class Watch:
    """A thread's WebSocket stream on one node, reconnecting with ``since`` after a close."""

    def __init__(self, base: str, thread: str, since: int | None = None) -> None:
        """``since``: where the first connection resumes (``None``: from the snapshot)."""
        self.url = base.replace("http://", "ws://") + f"/api/threads/{thread}/stream"
        self.frames: list[dict[str, Any]] = []
        self.closes: list[int] = []
        self.connects = 0
        self._since: int | None = since
        self._stop = threading.Event()
        self._socket: Any = None
        self._reader = threading.Thread(target=self._run, daemon=True)
        self._reader.start()

    def _run(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            url = self.url if self._since is None else f"{self.url}?since={self._since}"
            try:
                with connect(url, open_timeout=5, close_timeout=1) as socket:
                    self._socket = socket
                    self.connects += 1
                    for raw in socket:
                        frame = json.loads(raw)
                        self.frames.append(frame)
                        if isinstance(frame.get("seq"), int):
                            self._since = max(self._since or 0, frame["seq"])
                        delay = 0.5
            except ConnectionClosed as closed:
                self.closes.append(closed.rcvd.code if closed.rcvd is not None else 1006)
            except Exception:
                self.closes.append(-1)  # the handshake failed (the node answered 503)
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, 5.0)

    def messages(self) -> dict[str, str]:
        """Each message's last status as the stream told it."""
        seen: dict[str, str] = {}
        for frame in list(self.frames):
            if frame.get("type") == "message_data":
                seen[frame["message_id"]] = frame["data"].get("status", "")
        return seen

    def close(self) -> None:
        self._stop.set()
        socket = self._socket
        if socket is not None:
            try:
                socket.close()
            except Exception:
                pass
        self._reader.join(timeout=10)


@dataclass
class Row:
    """One scenario's line of the failover table."""

    scenario: str
    recover_s: float | None
    """From the moment the primary was down (``pg_ctl stop`` returned) to the end of the
    first send answered 2xx that started after it."""
    statuses: dict[str, int] = field(default_factory=dict)
    """What the clients saw from the fault to the recovery (and 5 s after), by status."""
    no_retry_after: int = 0
    """503 answers without a ``Retry-After`` header."""
    acked: int = 0
    lost: int = 0
    settled_s: float | None = None
    """From the end of the load until no thread was running and every thread's last
    message was an answer (``None``: not within the time allowed)."""
    closes: dict[int, int] = field(default_factory=dict)
    """Stream close codes seen (-1: a reconnect refused, the node answered 503)."""

    def cells(self) -> list[str]:
        seen = ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items())) or "-"
        closes = ", ".join(f"{k}×{v}" for k, v in sorted(self.closes.items())) or "none"
        return [
            self.scenario,
            "-" if self.recover_s is None else f"{self.recover_s:.2f} s",
            seen,
            f"{self.lost} of {self.acked}",
            "-" if self.settled_s is None else f"{self.settled_s:.1f} s",
            closes,
        ]


HEADERS = [
    "scenario",
    "time to recover",
    "what clients saw (fault → recovery + 5 s)",
    "acked sends lost",
    "all runs settled (after the load)",
    "stream closes",
]


def window(load: Load, fault_at: float) -> tuple[float | None, collections.Counter[str], int]:
    """Time to recover, the statuses seen from the fault until 5 s after it recovered, and
    the 503s among them without ``Retry-After``."""
    answers = sorted(load.answers, key=lambda a: a.ended)
    first_ok = next(
        (
            a
            for a in answers
            if a.kind == "send"
            and a.started >= fault_at
            and isinstance(a.status, int)
            and 200 <= a.status < 300
        ),
        None,
    )
    recover = None if first_ok is None else first_ok.ended - fault_at
    until = (first_ok.ended if first_ok else answers[-1].ended) + 5.0
    seen: collections.Counter[str] = collections.Counter()
    missing = 0
    for a in answers:
        if a.ended < fault_at or a.started > until:
            continue
        seen[_label(a.status)] += 1
        if a.status == 503 and not a.retry_after:
            missing += 1
    return recover, seen, missing


def _label(status: int | str) -> str:
    if isinstance(status, int) and 200 <= status < 300:
        return "2xx"
    return str(status)


def stored_user_texts(base: str, thread: str) -> list[str]:
    page = httpx.get(
        f"{base}/api/threads/{thread}/messages", params={"order": "asc", "limit": 1000}, timeout=10
    ).json()
    return [m["content"] for m in page["messages"] if m["role"] == "user"]


def settled_and_answered(base: str, thread: str) -> bool:
    """Not running, and the last message an answer that completed."""
    status = httpx.get(f"{base}/api/threads/{thread}", timeout=10).json()["status"]
    if status["state"] == "running":
        return False
    page = httpx.get(
        f"{base}/api/threads/{thread}/messages", params={"order": "desc", "limit": 1}, timeout=10
    ).json()["messages"]
    return bool(page) and page[0]["role"] == "assistant" and page[0]["status"] == "completed"


def wait_settled(base: str, threads: list[str], timeout_s: float = 60.0) -> list[str]:
    """Poll until every thread is settled and answered; the threads that are not."""
    deadline = time.monotonic() + timeout_s
    left = list(threads)
    while left and time.monotonic() < deadline:
        try:
            left = [t for t in left if not settled_and_answered(base, t)]
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        if left:
            time.sleep(0.2)
    return left


def lost_sends(base: str, load: Load) -> tuple[int, dict[str, list[str]], list[str]]:
    """(acked, the acknowledged sends missing from the store by thread, the texts stored
    more than once — acknowledged or not)."""
    acked = 0
    missing: dict[str, list[str]] = {}
    doubled: list[str] = []
    for thread, texts in load.acked.items():
        stored = collections.Counter(stored_user_texts(base, thread))
        acked += len(texts)
        gone = [t for t in texts if stored[t] == 0]
        if gone:
            missing[thread] = gone
        doubled += [t for t, n in stored.items() if n > 1]
    return acked, missing, doubled


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)

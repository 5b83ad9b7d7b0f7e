"""A local HTTP receiver of webhooks that the tests start (``http.server`` in a thread): it
records each request (headers and body) and answers as the test scripts it — a status, or
a hang of some seconds before answering."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """``answers``: what each request gets in turn — an int status, or ``("hang", s)``;
    when they run out, ``default``."""

    answers: list[Any] = field(default_factory=list)
    default: Any = 200
    received: list[Received] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.received.append(Received(headers, body, time.monotonic()))
                answer = receiver.answers.pop(0) if receiver.answers else receiver.default
                if isinstance(answer, tuple) and answer[0] == "hang":
                    time.sleep(answer[1])
                    answer = 200
                try:
                    self.send_response(int(answer))
                    self.send_header("content-length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the sender gave up (timed out) meanwhile
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def ids(self) -> list[str]:
        return [r.headers["webhook-id"] for r in self.received]

"""What a test needs from the machine, in one place: a free loopback port, and the one way a
test that cannot run here says so — skipped with the reason, or, under ``CI=true`` (where
``make test`` installs everything), failed, because a skip there would hide a test that must
run."""

from __future__ import annotations

import os
import socket
from typing import NoReturn


def cannot_run(reason: str, what: str) -> NoReturn:
    """Skip the test with ``reason``, or fail it under ``CI=true`` (``what`` must run)."""
    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: {what} must run)")
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port

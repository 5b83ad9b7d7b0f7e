"""``threadloom serve`` says what it serves before it listens (issue 24 item 4): version,
project and its agents, store, authentication mode, the web UI's and the API docs' URLs.
The real command in a child process (``test_serve.spawn_server``), on the store of
``db_url`` (SQLite and PostgreSQL); the URLs it prints answer."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
from test_serve import ROOT, spawn_server

import threadloom
from threadloom.server.serve import shown_url


def test_serve_prints_a_banner_whose_urls_answer(tmp_path: Path, db_url: str) -> None:
    proc, base = spawn_server(ROOT / "examples", db_url, log_level="info")
    try:
        assert httpx.get(f"{base}/").status_code == 200
        assert httpx.get(f"{base}/docs").status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0].decode(errors="replace")
    lines = output.splitlines()
    start = lines.index(f"Threadloom {threadloom.__version__}")
    banner = dict(line.strip().split(None, 1) for line in lines[start + 1 : start + 4])
    agents = "3 agents: support, warranty_research, writer_critic"
    assert banner["project"] == f"{ROOT / 'examples'} ({agents})"
    assert banner["store"] == shown_url(db_url)
    assert banner["auth"].startswith("off: local development mode")
    assert f"  web UI    {base}/" in lines
    assert f"  API docs  {base}/docs" in lines
    assert "Traceback" not in output


def test_serve_banner_in_auth_mode(tmp_path: Path) -> None:
    token = "t" * 40
    proc, _ = spawn_server(
        ROOT / "examples", tmp_path / "a.db", log_level="info", THREADLOOM_ADMIN_TOKEN=token
    )
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=60)[0].decode(errors="replace")
    # the admin token is named: it may be the only credential (a container's first start)
    assert "  auth      required: the admin token (THREADLOOM_ADMIN_TOKEN), users and API keys" in (
        output.splitlines()
    )


def test_a_store_url_is_shown_without_its_password() -> None:
    assert shown_url("postgresql://app:s3cret@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert shown_url("postgresql://db/x?password=s3cret&sslmode=require") == (
        "postgresql://db/x?password=***&sslmode=require"
    )
    assert shown_url("sqlite:///threadloom.db") == "sqlite:///threadloom.db"

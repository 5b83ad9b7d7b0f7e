"""What synchronous replication means for an acknowledgement, and the error of a multi-host
URL whose every host fails (spec 17 §17.5)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from failover_load import stored_user_texts
from replication import replicated, require_replication

from multinode.cluster_harness import start_cluster
from needs import free_port
from threadloom.errors import StoreUnavailable
from threadloom.store.postgres.store import PostgresStore


def test_c17_064_a_send_is_acknowledged_only_once_the_synchronous_standby_has_it(
    tmp_path: Path,
) -> None:
    """C17-064: synchronous replication, one node on the multi-host URL; the standby stopped
    → a send is not answered (no 202 within 3 s: its commit waits for the standby) while
    ``GET /api/health`` still answers 200 (reads need no standby); the standby started
    again → the waiting send is answered 202 and the message is stored exactly once, on
    the primary and on the standby."""
    require_replication()
    with (
        replicated(synchronous=True) as pair,
        start_cluster(tmp_path, n=1, pg_url=pair.url) as cluster,
    ):
        node = cluster.nodes[0]
        thread = cluster.create_thread(node, "echo")
        pair.stop_standby()
        answer: dict[str, Any] = {}

        def send() -> None:
            answer["response"] = httpx.post(
                f"{node.base}/api/threads/{thread}/messages",
                json={"content": "waits for the standby"},
                timeout=60,
            )

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        sender.join(timeout=3)
        assert sender.is_alive(), f"acknowledged without the standby: {answer}"
        assert node.get("/api/health").status_code == 200
        pair.start_standby()
        sender.join(timeout=30)
        assert not sender.is_alive()
        assert answer["response"].status_code == 202, answer["response"].text
        assert stored_user_texts(node.base, thread) == ["waits for the standby"]
        pair.wait_streaming()
        schema = cluster.url.split("search_path%3D", 1)[1].split("&", 1)[0]
        with psycopg.connect(pair.standby_url, autocommit=True) as conn:
            found = conn.execute(
                f'SELECT count(*) FROM "{schema}".messages WHERE thread_id = %s AND role = %s',
                (thread, "user"),
            ).fetchone()
        assert found == (1,)


async def test_c17_067_every_host_of_a_multi_host_url_says_why_it_failed() -> None:
    """C17-067: a store on ``postgresql://…@127.0.0.1:P1,127.0.0.1:P2/…`` where nothing
    listens → ``StoreUnavailable`` whose message names each host with its own reason
    (``127.0.0.1:P1: Connection refused; 127.0.0.1:P2: Connection refused``), not only the
    last one's."""
    p1, p2 = free_port(), free_port()
    url = f"postgresql://postgres@127.0.0.1:{p1},127.0.0.1:{p2}/db_{uuid.uuid4().hex[:6]}"
    with pytest.raises(StoreUnavailable) as caught:
        await PostgresStore.open(url + "?target_session_attrs=read-write")
    message = str(caught.value)
    assert f"127.0.0.1:{p1}: Connection refused; 127.0.0.1:{p2}: Connection refused" in message

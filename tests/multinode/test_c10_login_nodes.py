"""The login limits of spec 10 §10.11 hold across the nodes of a PostgreSQL cluster: the
attempts are counted in the store, not in each process (issue 31 item 7: 60 wrong
passwords through 3 nodes had 30 checked)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cluster_harness import start_cluster

LOGIN_FAILURES_PER_ADDRESS = 10  # per 5 minutes, spec 10 §10.11


def test_c10_040_wrong_passwords_alternated_across_nodes_hold_one_limit(
    tmp_path: Path,
) -> None:
    """C10-040: two real nodes on one schema; 30 wrong passwords from one address,
    alternated n1, n2, n1 … → exactly 10 checked (401), every other one 429 with
    ``Retry-After``, whichever node answers — as on one node."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        answers = []
        for n in range(30):
            node = (n1, n2)[n % 2]
            body = {"username": f"user{n}", "password": "wrong password"}
            answers.append((node.node_id, node.post("/api/auth/login", body)))
        counts = Counter(response.status_code for _, response in answers)
        assert counts == {401: LOGIN_FAILURES_PER_ADDRESS, 429: 30 - LOGIN_FAILURES_PER_ADDRESS}
        assert [r.status_code for _, r in answers[:10]] == [401] * 10
        limited = {node for node, r in answers if r.status_code == 429}
        assert limited == {"n1", "n2"}
        for _, response in answers[10:]:
            assert response.json()["code"] == "rate_limited"
            assert 1 <= int(response.headers["retry-after"]) <= 300

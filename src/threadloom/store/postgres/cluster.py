"""A node's row in ``nodes`` (spec 12 §12.2): inserted at start, its heartbeat refreshed,
marked draining, deleted at the end; rows of nodes dead for an hour are deleted by anyone.
Every time is the database's (``now()``), never a node's clock."""

from __future__ import annotations

from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock

DEAD_ROW_KEPT = "1 hour"


def register_node(conn: Conn, clock: Clock, node_id: str, host: str, pid: int) -> None:
    conn.execute(
        "INSERT INTO nodes(node_id, host, pid) VALUES (?, ?, ?) ON CONFLICT(node_id)"
        " DO UPDATE SET heartbeat_at = now(), draining = false, host = excluded.host,"
        " pid = excluded.pid",
        (node_id, host, pid),
    )


def heartbeat(conn: Conn, clock: Clock, node_id: str, host: str, pid: int) -> set[str]:
    """Refresh the heartbeat; a row that others deleted (the node was dead an hour, then
    came back) is inserted again. Returns the other nodes that are live."""
    updated = conn.execute(
        "UPDATE nodes SET heartbeat_at = now() WHERE node_id = ?", (node_id,)
    ).rowcount
    if not updated:
        register_node(conn, clock, node_id, host, pid)
    live = conn.sql.live_node.format(owner="n0.node_id")  # type: ignore[attr-defined]
    return {
        str(r[0])
        for r in conn.execute(
            f"SELECT n0.node_id FROM nodes n0 WHERE n0.node_id <> ? AND {live}", (node_id,)
        )
    }


def set_draining(conn: Conn, clock: Clock, node_id: str) -> None:
    conn.execute("UPDATE nodes SET draining = true WHERE node_id = ?", (node_id,))


def remove_node(conn: Conn, clock: Clock, node_id: str) -> None:
    conn.execute(
        f"DELETE FROM nodes WHERE node_id = ? OR heartbeat_at < now() - interval '{DEAD_ROW_KEPT}'",
        (node_id,),
    )

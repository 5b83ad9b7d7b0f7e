"""The execution fence (spec 12 §12.3.3): the lease the writes of a running execution are
checked against.

The engine sets it for the task that runs a thread's execution (and the tasks that task
starts inherit it); a store whose threads carry leases then checks every write of *that*
thread, in the transaction itself, against the lease: a write after another node took the
thread over finds no row and raises ``LeaseLost``, writing nothing. Writes of other threads
(a child's creation, a delivery to the parent) are not fenced. On a store one process runs
(SQLite) there is no lease, and nothing is checked.
"""

from __future__ import annotations

from contextvars import ContextVar

from threadloom.store.shapes import Fence, Lease

current_fence: ContextVar[Fence | None] = ContextVar("threadloom_fence", default=None)

__all__ = ["Fence", "Lease", "current_fence"]

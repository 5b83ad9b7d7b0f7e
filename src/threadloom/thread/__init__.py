"""ThreadState and what it is made of: messages, queue, status, logs and cost, event bus."""

from __future__ import annotations

from threadloom.thread.events import EventBus, Subscription, ThreadEvent
from threadloom.thread.history import MessageHistory
from threadloom.thread.hub import ThreadHub
from threadloom.thread.state import ThreadState, load_state
from threadloom.thread.users import IdentityAuthority, StaticUsers, StoreUsers

__all__ = [
    "EventBus",
    "IdentityAuthority",
    "MessageHistory",
    "StaticUsers",
    "StoreUsers",
    "Subscription",
    "ThreadEvent",
    "ThreadHub",
    "ThreadState",
    "load_state",
]

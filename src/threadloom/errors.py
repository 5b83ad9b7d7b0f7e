"""Every exception Threadloom raises, in one module (spec 02 §2.2.2).

All derive from :class:`ThreadloomError`. Lookup failures are also ``LookupError`` and
argument errors also ``ValueError`` so callers can catch them the Python way.
"""

from __future__ import annotations


class ThreadloomError(Exception):
    """Base class of every Threadloom error."""


class ThreadNotFound(ThreadloomError, LookupError):
    """The thread does not exist."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"Thread not found: {thread_id}")
        self.thread_id = thread_id


class MessageNotFound(ThreadloomError, LookupError):
    """The id is neither a stored message nor a queue entry of this thread."""

    def __init__(self, message_id: str) -> None:
        super().__init__(f"Message not found: {message_id}")
        self.message_id = message_id


class MessageGenerating(ThreadloomError):
    """The model message is still ``pending``: its request is running (HTTP 409)."""

    def __init__(self, message_id: str) -> None:
        super().__init__(f"Message {message_id} is still being generated")
        self.message_id = message_id


class InvalidArgument(ThreadloomError, ValueError):
    """An argument has the wrong type or value."""


class InvalidMessage(InvalidArgument):
    """A message, queue entry or one of its fields violates spec 01 §1.4."""


class InvalidUpdate(InvalidMessage):
    """An update names a field that cannot be updated, or leaves the message invalid."""


class ThreadTerminated(ThreadloomError):
    """The thread is terminated and the operation would add to it or start work."""

    def __init__(self, thread_id: str, terminated_at: int) -> None:
        super().__init__(f"Thread is terminated (terminated_at={terminated_at})")
        self.thread_id = thread_id
        self.terminated_at = terminated_at


class AgentNotFound(ThreadloomError, LookupError):
    """``create_thread()`` named an agent the loaded definitions do not have."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"Agent not found: {agent_id}")
        self.agent_id = agent_id


class ThreadBusy(ThreadloomError):
    """The thread is running and the operation needs it idle (spec 04 §4.7.4)."""


class StoreError(ThreadloomError):
    """The store cannot be opened, migrated or used (names the URL or path)."""


class EventOverflow(ThreadloomError):
    """A subscriber's buffer filled up; resume from the durable event log (spec 02 §2.17.2)."""


# --- hook machinery (spec 03 §3.2, §3.5) -------------------------------------------------


class HookBlocked(ThreadloomError):
    """Raised by a ``prefilter_llm_history`` hook to block the model step (spec 03 §3.5.3)."""

    block = True


class HookTimeout(ThreadloomError, TimeoutError):
    """A hook call exceeded its timeout (spec 03 §3.5.4)."""


class HookRecursionError(ThreadloomError, RecursionError):
    """A hook call would be the ninth nested level (spec 03 §3.5.5)."""


class HookIdConflict(ThreadloomError, ValueError):
    """Two different functions were registered under one hook id (spec 03 §3.2)."""


class DefinitionError(ThreadloomError):
    """A definition is invalid; the message names the file and the field (spec 04 §4.2.4)."""


class UnknownHookError(DefinitionError):
    """A definition lists a hook id that is not registered (spec 03 §3.2 rule 8)."""


__all__ = [
    "AgentNotFound",
    "DefinitionError",
    "EventOverflow",
    "HookBlocked",
    "HookIdConflict",
    "HookRecursionError",
    "HookTimeout",
    "InvalidArgument",
    "InvalidMessage",
    "InvalidUpdate",
    "MessageGenerating",
    "MessageNotFound",
    "StoreError",
    "ThreadBusy",
    "ThreadNotFound",
    "ThreadTerminated",
    "ThreadloomError",
    "UnknownHookError",
]

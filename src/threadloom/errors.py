"""Every exception Threadloom raises, in one module (spec 02 §2.2.2).

All derive from :class:`ThreadloomError`. Lookup failures are also ``LookupError`` and
argument errors also ``ValueError`` so callers can catch them the Python way.
"""

from __future__ import annotations

from typing import Any, Literal


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


class ForkPointUnfinished(ThreadloomError):
    """A fork's history would end in unfinished work (spec 08 §8.3.8): a message still
    being generated, or a tool call with no stored result (HTTP 409)."""

    def __init__(self, message: str, message_id: str) -> None:
        super().__init__(message)
        self.message_id = message_id


class InvalidArgument(ThreadloomError, ValueError):
    """An argument has the wrong type or value."""


class InvalidField(InvalidArgument):
    """An argument breaks a rule of one of its fields: ``field`` names it (``agent_id``,
    ``env_type_patch.KEY``), ``problem`` says how; the message is ``"{field} {problem}"``
    unless given."""

    def __init__(self, field: str, problem: str, message: str | None = None) -> None:
        super().__init__(message or f"{field} {problem}")
        self.field = field
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.problem, str(self)))


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

    def __init__(self, message: str, thread_id: str | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id


class ApprovalNotFound(ThreadloomError, LookupError):
    """No approval of that tool call in the thread (spec 14 §14.3): an unknown tool call
    id, or a call that needs no approval."""

    def __init__(self, thread_id: str, tool_call_id: str) -> None:
        super().__init__(f"No approval of tool call {tool_call_id} in thread {thread_id}")
        self.thread_id = thread_id
        self.tool_call_id = tool_call_id


class ApprovalForbidden(ThreadloomError):
    """A ``before_decide_approval`` hook refused the decision (spec 14 §14.3 rule 6):
    nothing was changed."""


class ApprovalConflict(ThreadloomError):
    """A decision that cannot apply (spec 14 §14.3): the approval was decided or cancelled
    already, the arguments it names are not the ones shown, or the thread is terminated.
    Nothing was changed."""

    def __init__(self, message: str, state: str | None = None) -> None:
        super().__init__(message)
        self.state = state


class StateConflict(ThreadloomError):
    """A write of a thread's shared state that names a version other than the stored one
    (spec 02 §2.20): nothing was changed. ``version`` is the stored version."""

    def __init__(self, expected: int, version: int) -> None:
        super().__init__(
            f"The shared state is at version {version}, not {expected}; nothing was changed"
        )
        self.expected = expected
        self.version = version


class StateTooLarge(InvalidArgument):
    """A shared state (or a run context) over its size limit (spec 02 §2.20): nothing was
    changed."""


class DuplicateMessage(ThreadloomError):
    """A message with this ``metadata.client_message_id`` is already queued or stored in the
    thread (spec 08 §8.4.2 step 3): nothing was stored."""

    def __init__(self, message_id: str, queued: bool) -> None:
        super().__init__(f"Duplicate of message {message_id}; nothing was stored")
        self.message_id = message_id
        self.queued = queued


class StoreError(ThreadloomError):
    """The store cannot be opened, migrated or used (names the URL or path)."""


class StoreUnavailable(StoreError):
    """The store cannot be reached now (the database is down or restarting, a connection
    broke): the operation did not complete, and may be tried again later (HTTP 503 with
    ``Retry-After``, spec 08 §8.1.3). Where a commit broke, whether it was stored is
    unknown: the message says so."""

    retry_after_s = 2


class LeaseLost(StoreError):
    """An execution's fenced write found the thread's lease no longer its own (spec 12
    §12.3.3): another node took the thread over, or the thread was deleted. Nothing was
    written; the execution stops at once and writes nothing more."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"this node no longer holds the lease of thread {thread_id}")
        self.thread_id = thread_id


class StoreLocked(StoreError):
    """Another process runs this SQLite file's threads (spec 12 §12.1 rule 4); ``pid`` is
    the holder's process id when it has written it."""

    def __init__(self, path: str, pid: int | None, lock_file: str) -> None:
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"SQLite database {path!r} is in use by another Threadloom process ({holder},"
            f" lock file {lock_file!r}): one process at a time may run an SQLite file's"
            " threads. Stop that process first, or give this one another file."
        )
        self.path = path
        self.pid = pid
        self.lock_file = lock_file


class ScheduleNotFound(ThreadloomError, LookupError):
    """No schedule has this id (spec 18)."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"Schedule not found: {schedule_id}")
        self.schedule_id = schedule_id


class ScheduleExists(ThreadloomError):
    """A schedule with this id already exists (spec 18): nothing was stored."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"Schedule already exists: {schedule_id}")
        self.schedule_id = schedule_id


class TriggerNotFound(ThreadloomError, LookupError):
    """No trigger has this id (spec 22)."""

    def __init__(self, trigger_id: str) -> None:
        super().__init__(f"Trigger not found: {trigger_id}")
        self.trigger_id = trigger_id


class TriggerExists(ThreadloomError):
    """A trigger with this id already exists (spec 22): nothing was stored."""

    def __init__(self, trigger_id: str) -> None:
        super().__init__(f"Trigger already exists: {trigger_id}")
        self.trigger_id = trigger_id


class ThreadExists(ThreadloomError):
    """An imported thread's id (or the id of one of its messages or log rows) is already
    in the store (spec 21 §21.4): nothing was stored."""

    def __init__(self, what: str, existing_id: str) -> None:
        super().__init__(f"{what} already exists: {existing_id} (import with new ids to keep both)")
        self.what = what
        self.existing_id = existing_id


class PortableFormatError(InvalidField):
    """A portable thread file that cannot be read (spec 21 §21.2): ``field`` names where
    (``version``, ``threads[0].messages[2].id``), ``problem`` says how; nothing was
    stored."""


class FormatTooNew(PortableFormatError):
    """A portable thread file of a newer format version than this code reads (spec 21
    §21.2): nothing was stored."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            "version",
            f"is {found}, newer than {supported}",
            f"thread file format version {found} is newer than this Threadloom reads"
            f" (version {supported}); upgrade Threadloom to import it",
        )
        self.found = found
        self.supported = supported

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.found, self.supported))


class CompactionNotFound(ThreadloomError, LookupError):
    """The thread has no compaction with this id (spec 23 §23.5)."""

    def __init__(self, compaction_id: str) -> None:
        super().__init__(f"Compaction not found: {compaction_id}")
        self.compaction_id = compaction_id


class NothingToCompact(ThreadloomError):
    """A compaction was asked for but no message lies between the last compaction and the
    messages it must keep (spec 23 §23.2): nothing was written (HTTP 409)."""


class MemoryConflict(ThreadloomError):
    """A conditional write of a memory item (spec 20 §20.3) that names a version other
    than the stored one: nothing was changed. ``version`` is the stored item's version
    (None: there is no live item)."""

    def __init__(self, key: str, expected: int, version: int | None) -> None:
        stored = "does not exist" if version is None else f"is at version {version}"
        super().__init__(
            f"Memory item {key!r} {stored}, not version {expected}; nothing was changed"
        )
        self.key = key
        self.expected = expected
        self.version = version


class UsernameTaken(ThreadloomError):
    """A user with this username already exists (spec 10 §10.5.8): nothing was stored."""


class LastAdmin(ThreadloomError):
    """The change would leave no user with role ``admin`` (spec 10 §10.5.8)."""


class EventOverflow(ThreadloomError):
    """A subscriber's buffer filled up; resume from the durable event log (spec 02 §2.17.2)."""


# --- the thread file system (spec 07 §7.5) -----------------------------------------------


class FileError(ThreadloomError):
    """A file system operation was refused (spec 07 §7.5); the message says why."""


class InvalidPath(FileError, ValueError):
    """A path is not a string, has a forbidden character, a ``.``/``..`` segment, or is too
    long (spec 07 §7.2). Nothing was changed."""


class FileNotFound(FileError, LookupError):
    """The path an operation needs does not exist."""


class FileExists(FileError):
    """Something already exists where the operation would create an entry."""


class IsADirectory(FileError):
    """The path is a directory, and the operation needs a file."""


class NotADirectory(FileError):
    """The path, or an ancestor of it, is a file, and the operation needs a directory."""


class DirectoryNotEmpty(FileError):
    """A non-recursive ``rmdir_file`` of a directory that has entries below it."""


class FileTooLarge(FileError):
    """Content over ``max_file_size``, or a thread over ``max_thread_file_bytes``."""


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
    """Definitions are invalid; one line per problem, each prefixed by its origin (spec 04 §4.2.4).

    ``problems`` holds the lines as a list; when not given they are the message's lines.
    """

    def __init__(self, message: str = "", *, problems: list[str] | None = None) -> None:
        lines = list(problems) if problems is not None else message.splitlines()
        super().__init__(message or "\n".join(lines))
        self.problems: list[str] = lines


class UnknownHookError(DefinitionError):
    """A definition lists a hook id that is not registered (spec 03 §3.2 rule 8)."""


# --- model providers (spec 05 §5.4) ------------------------------------------------------

ProviderErrorCode = Literal[
    "rate_limit",
    "overloaded",
    "server_error",
    "connection",
    "timeout",
    "context_length",
    "content_filter",
    "invalid_request",
    "authentication",
    "permission",
    "unknown",
]

#: The ``retryable`` default of each code (spec 05 §5.4 table).
PROVIDER_ERROR_RETRYABLE: dict[str, bool] = {
    "rate_limit": True,
    "overloaded": True,
    "server_error": True,
    "connection": True,
    "timeout": True,
    "context_length": False,
    "content_filter": False,
    "invalid_request": False,
    "authentication": False,
    "permission": False,
    "unknown": True,
}

#: The error classes on which a model's fallbacks are used (spec 04 §4.12.3, issue 39): a
#: provider that is down or busy. ``timeout`` also covers ``connection``; ``unknown`` (an
#: adapter's unclassified failure) is used only when a model names it.
FallbackClass = Literal["rate_limit", "overloaded", "server_error", "timeout", "unknown"]

#: The classes used when a model names none (§4.12.3).
DEFAULT_FALLBACK_ON: tuple[FallbackClass, ...] = (
    "rate_limit",
    "overloaded",
    "server_error",
    "timeout",
)

#: The fallback class of each code; ``None`` for the codes no fallback is used on (a
#: request the provider refused as it is: invalid, too long, filtered, not authorised).
PROVIDER_ERROR_FALLBACK_CLASS: dict[str, FallbackClass | None] = {
    "rate_limit": "rate_limit",
    "overloaded": "overloaded",
    "server_error": "server_error",
    "connection": "timeout",
    "timeout": "timeout",
    "context_length": None,
    "content_filter": None,
    "invalid_request": None,
    "authentication": None,
    "permission": None,
    "unknown": "unknown",
}


class ProviderError(ThreadloomError):
    """A model request failed; ``code`` classifies it and ``retryable`` tells the engine
    whether another attempt on the same model may succeed (spec 05 §5.4).

    ``retryable=None`` takes the default of the code. ``status`` is the HTTP status when
    there was one, ``retry_after`` the server's hint in seconds, ``provider`` the adapter
    name and ``body`` the parsed provider error body (for the log row).
    """

    def __init__(
        self,
        message: str,
        *,
        code: ProviderErrorCode = "unknown",
        retryable: bool | None = None,
        status: int | None = None,
        retry_after: float | None = None,
        provider: str = "",
        body: Any = None,
    ) -> None:
        if code not in PROVIDER_ERROR_RETRYABLE:
            raise ValueError(f"unknown provider error code: {code!r}")
        super().__init__(message)
        self.message = message
        self.code: ProviderErrorCode = code
        self.retryable = PROVIDER_ERROR_RETRYABLE[code] if retryable is None else retryable
        self.status = status
        self.retry_after = None if retry_after is None else float(retry_after)
        self.provider = provider
        self.body = body

    def __repr__(self) -> str:
        return (
            f"ProviderError({self.message!r}, code={self.code!r}, retryable={self.retryable!r}, "
            f"status={self.status!r}, retry_after={self.retry_after!r}, "
            f"provider={self.provider!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields: rebuild through a helper so the error pickles (process pools).
        return (_rebuild_provider_error, (self.message, self._fields()))

    def _fields(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "retryable": self.retryable,
            "status": self.status,
            "retry_after": self.retry_after,
            "provider": self.provider,
            "body": self.body,
        }


def _rebuild_provider_error(message: str, fields: dict[str, Any]) -> ProviderError:
    return ProviderError(message, **fields)


class OutputInvalid(ThreadloomError):
    """A prompt's answer still did not match its declared output type after the retries
    (spec 24 §24.4): the run fails ``step_error`` with this as its status error."""

    def __init__(self, prompt: str, attempts: int, problem: str) -> None:
        self.prompt = prompt
        self.attempts = attempts
        self.problem = problem
        super().__init__(
            f'Output of prompt "{prompt}" does not match its output type after '
            f"{attempts} attempt{'s' if attempts != 1 else ''}: {problem}"
        )


__all__ = [
    "DEFAULT_FALLBACK_ON",
    "PROVIDER_ERROR_FALLBACK_CLASS",
    "PROVIDER_ERROR_RETRYABLE",
    "AgentNotFound",
    "CompactionNotFound",
    "DefinitionError",
    "DirectoryNotEmpty",
    "EventOverflow",
    "FallbackClass",
    "FileError",
    "FileExists",
    "FileNotFound",
    "FileTooLarge",
    "ForkPointUnfinished",
    "FormatTooNew",
    "HookBlocked",
    "HookIdConflict",
    "HookRecursionError",
    "HookTimeout",
    "InvalidArgument",
    "InvalidField",
    "InvalidMessage",
    "InvalidPath",
    "InvalidUpdate",
    "IsADirectory",
    "MessageGenerating",
    "MessageNotFound",
    "NotADirectory",
    "NothingToCompact",
    "OutputInvalid",
    "PortableFormatError",
    "ProviderError",
    "ProviderErrorCode",
    "StoreError",
    "StoreLocked",
    "ThreadBusy",
    "ThreadExists",
    "ThreadNotFound",
    "ThreadTerminated",
    "ThreadloomError",
    "UnknownHookError",
]

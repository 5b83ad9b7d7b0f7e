"""What a :class:`~threadloom.providers.scripted.ScriptedProvider` answers (spec 05 §5.7.2–3).

``Reply`` describes one response (text, reasoning, tool calls, an error, chunking,
delays, usage overrides, input expectations); ``Script`` chains replies; ``Call``,
``Fail`` and ``Expect`` are its parts. Import them from ``threadloom.providers.scripted``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast, overload

from threadloom.errors import ProviderError, ProviderErrorCode
from threadloom.providers.types import (
    FINISH_REASONS,
    FinishReason,
    ProviderRequest,
    ToolMessage,
    Usage,
)
from threadloom.records import json_compact


@dataclass(frozen=True)
class Call:
    """A scripted tool call. A dict ``arguments`` is sent as compact JSON, a str as is (it
    may be invalid JSON on purpose); a missing ``id`` becomes ``call_`` + 8 hex per stream.
    ``extra_content`` is sent in ``ToolCallEnd`` (round-trip data; a Threadloom addition)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    extra_content: dict[str, Any] | None = None

    @property
    def arguments_text(self) -> str:
        """The arguments as sent in the ``ToolCallDelta``."""
        return self.arguments if isinstance(self.arguments, str) else json_compact(self.arguments)


CallLike = Call | tuple[str, dict[str, Any] | str]


def _as_call(value: CallLike) -> Call:
    if isinstance(value, Call):
        return value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return Call(value[0], value[1])
    raise TypeError(f"a tool call must be a Call or a (name, arguments) tuple, got {value!r}")


@dataclass(frozen=True)
class Fail:
    """An error to raise instead of replying; ``retryable`` None → the default of ``code``."""

    message: str
    code: ProviderErrorCode = "server_error"
    retryable: bool | None = None
    status: int | None = None
    retry_after: float | None = None

    def to_error(self, provider: str = "scripted") -> ProviderError:
        """The :class:`ProviderError` this failure raises."""
        return ProviderError(
            self.message,
            code=self.code,
            retryable=self.retryable,
            status=self.status,
            retry_after=self.retry_after,
            provider=provider,
        )


@dataclass(frozen=True)
class Expect:
    """Expectations on the request a reply answers (spec 05 §5.7.3).

    Unlike the reference, ``contains_tool_result`` respects the tool name and the checks
    always run. The first failure makes the stream raise
    ``ProviderError("Scripted expectation failed: <detail>")``.
    """

    message_count: int | None = None
    contains_message: str | None = None
    contains_tool_result: tuple[str, str] | None = None
    system_prompt_contains: str | None = None
    tools: Sequence[str] | None = None
    check: Callable[[ProviderRequest], None] | None = None

    def failure(self, request: ProviderRequest) -> str | None:
        """The detail of the first failing expectation, or None when all pass."""
        messages = request.messages
        if self.message_count is not None and len(messages) != self.message_count:
            return f"Expected {self.message_count} messages, got {len(messages)}"
        if self.contains_message is not None and not any(
            m.role in ("user", "assistant") and self.contains_message in m.text for m in messages
        ):
            return f'Expected a user or assistant message containing "{self.contains_message}"'
        if self.contains_tool_result is not None:
            name, text = self.contains_tool_result
            if not any(
                isinstance(m, ToolMessage) and m.name == name and text in m.content
                for m in messages
            ):
                return f'Expected tool result for "{name}" containing "{text}"'
        if self.system_prompt_contains is not None:
            if not messages or messages[0].role != "system":
                return "No system message"
            if self.system_prompt_contains not in messages[0].text:
                return f'Expected system prompt containing "{self.system_prompt_contains}"'
        if self.tools is not None:
            offered = [tool.name for tool in request.tools]
            if offered != list(self.tools):
                return f"Expected tools {list(self.tools)!r}, got {offered!r}"
        if self.check is not None:
            try:
                self.check(request)
            except Exception as exc:
                return str(exc) or type(exc).__name__
        return None


# --------------------------------------------------------------------------------------
# Reply


_V = TypeVar("_V")
_B = TypeVar("_B")


class _FieldAndBuilder(Generic[_V, _B]):
    """An attribute that is a builder on the class and a field on instances.

    Spec 05 §5.7.2 names both a field and a builder ``tool_calls`` (and ``error``):
    ``Reply.tool_calls(("echo", {}))`` builds a reply, ``reply.tool_calls`` is its list.
    """

    def __init__(self, builder: _B) -> None:
        self._builder = builder
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _B: ...
    @overload
    def __get__(self, obj: Reply, owner: type | None = None) -> _V: ...
    def __get__(self, obj: Reply | None, owner: type | None = None) -> _B | _V:
        if obj is None:
            return self._builder
        return cast(_V, obj.__dict__[self._name])

    def __set__(self, obj: Reply, value: _V) -> None:
        obj.__dict__[self._name] = value


class _ToolCallsBuilder(Protocol):
    def __call__(self, *calls: CallLike, content: str | None = None, **kw: Any) -> Reply: ...


class _ErrorBuilder(Protocol):
    def __call__(
        self,
        message: str,
        code: ProviderErrorCode = "server_error",
        *,
        retryable: bool | None = None,
        status: int | None = None,
        retry_after: float | None = None,
        **kw: Any,
    ) -> Reply: ...


def _build_tool_calls(*calls: CallLike, content: str | None = None, **kw: Any) -> Reply:
    """``Reply.tool_calls(*calls, content=None, **kw)``: a reply that calls tools."""
    return Reply(content=content, tool_calls=calls, **kw)


def _build_error(
    message: str,
    code: ProviderErrorCode = "server_error",
    *,
    retryable: bool | None = None,
    status: int | None = None,
    retry_after: float | None = None,
    **kw: Any,
) -> Reply:
    """``Reply.error(message, code=…, **kw)``: a reply that raises ``ProviderError``."""
    fail = Fail(message, code, retryable=retryable, status=status, retry_after=retry_after)
    return Reply(error=fail, **kw)


_USAGE_FIELDS = frozenset(Usage.model_fields)
_REPR_DEFAULTS: dict[str, Any] = {
    "content": None,
    "tool_calls": [],
    "reasoning_content": None,
    "reasoning_details": None,
    "finish_reason": None,
    "usage": None,
    "error": None,
    "fail_after_chunks": None,
    "delay": 0.0,
    "chunks": None,
    "chunk_size": None,
    "chunk_delay": 0.0,
    "expect": None,
}


class Reply:
    """One scripted response (spec 05 §5.7.2). Build with the keyword constructor or the
    builders ``Reply.text``, ``Reply.tool_calls``, ``Reply.reasoning``, ``Reply.error``."""

    tool_calls: _FieldAndBuilder[list[Call], _ToolCallsBuilder] = _FieldAndBuilder(
        _build_tool_calls
    )
    error: _FieldAndBuilder[Fail | None, _ErrorBuilder] = _FieldAndBuilder(_build_error)

    def __init__(
        self,
        *,
        content: str | None = None,
        tool_calls: Iterable[CallLike] = (),
        reasoning_content: str | None = None,
        reasoning_details: list[dict[str, Any]] | None = None,
        finish_reason: FinishReason | None = None,
        usage: dict[str, Any] | Usage | None = None,
        error: Fail | None = None,
        fail_after_chunks: int | None = None,
        delay: float = 0.0,
        chunks: Sequence[str] | None = None,
        chunk_size: int | None = None,
        chunk_delay: float = 0.0,
        expect: Expect | None = None,
    ) -> None:
        self.content = content
        self.tool_calls = [_as_call(call) for call in tool_calls]
        self.reasoning_content = reasoning_content
        self.reasoning_details = reasoning_details
        self.finish_reason = finish_reason
        self.usage = usage
        self.error = error
        self.fail_after_chunks = fail_after_chunks
        self.delay = delay
        self.chunks = list(chunks) if chunks is not None else None
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay
        self.expect = expect
        self._validate()

    def _validate(self) -> None:
        if self.chunks is not None:
            if self.chunk_size is not None:
                raise ValueError("Reply: give either chunks or chunk_size, not both")
            if "".join(self.chunks) != (self.content or ""):
                raise ValueError("Reply: the chunks must concatenate to the content")
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ValueError("Reply: chunk_size must be at least 1")
        if self.fail_after_chunks is not None:
            if self.error is None:
                raise ValueError("Reply: fail_after_chunks needs an error")
            if self.fail_after_chunks < 0:
                raise ValueError("Reply: fail_after_chunks must not be negative")
        if self.delay < 0 or self.chunk_delay < 0:
            raise ValueError("Reply: delays must not be negative")
        if self.finish_reason is not None and self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"Reply: unknown finish_reason {self.finish_reason!r}")
        overrides = self.usage_overrides()
        unknown = set(overrides) - _USAGE_FIELDS
        if unknown:
            raise ValueError(f"Reply: unknown usage fields {sorted(unknown)}")
        Usage.model_validate(overrides)

    @classmethod
    def text(cls, content: str, **kw: Any) -> Reply:
        """A text reply."""
        return cls(content=content, **kw)

    @classmethod
    def reasoning(
        cls,
        content: str | None,
        reasoning: str,
        details: list[dict[str, Any]] | None = None,
        **kw: Any,
    ) -> Reply:
        """A reply whose reasoning ``reasoning`` streams before ``content``; ``details``
        arrive in ``Finish.reasoning_details``."""
        return cls(content=content, reasoning_content=reasoning, reasoning_details=details, **kw)

    def usage_overrides(self) -> dict[str, Any]:
        """The usage fields this reply sets explicitly (they override the synthetic ones)."""
        if self.usage is None:
            return {}
        if isinstance(self.usage, Usage):
            return {name: getattr(self.usage, name) for name in self.usage.model_fields_set}
        return dict(self.usage)

    def content_chunks(self) -> list[str]:
        """The content as streamed: explicit ``chunks``, ``chunk_size`` pieces, or one."""
        if self.chunks is not None:
            return [c for c in self.chunks if c]
        return split_text(self.content or "", self.chunk_size)

    def __repr__(self) -> str:
        shown = [
            f"{name}={value!r}"
            for name, default in _REPR_DEFAULTS.items()
            if (value := getattr(self, name)) != default
        ]
        return f"Reply({', '.join(shown)})"


def split_text(text: str, size: int | None) -> list[str]:
    """``text`` in pieces of ``size`` characters (one piece when None; none when empty)."""
    if not text:
        return []
    if size is None:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


ReplyFunction = Callable[[ProviderRequest], "Reply | Awaitable[Reply]"]
ReplySource = Reply | ReplyFunction


class Script:
    """A chainable list of replies: ``Script().text("Hi").error("busy", code="rate_limit")``.

    The chain methods append and return the script; an element may also be a function
    of the request returning a ``Reply`` (sync or async), added with :meth:`then`.
    """

    def __init__(self, replies: Iterable[ReplySource] = ()) -> None:
        self._replies: list[ReplySource] = list(replies)

    def then(self, reply: ReplySource) -> Script:
        """Append a reply or a reply function."""
        self._replies.append(reply)
        return self

    def text(self, content: str, **kw: Any) -> Script:
        """Append ``Reply.text(content, **kw)``."""
        return self.then(Reply.text(content, **kw))

    def tool_calls(self, *calls: CallLike, content: str | None = None, **kw: Any) -> Script:
        """Append ``Reply.tool_calls(*calls, content=content, **kw)``."""
        return self.then(Reply.tool_calls(*calls, content=content, **kw))

    def reasoning(
        self,
        content: str | None,
        reasoning: str,
        details: list[dict[str, Any]] | None = None,
        **kw: Any,
    ) -> Script:
        """Append ``Reply.reasoning(content, reasoning, details, **kw)``."""
        return self.then(Reply.reasoning(content, reasoning, details, **kw))

    def error(self, message: str, code: ProviderErrorCode = "server_error", **kw: Any) -> Script:
        """Append ``Reply.error(message, code, **kw)``."""
        return self.then(Reply.error(message, code, **kw))

    def copy(self) -> Script:
        """An independent script with the same elements."""
        return Script(self._replies)

    def __len__(self) -> int:
        return len(self._replies)

    def __iter__(self) -> Iterator[ReplySource]:
        return iter(self._replies)

    def __repr__(self) -> str:
        return f"Script({self._replies!r})"


__all__ = [
    "Call",
    "CallLike",
    "Expect",
    "Fail",
    "Reply",
    "ReplyFunction",
    "ReplySource",
    "Script",
    "split_text",
]

"""The neutral request, stream and response types every provider speaks (spec 05 §5.3, §5.5).

The engine builds a :class:`ProviderRequest` from the thread's history; an adapter turns it
into one wire request and turns the provider's stream back into :data:`StreamEvent`
values; :func:`threadloom.providers.base.generate` folds a stream into a
:class:`ProviderResponse`. Nothing here knows any provider's wire format.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from threadloom.records import SharingModel
from threadloom.records import trusted as trusted  # construction without validation

FinishReason = Literal["stop", "tool_calls", "length", "content_filter"]
FINISH_REASONS: frozenset[str] = frozenset(("stop", "tool_calls", "length", "content_filter"))
ReasoningEffort = Literal["low", "medium", "high"]


class _Model(SharingModel):
    """Base of the provider types: unknown fields are an error, not silently dropped; the
    records the engine builds with ``trusted`` share their fields sets (``SharingModel``)."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------
# Message parts and messages (§5.3.2)


class TextPart(_Model):
    """A text part of a user message."""

    type: Literal["text"] = "text"
    text: str


class ImagePart(_Model):
    """An inline image: ``data`` is base64 text of the bytes, ``media_type`` e.g. image/png."""

    type: Literal["image"] = "image"
    media_type: str
    data: str
    name: str | None = None
    detail: Literal["auto", "low", "high"] = "auto"


Part = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class SystemMessage(_Model):
    """System instructions."""

    role: Literal["system"] = "system"
    content: str

    @property
    def text(self) -> str:
        """The message's text (what expectations and synthetic usage look at)."""
        return self.content


class UserMessage(_Model):
    """A user turn: plain text or a list of text and image parts."""

    role: Literal["user"] = "user"
    content: str | list[Part]

    @property
    def text(self) -> str:
        """The content, or the texts of its text parts joined by a space."""
        if isinstance(self.content, str):
            return self.content
        return " ".join(part.text for part in self.content if isinstance(part, TextPart))


class ToolCallSpec(_Model):
    """A tool call issued by the model. ``arguments`` is JSON text (possibly invalid).

    ``extra_content`` is provider round-trip data (e.g. Google thought signatures, the
    Responses item id) that an adapter of the same kind sends back unchanged.
    """

    id: str
    name: str
    arguments: str = "{}"
    extra_content: dict[str, Any] | None = None


class AssistantMessage(_Model):
    """A model turn, with its tool calls and its persisted reasoning (spec 05 §5.6).

    ``reasoning_content`` and ``reasoning_details`` arrive exactly as persisted; each
    adapter decides whether to supply, convert or omit them (:mod:`.reasoning`).
    """

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    reasoning_content: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None

    @property
    def text(self) -> str:
        """The visible content ("" when None); tool call arguments are not included."""
        return self.content or ""


class ToolMessage(_Model):
    """The result of one tool call; ``images`` are images the tool returned."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    images: list[ImagePart] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """The result text."""
        return self.content


ProviderMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]


# --------------------------------------------------------------------------------------
# The request (§5.3.1)


class ToolSpec(_Model):
    """A tool offered to the model; ``parameters`` is a JSON schema object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class NamedToolChoice(TypedDict):
    """``tool_choice`` that forces one named tool: ``{"name": "<tool>"}``."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


class ReasoningRequest(_Model):
    """Reasoning asked for by the prompt (spec 04 §4.4.4); adapters map it per §5.6.3."""

    effort: ReasoningEffort | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    exclude: bool = False


class OutputFormat(_Model):
    """The answer's declared JSON schema (spec 24 §24.2): an adapter with a native
    structured output sends it in the provider's form; one without ignores it (the engine
    checks every answer anyway)."""

    name: str
    json_schema: dict[str, Any]
    strict: bool = False


class NativeCompaction(_Model):
    """A provider's own compaction item in a request (spec 23 §23.4 rule 5): its wire
    ``items`` stand for ``messages[at]`` and ``messages[at + 1]`` — the summary of the
    same compaction as text and its acknowledgement. An adapter whose ``native_compaction``
    is ``kind`` sends the items in their place; any other adapter sends the two messages."""

    kind: str
    at: int = Field(ge=0)
    items: list[dict[str, Any]]


class NativeCompacted(_Model):
    """What an adapter's ``compact`` answers (spec 23 §23.2 rule 7): the item to keep
    (``provider_item``), the call's usage and the response body its LLM row logs."""

    item: dict[str, Any]
    usage: Usage
    body: dict[str, Any] = Field(default_factory=dict)


class ProviderRequest(_Model):
    """One model request, provider-neutral (spec 05 §5.3.1).

    ``tool_choice`` is None when no tools are offered; ``parallel_tool_calls`` None means
    "do not send the parameter"; ``reasoning`` is present iff the prompt requests
    reasoning; ``metadata`` (thread_id, prompt, log_id) is for logging, never sent.
    """

    model: str
    messages: list[ProviderMessage] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    reasoning: ReasoningRequest | None = None
    max_output_tokens: int | None = Field(default=None, gt=0)
    provider_options: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    output: OutputFormat | None = None
    """The prompt's output type (spec 24), None when it declares none."""
    native_compaction: NativeCompaction | None = None
    """A provider's compaction item standing for two of ``messages`` (spec 23 §23.4)."""


# --------------------------------------------------------------------------------------
# Usage (§5.5)


class Usage(_Model):
    """Token counts of one response, normalised across providers (spec 05 §5.5).

    ``input_tokens`` include cached (and Anthropic cache-write) tokens; ``output_tokens``
    include reasoning tokens; ``cost`` is set only when the provider reports a charge.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None

    @classmethod
    def from_counts(
        cls,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cached_tokens: int | None = None,
        reasoning_tokens: int | None = None,
        total_tokens: int | None = None,
        cost: float | None = None,
    ) -> Usage:
        """Build usage from provider counts that may be missing (``None`` → 0).

        ``total_tokens`` falls back to input + output when the provider reports none (or
        0), which is the §5.5 rule every adapter shares.
        """
        inp = input_tokens or 0
        out = output_tokens or 0
        return cls(
            input_tokens=inp,
            output_tokens=out,
            cached_tokens=cached_tokens or 0,
            reasoning_tokens=reasoning_tokens or 0,
            total_tokens=total_tokens or (inp + out),
            cost=cost,
        )


# --------------------------------------------------------------------------------------
# Stream events (§5.3.3)


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextDelta(_Event):
    """Visible output text."""

    type: Literal["text_delta"] = "text_delta"
    text: str


class ReasoningDelta(_Event):
    """Reasoning text (raw reasoning or a summary, as the provider gives it)."""

    type: Literal["reasoning_delta"] = "reasoning_delta"
    text: str


class ToolCallStart(_Event):
    """A tool call begins. ``id`` is "" when the provider gives none (the engine assigns)."""

    type: Literal["tool_call_start"] = "tool_call_start"
    index: int
    id: str = ""
    name: str


class ToolCallDelta(_Event):
    """A fragment of the JSON arguments text of call ``index``."""

    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    arguments: str


class ToolCallEnd(_Event):
    """Call ``index`` is complete. ``arguments``, when given, replaces the fragments."""

    type: Literal["tool_call_end"] = "tool_call_end"
    index: int
    arguments: str | None = None
    extra_content: dict[str, Any] | None = None


class Finish(_Event):
    """The last event of every successful stream."""

    type: Literal["finish"] = "finish"
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)
    reasoning_details: list[dict[str, Any]] | None = None
    response_id: str | None = None
    response_model: str | None = None
    """The model the provider says produced the response (it may name a dated version of
    the requested one)."""


StreamEvent = Annotated[
    TextDelta | ReasoningDelta | ToolCallStart | ToolCallDelta | ToolCallEnd | Finish,
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------------------
# The aggregated response (§5.3.4)


class ProviderResponse(_Model):
    """A whole stream folded into one value (see ``generate``)."""

    id: str
    model: str
    content: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    reasoning_content: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)


__all__ = [
    "FINISH_REASONS",
    "AssistantMessage",
    "Finish",
    "FinishReason",
    "ImagePart",
    "NamedToolChoice",
    "NativeCompacted",
    "NativeCompaction",
    "OutputFormat",
    "Part",
    "ProviderMessage",
    "ProviderRequest",
    "ProviderResponse",
    "ReasoningDelta",
    "ReasoningEffort",
    "ReasoningRequest",
    "StreamEvent",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallSpec",
    "ToolCallStart",
    "ToolChoice",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "trusted",
]

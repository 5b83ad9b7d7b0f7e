"""The part of a model request that is the same for every request of one prompt, model and
offered tools: tool specs, options, the log row's ``tools_schema`` and the JSON text of the
request body around its messages (spec 04 §4.25).

``build_request`` used to rebuild and re-serialise all of it for every request; a ``Head``
is built once per (prompt, model, tools) — all three frozen definitions, compared by
identity, so a re-registered definition is a new key — and reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from threadloom.define.model import Model
from threadloom.define.prompt import Prompt
from threadloom.providers.types import (
    OutputFormat,
    ProviderRequest,
    ReasoningRequest,
    ToolSpec,
    trusted,
)
from threadloom.records import json_compact

SLOT = "__threadloom_request_messages__"
_LIMIT = 256  # heads kept before the cache starts over (definitions re-registered often)


@dataclass(eq=False, slots=True)
class Head:
    """The constant part of a request; ``text`` is the body's JSON up to ``_metadata``."""

    keys: tuple[Any, ...]
    """The prompt, model and offered tools this head was built from (kept alive)."""
    tools: list[ToolSpec]
    tool_choice: Any
    parallel_tool_calls: bool | None
    reasoning: ReasoningRequest | None
    max_output_tokens: int | None
    provider_options: dict[str, Any]
    text: str
    output: OutputFormat | None
    """The prompt's output type as the request carries it (spec 24), or None."""
    tools_schema: str | None
    _meta: tuple[str, str, str] | None = field(default=None)
    """The last ``(prompt name, system text, _metadata JSON)`` (the system rarely changes)."""

    def request(self, model: str, messages: list[Any], metadata: dict[str, Any]) -> Any:
        """The provider request with these messages (lists and options are fresh copies)."""
        return trusted(
            ProviderRequest,
            {
                "model": model,
                "messages": messages,
                "tools": list(self.tools),
                "tool_choice": self.tool_choice,
                "parallel_tool_calls": self.parallel_tool_calls,
                "reasoning": self.reasoning,
                "max_output_tokens": self.max_output_tokens,
                "provider_options": dict(self.provider_options),
                "metadata": metadata,
                "output": self.output,
                "native_compaction": None,
            },
        )

    def body_head(self, prompt_name: str, system: str, extra: dict[str, Any] | None) -> str:
        """The body's JSON text with the messages slot: ``text`` and its ``_metadata``."""
        if extra:
            meta = json_compact({"promptName": prompt_name, "systemPrompt": system, **extra})
            return f'{self.text},"_metadata":{meta}}}'
        last = self._meta
        if last is None or last[0] != prompt_name or last[1] != system:
            meta = json_compact({"promptName": prompt_name, "systemPrompt": system})
            last = self._meta = (prompt_name, system, meta)
        return f'{self.text},"_metadata":{last[2]}}}'


Heads = dict[tuple[int, ...], Head]


def head_for(heads: Heads, prompt: Any, model: Any, tools: list[Any]) -> Head:
    """The head of ``prompt`` on ``model`` offering ``tools`` (the step's resolved tools),
    kept in ``heads`` (the runtime's, so it goes with it) when the prompt and model are
    frozen definitions."""
    if not (isinstance(prompt, Prompt) and isinstance(model, Model)):
        return _build(prompt, model, tools)
    # the head keeps its keys alive, so an id in a cached key still names the same object
    key = (id(prompt), id(model), *map(id, tools))
    found = heads.get(key)
    if found is not None:
        return found
    if len(heads) >= _LIMIT:
        heads.clear()
    head = heads[key] = _build(prompt, model, tools)
    return head


def _build(prompt: Any, model: Any, tools: list[Any]) -> Head:
    # resumable relationships are reached through subagent_create, never offered by name
    offered = (
        [t for t in tools if getattr(t, "direct", True)]
        if getattr(model, "supports_tools", True)
        else []
    )
    specs = [
        ToolSpec(name=t.name, description=t.description, parameters=t.parameters) for t in offered
    ]
    reasoning = getattr(prompt, "reasoning", None)
    wants_reasoning = reasoning is not None and (
        getattr(reasoning, "effort", None) is not None
        or getattr(reasoning, "max_tokens", None) is not None
    )
    options = {
        **dict(getattr(model, "provider_options", {}) or {}),
        **dict(getattr(prompt, "provider_options", {}) or {}),
    }
    head = Head(
        keys=(prompt, model, *tools),
        tools=specs,
        tool_choice=getattr(prompt, "tool_choice", "auto") if specs else None,
        parallel_tool_calls=getattr(prompt, "parallel_tool_calls", None) if specs else None,
        reasoning=(
            ReasoningRequest(
                effort=reasoning.effort, max_tokens=reasoning.max_tokens, exclude=reasoning.exclude
            )
            if wants_reasoning and reasoning is not None
            else None
        ),
        max_output_tokens=getattr(model, "max_output_tokens", None),
        provider_options=options,
        text="",
        tools_schema=json_compact([t.model_dump() for t in specs]) if specs else None,
        output=_output_format(prompt),
    )
    dumped = head.request(model.model, [], {}).model_dump(
        mode="json", exclude={"metadata", "messages"}
    )
    if dumped.get("output") is None:
        dumped.pop("output", None)  # the logged body of a request without one is unchanged
    text = json_compact({"model": dumped.pop("model"), "messages": SLOT, **dumped})
    head.text = text[:-1]  # without its closing brace: ``_metadata`` follows
    return head


def _output_format(prompt: Any) -> OutputFormat | None:
    """The request's ``output`` of a prompt that declares an output type (spec 24 §24.2)."""
    output = getattr(prompt, "output", None) if isinstance(prompt, Prompt) else None
    if output is None:
        return None
    return OutputFormat(
        name=output.name, json_schema=output.schema, strict=bool(prompt.output_strict)
    )


__all__ = ["SLOT", "Head", "Heads", "head_for"]

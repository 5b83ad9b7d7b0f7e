"""A prompt's declared output type (spec 24): its JSON schema, the name providers get, and
the check of an answer against it.

An output type is a pydantic model class (validated by pydantic) or a JSON schema dict
(validated by ``jsonschema``, the reference implementation of the JSON Schema drafts). The
checker is built once per prompt and kept, so a turn without a declared type pays nothing
and a turn with one compiles nothing.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from threadloom.define.schema import model_schema

#: What a provider accepts as the name of a response format (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``).
NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NAME_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")
_FENCE: Final = re.compile(r"\A```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?```\Z", re.DOTALL)
#: The longest problem text kept (one line of a status error is cut at 300 anyway).
PROBLEM_MAX: Final = 1000
#: How many validation errors a problem text lists before "…".
PROBLEMS_LISTED: Final = 5


@dataclass(frozen=True, slots=True)
class Checked:
    """An answer checked against the output type: ``value`` (the parsed JSON value, as the
    pydantic model dumps it in JSON mode for a model class) when ``problem`` is None."""

    value: Any = None
    problem: str | None = None

    @property
    def valid(self) -> bool:
        """Whether the answer matches the output type."""
        return self.problem is None


class OutputType:
    """The compiled output type of one prompt: ``schema`` (JSON schema), ``name`` and
    :meth:`check`."""

    def __init__(self, declared: type[BaseModel] | dict[str, Any], name: str | None) -> None:
        self.declared = declared
        self.model: type[BaseModel] | None = None
        if isinstance(declared, dict):
            from jsonschema.validators import validator_for  # only prompts that declare one

            self.schema: dict[str, Any] = copy.deepcopy(declared)
            cls = validator_for(self.schema)
            cls.check_schema(self.schema)  # a broken schema is a definition problem (V24)
            self._validator: Any = cls(self.schema)
            default = str(self.schema.get("title") or "output")
        else:
            self.model = declared
            self.schema = model_schema(declared)
            self._validator = None
            default = declared.__name__
        self.name = name if name is not None else (_NAME_UNSAFE.sub("_", default)[:64] or "output")

    def check(self, text: str) -> Checked:
        """Parse ``text`` (one JSON value, optionally inside one Markdown code fence) and
        validate it; a problem names what is wrong, path by path."""
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced is not None:
            body = fenced.group("body").strip()
        if self.model is not None:
            try:
                instance = self.model.model_validate_json(body)
            except ValidationError as exc:
                return Checked(problem=_pydantic_problem(exc))
            return Checked(value=instance.model_dump(mode="json"))
        try:
            value = json.loads(body)
        except ValueError as exc:
            return Checked(problem=f"the answer is not valid JSON: {exc}")
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            return Checked(problem=_schema_problem(errors))
        return Checked(value=value)

    def parse(self, value: Any) -> Any:
        """A stored output value as the declared type gives it: a model instance for a
        model class, the JSON value itself for a schema dict."""
        if self.model is not None:
            return self.model.model_validate(value)
        return value


_COMPILED: dict[tuple[int, str | None], OutputType] = {}
_COMPILED_MAX: Final = 256


def compiled_output(declared: type[BaseModel] | dict[str, Any], name: str | None) -> OutputType:
    """The :class:`OutputType` of ``declared``, compiled once and kept (by identity: the
    entry keeps ``declared`` alive, so its id names the same object). Kept here, not on
    the frozen prompt, so two equal prompts stay equal."""
    key = (id(declared), name)
    found = _COMPILED.get(key)
    if found is not None and found.declared is declared:
        return found
    if len(_COMPILED) >= _COMPILED_MAX:
        _COMPILED.clear()
    compiled = _COMPILED[key] = OutputType(declared, name)
    return compiled


def _where(path: Any) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(root)"


def _cut(text: str) -> str:
    return text if len(text) <= PROBLEM_MAX else text[: PROBLEM_MAX - 1] + "…"


def _pydantic_problem(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if len(errors) == 1 and errors[0].get("type") == "json_invalid":
        return _cut(f"the answer is not valid JSON: {errors[0].get('msg')}")
    lines = [f"{_where(e.get('loc', ()))}: {e.get('msg')}" for e in errors[:PROBLEMS_LISTED]]
    if len(errors) > PROBLEMS_LISTED:
        lines.append(f"… {len(errors) - PROBLEMS_LISTED} more")
    return _cut("; ".join(lines))


def _schema_problem(errors: list[Any]) -> str:
    lines = [f"{_where(e.absolute_path)}: {e.message}" for e in errors[:PROBLEMS_LISTED]]
    if len(errors) > PROBLEMS_LISTED:
        lines.append(f"… {len(errors) - PROBLEMS_LISTED} more")
    return _cut("; ".join(lines))


def retry_text(problem: str) -> str:
    """The message sent back to the model after an answer that did not match (§24.3)."""
    return (
        "Your answer does not match the required output schema: "
        f"{problem}. Reply again with only a JSON value that matches the schema."
    )


__all__ = ["NAME_PATTERN", "Checked", "OutputType", "compiled_output", "retry_text"]

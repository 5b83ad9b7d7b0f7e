"""The ``Model`` definition (spec 04 §4.3): which provider serves a model, at what price.

Construction checks field types only; names, prices, ranges and references are checked by
``Definitions.validate()`` (§4.2.4) so that every problem of a project is reported at once.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from threadloom.errors import DEFAULT_FALLBACK_ON, FallbackClass

#: Model names may contain the separators of provider model ids (§4.2.3).
MODEL_NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")

PRICE_FIELDS: Final = ("input_price", "output_price", "cached_price", "reasoning_price")

#: A check result: (check id such as ``"V17"``, message without the origin prefix).
Problem = tuple[str, str]


def is_provider_instance(value: object) -> bool:
    """True for an object usable as a provider: anything with a callable ``stream`` (spec 05)."""
    return callable(getattr(value, "stream", None))


class Model(BaseModel):
    """A model a prompt can use: provider, provider model id, fallbacks and prices (§4.3)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    provider: Any
    model: str
    fallbacks: tuple[str, ...] = ()
    fallback_on: tuple[FallbackClass, ...] = DEFAULT_FALLBACK_ON
    input_price: float | None = None
    output_price: float | None = None
    cached_price: float | None = None
    reasoning_price: float | None = None
    max_attempts: int = 2
    supports_tools: bool = True
    supports_images: bool = True
    max_output_tokens: int | None = None
    provider_options: dict[str, Any] = Field(default_factory=dict)
    context_window: int | None = None
    """The model's context window in tokens (spec 23 §23.3); used by compaction only."""
    compact_at: float | None = None
    """Compact the thread before a request whose estimated context exceeds this fraction
    of ``context_window`` (spec 23 §23.3); None (the default): never by threshold."""
    compact_keep: float = 0.25
    """The fraction of ``context_window`` kept as live messages after a compaction."""

    @field_validator("provider")
    @classmethod
    def _provider_type(cls, value: object) -> object:
        """A registered provider name or a provider instance; anything else is a type error."""
        if isinstance(value, str) or is_provider_instance(value):
            return value
        raise ValueError("provider must be a provider name or an object with a stream() method")

    @property
    def provider_name(self) -> str | None:
        """The registered provider name, or ``None`` when the model holds a provider instance."""
        return self.provider if isinstance(self.provider, str) else None

    @property
    def effective_cached_price(self) -> float | None:
        """``cached_price``, defaulting to ``input_price`` (§4.3)."""
        return self.cached_price if self.cached_price is not None else self.input_price

    @property
    def effective_reasoning_price(self) -> float | None:
        """``reasoning_price``, defaulting to ``output_price`` (§4.3)."""
        return self.reasoning_price if self.reasoning_price is not None else self.output_price

    def self_problems(self) -> list[Problem]:
        """Checks that need no other definition: V1 (name), V4 (self fallback), V17, ranges."""
        problems: list[Problem] = []
        if not MODEL_NAME_PATTERN.fullmatch(self.name):
            problems.append(("V1", f'Model name "{self.name}" is invalid'))
        if self.name in self.fallbacks:
            problems.append(
                ("V4", f'Model "{self.name}": fallback "{self.name}" must not list itself')
            )
        for field in PRICE_FIELDS:
            value = getattr(self, field)
            if value is not None and (not math.isfinite(value) or value < 0):
                problems.append(("V17", f'Model "{self.name}": {field} must be a number >= 0'))
        if not 1 <= self.max_attempts <= 5:
            problems.append(("V17", f'Model "{self.name}": max_attempts must be between 1 and 5'))
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            problems.append(("V17", f'Model "{self.name}": max_output_tokens must be >= 1'))
        if self.context_window is not None and self.context_window < 1:
            problems.append(("V17", f'Model "{self.name}": context_window must be >= 1'))
        if self.compact_at is not None:
            if self.context_window is None:
                problems.append(("V17", f'Model "{self.name}": compact_at needs a context_window'))
            if not (math.isfinite(self.compact_at) and 0 < self.compact_at < 1):
                problems.append(("V17", f'Model "{self.name}": compact_at must be between 0 and 1'))
        if not (math.isfinite(self.compact_keep) and 0 < self.compact_keep < 1):
            problems.append(("V17", f'Model "{self.name}": compact_keep must be between 0 and 1'))
        return problems

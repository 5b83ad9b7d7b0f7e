"""A thread's shared state over HTTP (spec 02 §2.20, spec 08 §8.3.7): read it, replace it
(``GET``/``PUT /api/threads/{id}/state``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from threadloom.records import SharedState
from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.problems import check, integer_from, refuse


def _state(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise refuse("must be a JSON object")
    return value


MAX_VERSION = 2**53 - 1
"""The largest version a body may name (JavaScript's largest safe integer)."""


class PutState(Body):
    """``PUT /api/threads/{id}/state``: the new state, replacing the old whole; with
    ``version``, only if it is still the stored version (else 409 ``state_conflict``)."""

    model_config = examples({"state": {"todos": ["milk"]}}, {"state": {}, "version": 0})

    state: Annotated[dict[str, Any], check(_state)]
    version: Annotated[
        int | None, Field(ge=0, le=MAX_VERSION), check(integer_from(0, MAX_VERSION))
    ] = None


class StateAnswer(Answer):
    """A thread's shared state: the JSON object, its version (0: never written) and the
    time of its last change (µs; ``null``: never written)."""

    state: dict[str, Any]
    version: int
    updated_at: int | None

    @classmethod
    def of(cls, state: SharedState) -> StateAnswer:
        return cls.model_validate(state.to_wire())

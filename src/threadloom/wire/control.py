"""Execution control of a thread (spec 08 §8.5): continue, stop and terminate."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.problems import boolean_value, check, refuse


def _side(value: Any) -> str | None:
    if value is None:
        return None
    if value not in ("a", "b"):
        raise refuse("must be 'a' or 'b'", "Side must be 'a' or 'b'")
    return str(value)


def _if_unanswered(value: Any) -> bool:
    if not isinstance(value, bool):
        raise refuse("must be a boolean", "ifUnanswered must be true or false")
    return value


class ContinueThread(Body):
    # §8.5.1: a null or absent side is side a; one problem answered, side's first
    model_config = examples({"side": "a"}, {"side": "a", "ifUnanswered": True})
    one_problem: ClassVar[bool] = True

    side: Annotated[Literal["a", "b"] | None, check(_side)] = None
    ifUnanswered: Annotated[bool, check(_if_unanswered)] = False


class Cascade(Body):
    # §8.5.2: absent is false; anything but a boolean, null included, is a 400
    model_config = examples({"cascade": False})

    cascade: Annotated[bool, check(boolean_value)] = False


class ContinuedAfter(Answer):
    id: str
    role: Literal["system", "user", "assistant", "tool"]
    status: Literal["pending", "completed", "failed"]


class ContinuePlan(Answer):
    """What a continue starts (§8.5.1 step 4)."""

    side: Literal["a", "b"]
    queued: int
    after: ContinuedAfter | None
    again: bool


class ContinueAccepted(Answer):
    status: Literal["queued"]
    queueId: str
    message: str
    run: ContinuePlan


class Stopped(Answer):
    status: Literal["stopped"]
    message: str
    wasRunning: bool
    settled: bool


class Terminated(Answer):
    success: bool
    threadId: str
    terminated: int
    alreadyTerminated: bool

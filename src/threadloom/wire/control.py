"""Execution control of a thread (spec 08 §8.5): continue, stop and terminate."""

from __future__ import annotations

from typing import Literal

from threadloom.wire.model import Answer, Body, examples


class ContinueThread(Body):
    model_config = examples({"side": "a"}, {"side": "a", "ifUnanswered": True})

    side: Literal["a", "b"] | None = None
    ifUnanswered: bool = False


class Cascade(Body):
    model_config = examples({"cascade": False})

    cascade: bool = False


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

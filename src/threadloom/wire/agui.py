"""AG-UI's run request (spec 13, docs/interop.md): ``POST /api/agui/{agent}``'s body."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from threadloom.wire.model import Body, examples
from threadloom.wire.patterns import NOT_BLANK, UUID

_AGUI_EXAMPLE = {
    "threadId": "5b0c3c0e-3f0e-4c4e-9d55-0c3e0f9a7b21",
    "runId": "run-1",
    "messages": [{"id": "m1", "role": "user", "content": "Hello"}],
}

try:  # the agui extra: its own model says what a RunAgentInput is
    from ag_ui.core import RunAgentInput as _AgUiInput
except ImportError:  # pragma: no cover - the route answers 501 without it

    class RunAgentInput(Body):
        """AG-UI's RunAgentInput (docs/interop.md; install ``threadloom[agui]``)."""

        model_config = examples(_AGUI_EXAMPLE)

        threadId: str = Field(pattern=UUID)
        runId: str = Field(max_length=128, pattern=NOT_BLANK)
        messages: list[dict[str, Any]]

else:

    class RunAgentInput(_AgUiInput):  # type: ignore[no-redef]
        """AG-UI's RunAgentInput (docs/interop.md), with Threadloom's rules of its ids:
        ``threadId`` is the Threadloom thread's id, ``runId`` not blank."""

        model_config = ConfigDict(
            json_schema_extra=lambda s: s.update(examples=[_AGUI_EXAMPLE]),
            regex_engine="python-re",
        )

        thread_id: str = Field(alias="threadId", pattern=UUID)
        run_id: str = Field(alias="runId", max_length=128, pattern=NOT_BLANK)

"""AG-UI's run request (spec 13, docs/interop.md): ``POST /api/agui/{agent}``'s body, the
route parses it with (``server/agui/routes.parse_input``)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from threadloom.records import is_uuid
from threadloom.wire.model import Body, examples
from threadloom.wire.patterns import END, NOT_BLANK, UUID
from threadloom.wire.problems import refuse

_AGUI_EXAMPLE = {
    "threadId": "5b0c3c0e-3f0e-4c4e-9d55-0c3e0f9a7b21",
    "runId": "run-1",
    "messages": [{"id": "m1", "role": "user", "content": "Hello"}],
}

ID_LIMIT = 128
"""The longest ``runId`` (and AG-UI message id) Threadloom keeps."""
TOOL_NAME = "^[A-Za-z0-9_-]{1,64}" + END
"""A frontend tool's name (spec 13 §13.7.1): what every model provider takes."""


def _threadloom_ids(thread_id: str, run_id: str) -> None:
    """``threadId`` is a Threadloom thread's id (a UUID), ``runId`` not blank and at most
    ``ID_LIMIT`` characters: checked once the body is a RunAgentInput."""
    if not is_uuid(thread_id):
        raise refuse("must be a UUID (the Threadloom thread id)", at="threadId")
    if not run_id.strip() or len(run_id) > ID_LIMIT:
        raise refuse(f"must be a non-empty string of at most {ID_LIMIT} characters", at="runId")


try:  # the agui extra: its own model says what a RunAgentInput is
    from ag_ui.core import RunAgentInput as _AgUiInput
    from ag_ui.core import Tool as _AgUiTool

    HAVE_AGUI = True
except ImportError:  # pragma: no cover - the route answers 501 without it
    HAVE_AGUI = False

if HAVE_AGUI:

    class FrontendTool(_AgUiTool):
        """A tool of the client's application (spec 13 §13.7): AG-UI's ``Tool`` with the
        rules Threadloom offers it under, stated in the schema (a name providers take,
        parameters that are a JSON Schema object)."""

        model_config = ConfigDict(regex_engine="python-re")

        name: str = Field(pattern=TOOL_NAME)
        parameters: dict[str, Any] | None = None

    class RunAgentInput(_AgUiInput):
        """AG-UI's RunAgentInput (docs/interop.md), with Threadloom's rules of its ids:
        ``threadId`` is the Threadloom thread's id, ``runId`` not blank."""

        # AG-UI's own checks come first, in its words; the ids' rules (their patterns in
        # the schema) once the body is a RunAgentInput, in the spec's words (REFUSED)
        model_config = ConfigDict(
            json_schema_extra=lambda s: s.update(examples=[_AGUI_EXAMPLE]),
            regex_engine="python-re",
        )

        thread_id: str = Field(alias="threadId", json_schema_extra={"pattern": UUID})
        run_id: str = Field(
            alias="runId", json_schema_extra={"maxLength": ID_LIMIT, "pattern": NOT_BLANK}
        )
        tools: list[FrontendTool] | None = None  # type: ignore[assignment]  # (narrower)

        @model_validator(mode="after")
        def _ids(self) -> RunAgentInput:
            _threadloom_ids(self.thread_id, self.run_id)
            return self

else:  # pragma: no cover

    class RunAgentInput(Body):  # type: ignore[no-redef]
        """AG-UI's RunAgentInput (docs/interop.md; install ``threadloom[agui]``)."""

        model_config = examples(_AGUI_EXAMPLE)

        threadId: str = Field(pattern=UUID)
        runId: str = Field(max_length=ID_LIMIT, pattern=NOT_BLANK)
        messages: list[dict[str, Any]]

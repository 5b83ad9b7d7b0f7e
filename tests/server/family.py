"""A parent agent that spawns children through the engine, for the HTTP and stream tests
(spec 06 fixtures, adapted): ``lead`` (ai_human, side a prompt ``lead_prompt``) lists the
relationship ``scouting`` → ``scout`` (dual_ai, exposed as a tool; side a ends the session
with ``report {"summary": …}``).

One scripted model plays both. ``lead``: a customer message → ``subagent_create`` with
``name`` and ``message`` = that text; the create's result → ``started``; a delivered
session result → ``noted: <result>``. ``scout``: its instruction → ``report`` with the
summary ``scouted <instruction>``.
"""

from __future__ import annotations

from conftest import Api
from threadloom import Agent, Side
from threadloom.define import Model, Prompt, SessionBinding, Subagent, tool
from threadloom.providers.scripted import Call, Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

DELIVERED = "Subagent (reference: "


@tool
def report(summary: str) -> str:
    """Report what was found and end the scouting session."""
    return "Reported."


def family_reply(request: ProviderRequest) -> Reply:
    system = request.messages[0].text if request.messages else ""
    last = request.messages[-1]
    if "scout" in system:
        return Reply.tool_calls(Call("report", {"summary": f"scouted {last.text}"}))
    if isinstance(last, ToolMessage):
        return Reply.text("started")
    if last.text.startswith(DELIVERED):
        return Reply.text(f"noted: {last.text}")
    create = {"agent": "scouting", "name": last.text, "message": last.text, "attachments": []}
    return Reply.tool_calls(Call("subagent_create", create))


def add_family(api: Api, *, blocking: bool = False) -> None:
    """Agents ``lead`` and ``scout`` on the running server's definitions."""
    api.runtime.definitions.add(
        report,
        Model(name="family_model", provider=ScriptedProvider(family_reply), model="family"),
        Prompt(
            name="lead_prompt",
            model="family_model",
            system="You are the lead.",
            tools=[
                Subagent(
                    "scout",
                    relationship="scouting",
                    description="Scouts one topic",
                    blocking=blocking,
                )
            ],
        ),
        Prompt(name="scout_a", model="family_model", system="You scout.", tools=["report"]),
        Prompt(name="scout_b", model="family_model", system="You check the scouting."),
        Agent(
            name="lead",
            title="Lead",
            side_a=Side(prompt="lead_prompt", label="Lead"),
            side_b=Side(label="Customer"),
        ),
        Agent(
            name="scout",
            type="dual_ai",
            title="Scout",
            expose_as_tool=True,
            tool_description="Scouts",
            max_session_turns=3,
            side_a=Side(
                prompt="scout_a",
                label="Scout",
                session_stop=SessionBinding(name="report", message_property="summary"),
            ),
            side_b=Side(prompt="scout_b", label="Checker"),
        ),
    )

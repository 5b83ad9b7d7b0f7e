"""The real AG-UI client against a real ``threadloom serve`` (spec 13 §13.2, §13.3, C13-013).

``@ag-ui/client`` (its ``HttpAgent``, which verifies every event against the protocol before
applying it) is installed from the npm registry with ``npm ci`` from the lock file kept
beside this test (``agui_node/``), into a cache folder keyed by the lock file's digest, and
driven by Node.js (``agui_node/run_agui.mjs``) against ``threadloom serve`` on a project
written here, on SQLite and PostgreSQL. Without ``node`` and ``npm`` the tests are skipped
with the reason; under ``CI=true`` that is a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from node_clients import installed, serving
from node_clients import node_run as run_script

HERE = Path(__file__).resolve().parent / "agui_node"

TOKEN = "agui-node-test-admin-token-" + "x" * 16
STORY = "Once upon a time there was a durable thread that never lost a message."


@pytest.fixture(scope="module")
def agui_client() -> tuple[str, Path]:
    """``node`` and a folder with ``@ag-ui/client`` installed (``npm ci`` from the lock
    file, once per lock file) and this checkout's scripts (``node_clients.installed``)."""
    return installed(HERE, "the AG-UI TypeScript client")


def node_run(agui_client: tuple[str, Path], script: str = "run_agui.mjs", **config: Any) -> Any:
    return run_script(agui_client, script, **config)


PROJECT = {
    "models/models.py": f"""
        from threadloom.define import Model
        from threadloom.providers.script import Call
        from threadloom.providers.scripted import Reply, ScriptedProvider

        STORY = {STORY!r}

        def calc(request):
            last = request.messages[-1]
            if last.role == "tool":
                return Reply.text(f"The sum is {{last.text}}.", chunk_size=5)
            return Reply.tool_calls(Call("add", {{"a": 2, "b": 3}}))

        def pay(request):
            if request.messages[-1].role == "tool":
                return Reply.text("done")
            bo, eve = {{"amount": 5, "to": "bo"}}, {{"amount": 700, "to": "eve"}}
            return Reply.tool_calls(Call("pay", bo), Call("pay", eve))

        def desk(request):
            last = request.messages[-1]
            if last.role == "tool" and last.tool_call_id != "call_add":
                return Reply.text(f"The page says: {{last.text}}", chunk_size=8)
            if last.role == "user":
                return Reply.tool_calls(
                    Call("add", {{"a": 2, "b": 3}}, id="call_add"),
                    Call("show_card", {{"title": "Hello"}}, id="call_card"),
                )
            return Reply.text("?")

        def story(request):
            return Reply.reasoning(STORY, "Think first.", chunk_size=4, chunk_delay=0.03)

        calc_model = Model(name="calc_model", provider=ScriptedProvider(calc), model="calc")
        story_model = Model(name="story_model", provider=ScriptedProvider(story), model="story")
        pay_model = Model(name="pay_model", provider=ScriptedProvider(pay), model="pay")
        desk_model = Model(name="desk_model", provider=ScriptedProvider(desk), model="desk")
    """,
    "tools/pay.py": """
        from threadloom.define import tool

        @tool(requires_approval=True)
        def pay(amount: int, to: str) -> str:
            \"\"\"Pay an amount to someone (a person approves each call).\"\"\"
            return f"paid {amount} to {to}"
    """,
    "tools/add.py": """
        from threadloom.define import tool

        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add two integers.\"\"\"
            return a + b
    """,
    "prompts/prompts.py": """
        from threadloom.define import Prompt

        calc_prompt = Prompt(name="calc_prompt", model="calc_model", system="Add.", tools=["add"])
        story_prompt = Prompt(name="story_prompt", model="story_model", system="Tell stories.")
        pay_prompt = Prompt(name="pay_prompt", model="pay_model", system="Pay.", tools=["pay"])
        desk_prompt = Prompt(name="desk_prompt", model="desk_model", system="Help.", tools=["add"])
    """,
    "agents/agents.py": """
        from threadloom import Agent, Side

        calc = Agent(name="calc", side_a=Side(prompt="calc_prompt"), side_b=Side(label="User"))
        story = Agent(name="story", side_a=Side(prompt="story_prompt"), side_b=Side(label="User"))
        payer = Agent(name="payer", side_a=Side(prompt="pay_prompt"), side_b=Side(label="User"))
        desk = Agent(name="desk", side_a=Side(prompt="desk_prompt"), side_b=Side(label="User"))
    """,
}


@pytest.fixture
def served(tmp_path: Path, db_url: str) -> Iterator[str]:
    """``threadloom serve`` on the project above (credentials required: the admin token)."""
    with serving(PROJECT, db_url, TOKEN, tmp_path / "project") as base:
        yield base


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def thread_messages(base: str, thread: str) -> list[dict[str, Any]]:
    got = httpx.get(
        f"{base}/api/threads/{thread}/messages?order=asc",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert got.status_code == 200, got.text
    messages: list[dict[str, Any]] = got.json()["messages"]
    return messages


def test_c13_013_the_ag_ui_client_runs_two_turns_with_a_tool_call(
    agui_client: tuple[str, Path], served: str
) -> None:
    """Event order as the client's verifier accepts it, the tool call and its result, the
    final messages the client holds; the second turn stores only its new message."""
    out = node_run(agui_client, base=served, token=TOKEN, scenario="turns")
    first, second = out["first"], out["second"]
    assert first["error"] is None and second["error"] is None
    for turn in (first, second):
        seen = [t for t in types(turn["events"]) if t != "CUSTOM"]
        assert seen == [  # (all the events, when not: {turn["events"]})
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "MESSAGES_SNAPSHOT",
            "RUN_FINISHED",
        ], turn["events"]
        assert turn["events"][0]["threadId"] == out["threadId"]
        assert turn["events"][-1]["outcome"] == {"type": "success"}
        call = next(e for e in turn["events"] if e["type"] == "TOOL_CALL_START")
        assert call["toolCallName"] == "add"
        result = next(e for e in turn["events"] if e["type"] == "TOOL_CALL_RESULT")
        assert (result["toolCallId"], result["content"]) == (call["toolCallId"], "5")
    roles = [(m["role"], m["content"]) for m in second["messages"]]
    assert roles == [
        ("user", "What is 2 + 3?"),
        ("assistant", None),
        ("tool", "5"),
        ("assistant", "The sum is 5."),
        ("user", "And again?"),
        ("assistant", None),
        ("tool", "5"),
        ("assistant", "The sum is 5."),
    ]
    assert second["messages"][1]["toolCalls"][0]["function"]["name"] == "add"
    stored = thread_messages(served, out["threadId"])
    assert [m["role"] for m in stored] == [m["role"] for m in second["messages"]]
    # one message each: the client's user messages keep their AG-UI ids, the rest are ours
    presented = [(m.get("metadata") or {}).get("agui_message_id", m["id"]) for m in stored]
    assert presented == [m["id"] for m in second["messages"]]


def test_c13_013_an_aborted_run_goes_on_and_the_client_resumes_it(
    agui_client: tuple[str, Path], served: str
) -> None:
    """The client aborts in the middle of the story (its reasoning streamed first); the run
    finishes without it; the same runId with the cursor of the last event it saw brings the
    rest of the story, once."""
    out = node_run(agui_client, base=served, token=TOKEN, scenario="abort")
    first, resumed = out["first"], out["resumed"]
    assert types(first["events"])[0] == "RUN_STARTED"
    assert "RUN_FINISHED" not in types(first["events"])
    # the client ends an aborted run itself: its own RUN_ERROR, not the server's
    assert first["events"][-1] == {
        "type": "RUN_ERROR",
        "code": "abort",
        "message": "This operation was aborted",
        "cursor": None,
    }
    assert all(e["cursor"] for e in first["events"][:-1])
    told = [e["delta"] for e in first["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    # aborted at the third piece (a piece already read may still be applied after it)
    assert len(told) >= 3 and len("".join(told)) < len(STORY)
    assert resumed["error"] is None
    assert resumed["events"][0]["runId"] == out["runId"]
    assert types(resumed["events"])[-1] == "RUN_FINISHED"
    rest = [e["delta"] for e in resumed["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(told + rest) == STORY
    final = [(m["role"], m["content"]) for m in resumed["messages"]]
    assert final == [
        ("user", "Tell me a story"),
        ("reasoning", "Think first."),  # a message of its own, as it streamed
        ("assistant", STORY),
    ]
    stored = thread_messages(served, out["threadId"])
    assert [(m["role"], m["content"], m["reasoning_content"]) for m in stored] == [
        ("user", "Tell me a story", None),
        ("assistant", STORY, "Think first."),
    ]


def test_c13_011_the_client_without_credentials_is_refused(
    agui_client: tuple[str, Path], served: str
) -> None:
    out = node_run(agui_client, base=served, token=None, scenario="anonymous")
    assert out["events"] == []
    assert "401" in (out["error"] or ""), out["error"]


def test_c14_045_the_ag_ui_client_answers_the_approval_interrupts(
    agui_client: tuple[str, Path], served: str
) -> None:
    """C14-045 (spec 14 §14.8.3): the real client accepts the interrupt outcome of a run
    parked on two calls (its verifier on) and holds them as its pending interrupts; its next
    run, whose ``resume`` approves one (with the argumentsHash shown) and cancels the other,
    follows the run to success: a result for each call, the approved one ``paid 5 to bo``;
    no interrupt is left pending."""
    out = node_run(agui_client, base=served, token=TOKEN, scenario="approval")
    first, second = out["first"], out["second"]
    assert first["error"] is None and second["error"] is None, out
    outcome = first["events"][-1]["outcome"]
    assert outcome["type"] == "interrupt" and len(outcome["interrupts"]) == 2
    assert sorted(out["pending"]) == sorted(i["id"] for i in out["interrupts"])
    assert all(i["reason"] == "tool_call" for i in out["interrupts"])
    assert "TOOL_CALL_RESULT" not in types(first["events"])
    assert second["events"][-1]["outcome"] == {"type": "success"}
    results = {
        e["toolCallId"]: e["content"] for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"
    }
    bo = next(i["id"] for i in out["interrupts"] if i["metadata"]["arguments"]["to"] == "bo")
    assert results[bo] == "paid 5 to bo" and len(results) == 2
    assert out["left"] == 0


def test_c13_066_the_ag_ui_client_answers_a_frontend_tool_call(
    agui_client: tuple[str, Path], served: str
) -> None:
    """C13-066 (spec 13 §13.7): the real client offers ``show_card`` with its run; run 1
    calls ``add`` (run by the server, its result sent) and ``show_card`` (announced, no
    result) and finishes ``success`` naming the card's call pending; the application answers
    it and run 2 carries the ``tool`` message: the model's answer quotes it, the client and
    the thread hold the same messages, the result under the client's own id. Every event
    passes the client's verifier and ``@ag-ui/core``'s ``EventSchema``."""
    out = node_run(agui_client, "frontend_tools.mjs", base=served, token=TOKEN)
    first, second = out["first"], out["second"]
    for turn in (first, second):
        assert turn["error"] is None and turn["invalid"] == [], turn
    seen = [(e["type"], e.get("toolCallName")) for e in first["events"] if e["type"] != "CUSTOM"]
    assert seen == [
        ("RUN_STARTED", None),
        ("TOOL_CALL_START", "add"),
        ("TOOL_CALL_ARGS", None),
        ("TOOL_CALL_END", None),
        ("TOOL_CALL_START", "show_card"),
        ("TOOL_CALL_ARGS", None),
        ("TOOL_CALL_END", None),
        ("TOOL_CALL_RESULT", None),
        ("MESSAGES_SNAPSHOT", None),
        ("RUN_FINISHED", None),
    ], first["events"]
    result = next(e for e in first["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert (result["toolCallId"], result["content"]) == ("call_add", "5")
    # the server sends no pendingToolCallIds (§13.7.3): the client derives them from the
    # calls announced without a result
    assert first["events"][-1]["outcome"] == {"type": "success"}
    assert first["pending"] == ["call_card"]
    assert out["answered"] == [
        {"id": out["answered"][0]["id"], "toolCallId": "call_card", "content": "card shown: Hello"}
    ]
    seen2 = [e["type"] for e in second["events"] if e["type"] != "CUSTOM"]
    assert seen2[0] == "RUN_STARTED" and seen2[-2:] == ["MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert "TOOL_CALL_RESULT" not in seen2  # the client's own result is not sent back
    text = "".join(e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "The page says: card shown: Hello"
    assert second["events"][-1]["outcome"] == {"type": "success"}
    final = [(m["role"], m["toolCallId"], m["content"]) for m in second["messages"]]
    assert final == [
        ("user", None, "Show me a card"),
        ("assistant", None, None),
        ("tool", "call_add", "5"),
        ("tool", "call_card", "card shown: Hello"),
        ("assistant", None, "The page says: card shown: Hello"),
    ]
    assert [c["name"] for c in second["messages"][1]["toolCalls"]] == ["add", "show_card"]
    snapshot = next(e for e in second["events"] if e["type"] == "MESSAGES_SNAPSHOT")
    assert [m["id"] for m in snapshot["messages"]] == [m["id"] for m in second["messages"]]
    stored = thread_messages(served, out["threadId"])
    assert [(m["role"], m["tool_call_id"]) for m in stored] == [
        (role, call) for role, call, _ in final
    ]
    card = stored[3]
    assert card["name"] == "show_card" and card["tool_status"] == "success"
    assert card["metadata"]["agui_message_id"] == out["answered"][0]["id"]
    print(
        "frontend-tool round trip:", json.dumps({"run1": first["events"], "run2": second["events"]})
    )

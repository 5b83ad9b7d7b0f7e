"""CopilotKit's runtime with ``threadloom serve`` as its AG-UI agent (spec 13 §13.2, C13-05x).

``@copilotkit/runtime`` (the newest 1.x, with the ``@ag-ui/client`` it bundles) is installed
from the lock file kept beside this test (``copilotkit_node/``) into a cache folder keyed
by the lock file's digest (``node_clients.installed``), and driven headless by Node.js
(``copilotkit_node/run_copilotkit.mjs``: the runtime's own fetch handler, called in-process
with the requests CopilotKit's front end sends) against a real ``threadloom serve`` on
SQLite and PostgreSQL. Every event the runtime answers with is checked with the bundled
protocol's schemas and ``verifyEvents``. Without ``node`` and ``npm`` the tests are skipped
with the reason; under ``CI=true`` that is a failure.

Other scenarios (frontend tools, shared state) go in the script's ``SCENARIOS`` and a test
here; ``copilotkit(…)`` runs one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agui_events import check_events, parse_sse
from node_clients import installed, serving
from test_c13_agui_node import agui_client

HERE = Path(__file__).resolve().parent / "copilotkit_node"
__all__ = ["agui_client"]  # the fixture of @ag-ui/client 1.0 (C13-058)

AGUI_NODE = Path(__file__).resolve().parent / "agui_node"
TOKEN = "copilotkit-test-admin-token-" + "x" * 16
AGENTS = ["calc", "writer_critic", "slow", "desk"]
STOP_GRACE_S = "0.5"
"""The server's grace after a dropped AG-UI response before it stops the run (§13.2.8)."""


@pytest.fixture(scope="module")
def copilotkit_runtime() -> tuple[str, Path]:
    """``node`` and a folder with ``@copilotkit/runtime`` installed from the lock file
    (``node_clients.installed``: ``npm ci`` once per lock file, into a cache folder keyed
    by its digest; the scripts copied on every call)."""
    return installed(HERE, "the CopilotKit runtime tests")


def copilotkit(runtime: tuple[str, Path], **config: Any) -> Any:
    """One scenario of ``run_copilotkit.mjs``: its JSON output."""
    node, folder = runtime
    config.setdefault("agents", AGENTS)
    done = subprocess.run(
        [node, "run_copilotkit.mjs", json.dumps(config)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"node failed:\n{done.stdout}\n{done.stderr}"
    print(f"--- copilotkit {config['scenario']} ---\n{done.stdout}\n{done.stderr}")  # with -s
    return json.loads(done.stdout)


PROJECT = {
    "models/models.py": """
        from threadloom.define import Model
        from threadloom.providers.script import Call
        from threadloom.providers.scripted import Reply, ScriptedProvider

        LONG = "tick " * 4000

        def calc(request):
            last = request.messages[-1]
            if last.role == "tool":
                return Reply.text(f"The sum is {last.text}.", chunk_size=5)
            return Reply.tool_calls(Call("add", {"a": 2, "b": 3}))

        def writer(request):
            drafts = sum(1 for m in request.messages if m.role == "assistant")
            return Reply.text(f"Draft {drafts + 1}.", chunk_size=4)

        def critic(request):
            if sum(1 for m in request.messages[2:] if m.role == "assistant") >= 1:
                return Reply.tool_calls(Call("approve", {"verdict": "Good."}))
            return Reply.text("Add one example.", chunk_size=4)

        def desk(request):
            # asked for a card: the server's add and the front end's show_card at once
            last = request.messages[-1]
            if last.role == "tool" and last.tool_call_id == "call_card":
                return Reply.text(f"The page says: {last.text}", chunk_size=8)
            if last.role == "user":
                return Reply.tool_calls(
                    Call("add", {"a": 2, "b": 3}, id="call_add"),
                    Call("show_card", {"title": "Hello"}, id="call_card"),
                )
            return Reply.text("?")

        def slow(request):
            # a long answer in small pieces: a run that is still streaming when it is stopped
            return Reply.text(LONG, chunk_size=5, chunk_delay=0.02)

        calc_model = Model(name="calc_model", provider=ScriptedProvider(calc), model="calc")
        writer_model = Model(name="writer_model", provider=ScriptedProvider(writer), model="w")
        critic_model = Model(name="critic_model", provider=ScriptedProvider(critic), model="c")
        slow_model = Model(name="slow_model", provider=ScriptedProvider(slow), model="slow")
        desk_model = Model(name="desk_model", provider=ScriptedProvider(desk), model="desk")
    """,
    "tools/tools.py": """
        from threadloom.define import tool

        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add two integers.\"\"\"
            return a + b

        @tool
        def approve(verdict: str) -> str:
            \"\"\"Approve the draft.\"\"\"
            return verdict
    """,
    "prompts/prompts.py": """
        from threadloom.define import Prompt

        calc_prompt = Prompt(name="calc_prompt", model="calc_model", system="Add.", tools=["add"])
        writer_prompt = Prompt(name="writer_prompt", model="writer_model", system="Write.")
        critic_prompt = Prompt(
            name="critic_prompt", model="critic_model", system="Criticise.", tools=["approve"]
        )
        slow_prompt = Prompt(name="slow_prompt", model="slow_model", system="Talk.")
        desk_prompt = Prompt(name="desk_prompt", model="desk_model", system="Help.", tools=["add"])
    """,
    "agents/agents.py": """
        from threadloom import Agent, SessionBinding, Side

        calc = Agent(name="calc", side_a=Side(prompt="calc_prompt"), side_b=Side(label="User"))
        slow = Agent(name="slow", side_a=Side(prompt="slow_prompt"), side_b=Side(label="User"))
        desk = Agent(name="desk", side_a=Side(prompt="desk_prompt"), side_b=Side(label="User"))
        writer_critic = Agent(
            name="writer_critic",
            type="dual_ai",
            side_a=Side(prompt="writer_prompt", label="Writer"),
            side_b=Side(
                prompt="critic_prompt",
                label="Critic",
                session_stop=SessionBinding(name="approve", message_property="verdict"),
            ),
            max_session_turns=4,
        )
    """,
}


@pytest.fixture
def served(tmp_path: Path, db_url: str) -> Iterator[str]:
    """``threadloom serve`` on the project above (credentials required: the admin token)."""
    project = tmp_path / "project"
    grace = {"THREADLOOM_AGUI_STOP_GRACE_S": STOP_GRACE_S}
    with serving(PROJECT, db_url, TOKEN, project, stop_timeout=120, **grace) as base:
        yield base


def api(base: str, path: str) -> Any:
    got = httpx.get(f"{base}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert got.status_code == 200, got.text
    return got.json()


def types(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"] if e["type"] != "CUSTOM"]


def test_c13_050_copilotkit_runs_a_tool_turn(
    copilotkit_runtime: tuple[str, Path], served: str
) -> None:
    """C13-050: CopilotKit's runtime (its bundled AG-UI client, schemas and verifier)
    relays a `calc` turn: the call announced before its result, the answer, the snapshot,
    RUN_FINISHED success; nothing refused."""
    out = copilotkit(copilotkit_runtime, base=served, token=TOKEN, scenario="tool")
    run = out["run"]
    assert run["problems"] == [], run
    assert types(run) == [
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
    ], run["events"]
    assert run["events"][-1]["outcome"] == {"type": "success"}


def test_c13_051_copilotkit_runs_a_dual_ai_agent(
    copilotkit_runtime: tuple[str, Path], served: str
) -> None:
    """C13-051: a dual_ai agent's turn through CopilotKit's runtime: both sides' messages
    are assistant messages told apart by their names (the sides' labels); side b's tool
    call is announced by its assistant message before its result; every event passes the
    bundled schemas and verifier; the snapshot's tool message's call is carried by an
    assistant message."""
    out = copilotkit(copilotkit_runtime, base=served, token=TOKEN, scenario="dual")
    run = out["run"]
    assert run["problems"] == [], run
    events = [e for e in run["events"] if e["type"] != "CUSTOM"]
    starts = [(e["role"], e.get("name")) for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert starts == [
        ("assistant", "Writer"),
        ("assistant", "Critic"),
        ("assistant", "Writer"),
    ], events
    call = next(e for e in events if e["type"] == "TOOL_CALL_START")
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert events.index(call) < events.index(result)
    assert (call["toolCallName"], result["toolCallId"]) == ("approve", call["toolCallId"])
    snapshot = next(e for e in events if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert [(m["role"], m["name"], m["content"], m["toolCalls"]) for m in snapshot] == [
        ("user", None, "Write about durable threads.", []),
        ("assistant", "Writer", "Draft 1.", []),
        ("assistant", "Critic", "Add one example.", []),
        ("assistant", "Writer", "Draft 2.", []),
        ("assistant", "Critic", None, ["approve"]),
        ("tool", None, "Good.", []),
    ]
    assert call["parentMessageId"] == snapshot[4]["id"]
    assert events[-1]["type"] == "RUN_FINISHED"


def settled(base: str, thread: str) -> dict[str, Any]:
    """The thread's status once it left ``running`` (the stop is asynchronous to the
    client: read until it settles, at most 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        status: dict[str, Any] = api(base, f"/api/threads/{thread}")["status"]
        if status["state"] != "running" or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def model_requests(base: str, thread: str) -> int:
    total: int = api(base, f"/api/threads/{thread}/logs?kind=llm")["total"]
    return total


def test_c13_054_a_run_stopped_on_the_server_ends_as_copilotkit_accepts(
    copilotkit_runtime: tuple[str, Path], served: str
) -> None:
    """C13-054: a run CopilotKit's runtime relays (its client before AG-UI 1.0 sends no
    ``protocolVersion``) stopped with ``POST …/stop`` → RUN_FINISHED without an outcome,
    ``result.threadloom`` = cancelled with the reason; the bundled schemas and verifier
    accept every event (a ``cancelled`` outcome was a ZodError there)."""
    out = copilotkit(copilotkit_runtime, base=served, token=TOKEN, scenario="server_stop")
    run = out["run"]
    assert out["stop"]["status"] == 200, out["stop"]
    assert run["problems"] == [], run
    last = run["events"][-1]
    assert last["type"] == "RUN_FINISHED", run["events"][-3:]
    assert "outcome" not in last
    assert last["result"] == {"threadloom": {"outcome": "cancelled", "reason": "aborted_by_user"}}
    assert settled(served, out["threadId"])["reason"] == "aborted_by_user"


def test_c13_055_copilotkit_stop_stops_the_run(
    copilotkit_runtime: tuple[str, Path], served: str
) -> None:
    """C13-055: CopilotKit's Stop (its runtime aborts the agent's request: the server sees
    the response dropped) on a run that is streaming → after the grace period the thread
    settles idle ``aborted_by_user``; its one model request stays the only one; the
    message is stored as far as it got."""
    out = copilotkit(copilotkit_runtime, base=served, token=TOKEN, scenario="stop")
    assert out["stop"]["body"]["stopped"] is True, out["stop"]
    assert out["run"]["events"][-1]["type"] == "RUN_ERROR"  # the runtime's own, on abort
    thread = out["threadId"]
    status = settled(served, thread)
    assert (status["state"], status["reason"]) == ("idle", "aborted_by_user"), status
    assert model_requests(served, thread) == 1
    messages = api(served, f"/api/threads/{thread}/messages?order=asc")["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "system"]
    assert 0 < len(messages[1]["content"] or "") < len("tick " * 4000)
    assert "stopped by user" in messages[2]["content"]
    assert model_requests(served, thread) == 1  # read again after the messages: no more


def test_c13_058_the_ag_ui_client_1_0_runs_a_dual_ai_agent(
    agui_client: tuple[str, Path], served: str
) -> None:
    """C13-058: ``@ag-ui/client`` 1.0's HttpAgent (its verifier on, every event also
    checked with 1.0's ``EventSchemas``) accepts a dual_ai turn; the messages it holds are
    the snapshot's: both sides as assistant messages named after their labels, side b's
    call on its message, the result after it."""
    node, folder = agui_client
    shutil.copy(AGUI_NODE / "run_dual.mjs", folder / "run_dual.mjs")
    config = {"base": served, "token": TOKEN, "text": "Write about durable threads."}
    done = subprocess.run(
        [node, "run_dual.mjs", json.dumps(config)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"node failed:\n{done.stdout}\n{done.stderr}"
    out = json.loads(done.stdout)
    assert out["error"] is None and out["problems"] == [], out
    held = [(m["role"], m["name"], m["content"], m["toolCalls"]) for m in out["messages"]]
    assert held == [
        ("user", None, "Write about durable threads.", []),
        ("assistant", "Writer", "Draft 1.", []),
        ("assistant", "Critic", "Add one example.", []),
        ("assistant", "Writer", "Draft 2.", []),
        ("assistant", "Critic", None, ["approve"]),
        ("tool", None, "Good.", []),
    ]


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def served_examples(db_url: str) -> Iterator[str]:
    """``threadloom serve examples/`` (its offline demo model; the admin token required)."""
    with serving(EXAMPLES, db_url, TOKEN, stop_timeout=120) as base:
        yield base


@pytest.mark.parametrize(
    ("agent", "text", "sides"),
    [
        ("writer_critic", "Write about durable threads.", ("Writer", "Critic")),
        (
            "warranty_research",
            "Research the warranty for order A-1001.",
            ("Researcher", "Reviewer"),
        ),
    ],
)
def test_c13_051_copilotkit_runs_the_example_dual_ai_agents(
    copilotkit_runtime: tuple[str, Path],
    served_examples: str,
    agent: str,
    text: str,
    sides: tuple[str, str],
) -> None:
    """C13-051 on the examples the issue names (``POST /api/agui/writer_critic`` and
    ``warranty_research``): every event accepted by CopilotKit's bundled client; both
    sides' messages are named assistant messages; each tool result follows its call's
    announcement; the run finishes."""
    out = copilotkit(
        copilotkit_runtime,
        base=served_examples,
        token=TOKEN,
        scenario="dual",
        agent=agent,
        text=text,
        agents=[agent],
    )
    run = out["run"]
    assert run["problems"] == [], run
    events = [e for e in run["events"] if e["type"] != "CUSTOM"]
    names = {e.get("name") for e in events if e["type"] == "TEXT_MESSAGE_START"}
    assert names == set(sides), events
    announced = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    results = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results and all(r in announced for r in results)
    snapshot = next(e for e in events if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert {m["role"] for m in snapshot} <= {"user", "assistant", "reasoning", "tool"}
    assert {m["name"] for m in snapshot if m["role"] == "assistant"} == set(sides)
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}


def post_run(base: str, agent: str, body: dict[str, Any], **headers: str) -> list[dict[str, Any]]:
    """One AG-UI response read whole, checked with ``ag_ui.core``'s models and the sequence
    rules (``agui_events.py``)."""
    got = httpx.post(
        f"{base}/api/agui/{agent}",
        json=body,
        headers={"Authorization": f"Bearer {TOKEN}", **headers},
        timeout=60,
    )
    assert got.status_code == 200, got.text
    return check_events(parse_sse(got.text))


def body_of(thread: str, text: str, **more: Any) -> dict[str, Any]:
    message = {"id": str(uuid.uuid4()), "role": "user", "content": text}
    return {
        "threadId": thread,
        "runId": str(uuid.uuid4()),
        "messages": [message],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **more,
    }


def verify_in_node(runtime: tuple[str, Path], responses: list[dict[str, Any]], tmp: Path) -> Any:
    node, folder = runtime
    shutil.copy(AGUI_NODE / "verify_sse.mjs", folder / "verify_sse.mjs")
    data = tmp / f"responses-{folder.name}.json"
    data.write_text(json.dumps(responses))
    done = subprocess.run(
        [node, "verify_sse.mjs", str(data)], cwd=folder, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"node failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def test_c13_052_c13_054_the_server_s_streams_pass_both_typescript_versions(
    agui_client: tuple[str, Path],
    copilotkit_runtime: tuple[str, Path],
    served: str,
    tmp_path: Path,
) -> None:
    """C13-052, C13-054: the raw responses of ``POST /api/agui/…`` — a tool turn, a dual_ai
    turn, a run stopped on the server with and without ``protocolVersion`` 1.0 — each
    event parsed with ``@ag-ui/core``'s ``EventSchemas`` and each response with
    ``@ag-ui/client``'s ``verifyEvents``, in 1.0.0 and in the 0.0.59 CopilotKit bundles:
    nothing refused but the ``cancelled`` outcome by 0.0.59 (which a client of 1.0 asks
    for with its ``protocolVersion``)."""
    responses = [
        {"name": "tool", "events": post_run(served, "calc", body_of(str(uuid.uuid4()), "2+3?"))},
        {
            "name": "dual",
            "events": post_run(served, "writer_critic", body_of(str(uuid.uuid4()), "Write.")),
        },
    ]
    for name, more in (("stopped-0.x", {}), ("stopped-1.0", {"protocolVersion": "1.0"})):
        thread = str(uuid.uuid4())
        events: list[dict[str, Any]] = []
        with httpx.stream(
            "POST",
            f"{served}/api/agui/slow",
            json=body_of(thread, "Go on.", **more),
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=60,
        ) as streaming:
            buffer, stopped = "", False
            for chunk in streaming.iter_text():
                buffer += chunk
                if not stopped and "TEXT_MESSAGE_CONTENT" in buffer:
                    stop = httpx.post(
                        f"{served}/api/threads/{thread}/stop",
                        json={},
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    )
                    assert stop.status_code == 200, stop.text
                    stopped = True
        events = check_events(parse_sse(buffer))
        assert events[-1]["type"] == "RUN_FINISHED", events[-3:]
        responses.append({"name": name, "events": events})
    new = verify_in_node(agui_client, responses, tmp_path)
    assert new["version"] == "1.0.0"
    assert new["problems"] == {r["name"]: [] for r in responses}, new
    old = verify_in_node(copilotkit_runtime, responses, tmp_path)
    assert old["version"] == "0.0.59"
    refused = {name: found for name, found in old["problems"].items() if found}
    assert list(refused) == ["stopped-1.0"], old  # only the 1.0 client's outcome
    assert "invalid_union_discriminator" in refused["stopped-1.0"][0]


def test_c13_067_copilotkit_relays_a_frontend_tool_round_trip(
    copilotkit_runtime: tuple[str, Path], served: str
) -> None:
    """C13-067 (spec 13 §13.7): through CopilotKit's runtime, a front end offering
    ``show_card`` (as ``useFrontendTool`` does): run 1 announces both calls, sends ``add``'s
    result only and finishes success with the card's call pending; the front end runs it
    and sends run 2 with its history (the assistant message with the calls and no text, both
    results): the model answers with the card's result, the snapshot keeps it; every event
    passes the bundled schemas and ``verifyEvents``; the thread stores the result once."""
    out = copilotkit(copilotkit_runtime, base=served, token=TOKEN, scenario="frontend")
    first, second = out["first"], out["second"]
    assert first["problems"] == [] and second["problems"] == [], out
    assert [
        (t, e.get("toolCallName"))
        for t, e in ((e["type"], e) for e in first["events"])
        if t != "CUSTOM"
    ] == [
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
    assert out["pending"] == ["call_card"]
    assert [(m["toolCallId"], m["content"]) for m in out["answered"]] == [
        ("call_card", "card shown: Hello")
    ]
    kinds = [t for t in types(second) if t != "TEXT_MESSAGE_CONTENT"]  # (pieces as streamed)
    assert kinds == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_END",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ], second["events"]
    text = "".join(e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "The page says: card shown: Hello"
    snapshot = next(e for e in second["events"] if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert [(m["role"], m["toolCallId"], m["toolCalls"]) for m in snapshot] == [
        ("user", None, []),
        ("assistant", None, ["add", "show_card"]),
        ("tool", "call_add", []),
        ("tool", "call_card", []),
        ("assistant", None, []),
    ]
    assert snapshot[3]["id"] == out["answered"][0]["id"]
    stored = api(served, f"/api/threads/{out['threadId']}/messages?order=asc")["messages"]
    assert [(m["role"], m["tool_call_id"]) for m in stored] == [
        (m["role"], m["toolCallId"]) for m in snapshot
    ]


def test_c13_067_copilotkit_front_end_runs_the_frontend_tool(
    copilotkit_runtime: tuple[str, Path], served: str
) -> None:
    """C13-067 with CopilotKit's own front end logic (``@copilotkit/core``'s CopilotKitCore,
    what ``useFrontendTool`` registers into) talking HTTP to the runtime: one ``runAgent``
    — the core offers ``show_card``, runs its handler when the model calls it and sends the
    follow-up run with the result by itself; the model's answer quotes it, every event
    passes ``@ag-ui/core``'s schemas, and the thread stores what the front end holds."""
    node, folder = copilotkit_runtime
    done = subprocess.run(
        [node, "frontend_core.mjs", json.dumps({"base": served, "token": TOKEN})],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"node failed:\n{done.stdout}\n{done.stderr}"
    print(f"--- copilotkit core frontend ---\n{done.stdout}\n{done.stderr}")  # with -s
    out = json.loads(done.stdout)
    assert out["error"] is None and out["errors"] == [] and out["problems"] == [], out
    assert out["handled"] == ["Hello"]
    assert [(e["phase"], e["toolName"]) for e in out["executions"]] == [
        ("start", "show_card"),
        ("end", "show_card"),
    ]
    assert out["executions"][1]["result"] == "card shown: Hello"
    finished = [e for e in out["events"] if e["type"] == "RUN_FINISHED"]
    assert [e["outcome"] for e in finished] == [{"type": "success"}, {"type": "success"}]
    text = "".join(e["delta"] for e in out["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "The page says: card shown: Hello"
    held = [(m["role"], m["toolCallId"], m["toolCalls"]) for m in out["messages"]]
    assert held == [
        ("user", None, []),
        ("assistant", None, ["add", "show_card"]),
        ("tool", "call_add", []),
        ("tool", "call_card", []),
        ("assistant", None, []),
    ]
    stored = api(served, f"/api/threads/{out['threadId']}/messages?order=asc")["messages"]
    assert [(m["role"], m["tool_call_id"]) for m in stored] == [(r, c) for r, c, _ in held]

"""Child process for the crash tests of ``test_c04_control.py`` (spec 04 §4.20.5, §4.24).

Usage: ``python crash_child.py <sqlite url> <scenario> [content ...]``.

The child opens a Runtime on the test's SQLite file with definitions built in code (the
same names as ``tests/engine/conftest.py``: model ``M``, prompt ``P``, agent ``chat``,
tools ``echo`` and ``slow``), drives one thread into the state the scenario names, prints
one line ``READY <json>`` and then waits to be killed (SIGKILL, by the test). The
``drain`` scenario instead shuts down gracefully and prints ``RESULT <json>`` before it
exits on its own. Every wait is bounded so that an orphaned child never lives long.

Scenarios:

- ``delayed`` — send "first"; the scripted response is delayed 60 s; READY once the model
  request is in flight (pending message and LLM log row committed); then each extra
  argument is sent (queued behind the active run).
- ``streaming`` — like ``delayed`` but the response streams one chunk ("partial ") and
  then stalls; READY once that chunk was published.
- ``tool`` — send "go"; the model calls ``echo`` (stored), then ``slow`` (sleeps 60 s);
  READY once ``slow`` started.
- ``stopped`` — send "Hello" (answered "Hi"), stop the idle thread, then a child thread
  created with ``parent=`` calls ``notify_parent`` (a queue entry with ``queue_source``
  ``"subagent"``); READY.
- ``subagent`` — the chat prompt lists the ``worker`` relationship (a ``dual_ai`` agent,
  prompts ``WA``/``WB``); send "go"; the parent's model calls ``subagent_create`` (non-
  blocking) and answers "started"; the worker's first request is delayed 60 s. READY with
  the child id once that request is in flight and the parent is idle. With the argument
  ``blocking`` the relationship is blocking: READY once the worker's request is in flight
  (the parent's run still waits in its ``subagent_create`` call).
- ``turns`` — two whole turns (each: a user message, an ``echo`` call, its result, the
  final text) completed, then "third" sent with its response delayed 60 s; READY with
  the ids of every message once that request is in flight.
- ``drain`` — send "first" (delayed 60 s), then "queued" while running;
  ``Runtime.close(drain=0)``; RESULT with the status frames observed and the number of
  model requests made, 0.3 s after the close.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, Subagent, tool
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider

TOOL_STARTED: list[str] = []


@tool
def echo(v: Any = None) -> str:
    """Echo the value back."""
    return f"echo {v}"


@tool
async def slow() -> str:
    """Take a long time."""
    TOOL_STARTED.append("slow")
    await asyncio.sleep(60)
    return "slow done"


def definitions(
    provider: ScriptedProvider, *, subagents: bool = False, blocking: bool = False
) -> Definitions:
    tools: list[Any] = ["echo", "slow"]
    if subagents:
        tools.append(Subagent("worker", blocking=blocking))
    return Definitions().add(
        Model(name="M", provider=provider, model="scripted-1"),
        Prompt(name="P", model="M", system="You are P.", tools=tools),
        Agent(
            name="chat",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="Customer"),
        ),
        Prompt(name="WA", model="M", system="You are the worker."),
        Prompt(name="WB", model="M", system="You review the worker."),
        Agent(
            name="worker",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Works on one task",
            side_a=Side(prompt="WA"),
            side_b=Side(prompt="WB"),
        ),
        echo,
        slow,
    )


def subagent_script() -> Any:
    """The parent creates a worker and answers; the worker's request never finishes."""
    parent = [
        Reply.tool_calls(
            Call(
                "subagent_create",
                {"agent": "worker", "name": "W1", "message": "do it", "attachments": []},
                id="call_create",
            )
        ),
        Reply.text("started"),
    ]

    def reply(request: Any) -> Reply:
        if "worker" in request.messages[0].text:
            return Reply.text("never", delay=60)
        return parent.pop(0) if parent else Reply.text("ok")

    return reply


async def until(predicate: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


def emit(tag: str, data: dict[str, Any]) -> None:
    sys.stdout.write(f"{tag} {json.dumps(data)}\n")
    sys.stdout.flush()


async def main(url: str, scenario: str, extra: list[str]) -> None:
    scripts: dict[str, Any] = {
        "delayed": [Reply.text("never", delay=60)],
        "streaming": [Reply.text("partial answer", chunks=["partial ", "answer"], chunk_delay=60)],
        "tool": [
            Reply.tool_calls(Call("echo", {"v": 1}, id="call_echo")),
            Reply.tool_calls(Call("slow", {}, id="call_slow")),
        ],
        "stopped": [Reply.text("Hi")],
        "drain": [Reply.text("never", delay=60)],
        "turns": [
            Reply.tool_calls(Call("echo", {"v": 1}, id="call_t1")),
            Reply.text("one"),
            Reply.tool_calls(Call("echo", {"v": 2}, id="call_t2")),
            Reply.text("two"),
            Reply.text("never", delay=60),
        ],
        "subagent": subagent_script(),
    }
    provider = ScriptedProvider(scripts[scenario])
    defs = definitions(provider, subagents=scenario == "subagent", blocking="blocking" in extra)
    rt = await Runtime.open(url, definitions=defs)
    state = await rt.create_thread("chat")
    tid = state.thread_id
    info: dict[str, Any] = {"thread_id": tid}
    statuses = rt.events.subscribe(tid, kinds=["status"])
    if scenario in ("delayed", "streaming", "drain"):
        chunks = rt.events.subscribe(tid, kinds=["message_chunk"])
        info["first_id"] = (await rt.send_message(tid, "first")).id
        await until(lambda: len(provider.requests) == 1)
        if scenario == "streaming":
            await chunks.get(timeout=10)
        if scenario == "drain":
            info["queued_id"] = (await rt.send_message(tid, "queued")).id
            await rt.close(drain=0)
            await asyncio.sleep(0.3)
            info["statuses"] = [dict(e.data["status"]) for e in statuses.drain()]
            info["requests"] = len(provider.requests)
            info["running"] = rt.running(tid)
            emit("RESULT", info)
            return
        info["queued_ids"] = [(await rt.send_message(tid, text)).id for text in extra]
    elif scenario == "turns":
        for text in ("first", "second"):
            await rt.send_message(tid, text)
            await rt.wait_idle(tid, timeout=10)
        page = await state.get_messages(order="asc", limit=None)
        info["completed"] = [m.id for m in page.messages]
        await rt.send_message(tid, "third")
        await until(lambda: len(provider.requests) == 5)
    elif scenario == "tool":
        info["first_id"] = (await rt.send_message(tid, "go")).id
        await until(lambda: bool(TOOL_STARTED))
    elif scenario == "stopped":
        info["first_id"] = (await rt.send_message(tid, "Hello")).id
        await rt.wait_idle(tid, timeout=10)
        await rt.stop(tid)
        child = await rt.create_thread("chat", parent=tid)
        await child.notify_parent("child says hi")
        info["child_id"] = child.thread_id
        info["entries"] = [e.id for e in await rt.store.list_queue(tid)]
    elif scenario == "subagent":
        await rt.send_message(tid, "go")
        await until(lambda: any("worker" in r.messages[0].text for r in provider.requests))
        if "blocking" not in extra:
            await rt.wait_idle(tid, timeout=10)
        (entry,) = await rt.store.get_registry(tid)
        info["child_id"] = entry.reference
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    emit("READY", info)
    await asyncio.sleep(60)  # killed by the test long before


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))

"""Child process of the crash matrix of ``test_c16_resume.py`` (spec 16).

Usage: ``python resume_child.py <store url> <effects file> <scenario> <max_resumes>
<on_lost> [thread id]``.

The child opens a Runtime on the test's store with :func:`definitions` (agent ``chat`` with
``on_lost="resume"``; the test's restarted runtime uses the same definitions), drives one
thread into the state the scenario names, prints one line ``READY <json>`` and waits to be
killed with SIGKILL. In the child the tools called with ``wait`` and the hook that holds a
step after a tool result block (for 60 s); in the test process they do not.

Scenarios:

- ``model`` — send "go"; the model's answer is delayed: READY once the request is in flight.
- ``tool`` — the model calls ``charge`` twice in one response: amount 1 (returns at once)
  and amount 2 with ``wait``: READY once the first result is stored and the second started.
- ``idempotent`` — the model calls ``fetch`` (idempotent) with ``wait``: READY once it
  started.
- ``between`` — the model calls ``charge`` (amount 3, returns); READY once the next step
  holds in its ``prefilter_llm_history`` hook, before its model request.
- ``parked`` — the model calls ``pay`` (needs approval): READY once the run parked (status
  ``idle``/``awaiting_approval``).
- ``parked_running`` — one response calls ``charge`` (amount 4, ``wait``) and ``pay``:
  ``pay`` is parked and ``charge`` runs: READY once it started.
- ``recover`` — create nothing: the runtime's start-up recovery resumes the thread's lost
  run, whose model request is delayed: READY once it is in flight.
- ``again`` — send "again" to the thread given; the answer is delayed: READY once the
  request is in flight.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from threadloom import Agent, Definitions, Runtime, Side, hook
from threadloom.define import Model, Prompt, tool
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider

BLOCK: dict[str, bool] = {"on": False}
"""Set in the child: tools called with ``wait`` and the ``hold`` hook block."""
EFFECTS: dict[str, Path] = {}
"""The file each tool appends one line to when it runs (set per test and in the child)."""
HELD: list[str] = []


def _effect(line: str) -> None:
    path = EFFECTS.get("file")
    if path is not None:
        with path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


async def _block(wait: bool) -> None:
    if wait and BLOCK["on"]:
        await asyncio.sleep(60)


@tool
async def charge(amount: int, wait: bool = False) -> str:
    """Charge an amount (a side effect that must not happen twice)."""
    _effect(f"charge {amount}")
    await _block(wait)
    return f"charged {amount}"


@tool(idempotent=True)
async def fetch(q: str, wait: bool = False) -> str:
    """Fetch something (safe to run again)."""
    _effect(f"fetch {q}")
    await _block(wait)
    return f"fetched {q}"


@tool(requires_approval=True)
async def pay(amount: int, to: str) -> str:
    """Pay someone (a person approves it first)."""
    _effect(f"pay {amount} {to}")
    return f"paid {amount} to {to}"


@hook("prefilter_llm_history", id="hold_after_tool")
async def hold(state: Any, messages: list[Any]) -> None:
    """In the child: hold the step that follows a tool result, before its model request."""
    if BLOCK["on"] and any(m.role == "tool" for m in messages):
        HELD.append(state.thread_id)
        await asyncio.sleep(60)


def definitions(
    provider: ScriptedProvider, *, on_lost: str = "resume", max_resumes: int = 3
) -> Definitions:
    return Definitions().add(
        Model(name="M", provider=provider, model="scripted-1"),
        Prompt(name="P", model="M", system="You are P.", tools=["charge", "fetch", "pay"]),
        Agent(
            name="chat",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="Customer"),
            on_lost=on_lost,
            max_resumes=max_resumes,
            hooks=("hold_after_tool",),
        ),
        charge,
        fetch,
        pay,
        hold,
    )


SCRIPTS: dict[str, list[Reply]] = {
    "model": [Reply.text("never", delay=60)],
    "tool": [
        Reply.tool_calls(
            Call("charge", {"amount": 1}, id="call_c1"),
            Call("charge", {"amount": 2, "wait": True}, id="call_c2"),
        )
    ],
    "idempotent": [Reply.tool_calls(Call("fetch", {"q": "a", "wait": True}, id="call_f1"))],
    "between": [
        Reply.tool_calls(Call("charge", {"amount": 3}, id="call_c3")),
        Reply.text("never"),
    ],
    "parked": [Reply.tool_calls(Call("pay", {"amount": 50, "to": "bob"}, id="call_pay"))],
    "parked_running": [
        Reply.tool_calls(
            Call("charge", {"amount": 4, "wait": True}, id="call_c4"),
            Call("pay", {"amount": 50, "to": "bob"}, id="call_pay"),
        )
    ],
    "recover": [Reply.text("never", delay=60)],
    "again": [Reply.text("never", delay=60)],
}


def effect_lines() -> list[str]:
    path = EFFECTS.get("file")
    if path is None or not path.exists():
        return []
    return path.read_text(encoding="utf-8").splitlines()


async def until(predicate: Any, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.01)


async def main(
    url: str, effects: str, scenario: str, max_resumes: int, on_lost: str, thread_id: str
) -> None:
    BLOCK["on"] = True
    EFFECTS["file"] = Path(effects)
    provider = ScriptedProvider(SCRIPTS[scenario])
    defs = definitions(provider, on_lost=on_lost, max_resumes=max_resumes)
    rt = await Runtime.open(url, definitions=defs)
    info: dict[str, Any] = {}

    async def requested() -> bool:
        if not provider.requests:
            return False
        await asyncio.sleep(0.2)  # its pending message is committed 20 ms after the request
        return True

    if scenario == "recover":
        await until(requested)
        emit(info)
        return
    if scenario == "again":
        await rt.send_message(thread_id, "again")
        await until(requested)
        emit(info)
        return
    state = await rt.create_thread("chat")
    tid = info["thread_id"] = state.thread_id

    async def results(n: int) -> bool:
        page = await state.get_messages(order="asc", limit=None)
        return sum(1 for m in page.messages if m.role == "tool") >= n

    async def effect(line: str) -> bool:
        return line in effect_lines()

    async def parked() -> bool:
        status = await state.status()
        return (status.state, status.reason) == ("idle", "awaiting_approval")

    async def held() -> bool:
        return bool(HELD)

    await rt.send_message(tid, "go")
    if scenario == "model":
        await until(requested)
    elif scenario == "tool":
        await until(lambda: effect("charge 2"))
        await until(lambda: results(1))
    elif scenario == "idempotent":
        await until(lambda: effect("fetch a"))
    elif scenario == "between":
        await until(held)
    elif scenario == "parked":
        await until(parked)
    elif scenario == "parked_running":
        await until(lambda: effect("charge 4"))
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    emit(info)


def emit(info: dict[str, Any]) -> None:
    sys.stdout.write(f"READY {json.dumps(info)}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    url, effects, scenario, limit, on_lost, *rest = sys.argv[1:]

    async def run() -> None:
        await main(url, effects, scenario, int(limit), on_lost, rest[0] if rest else "")
        await asyncio.sleep(60)  # killed by the test long before

    asyncio.run(run())

"""``threadloom triggers …`` (spec 22 §22.5 rule 4) on both stores, beside a runtime that
runs the store's threads (as a server would)."""

from __future__ import annotations

import asyncio

from typer.testing import CliRunner

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.cli.commands import app
from threadloom.define import Model, Prompt
from threadloom.providers.scripted import ScriptedProvider


def _cli(db_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["triggers", *args, "--store", db_url])
    return result.exit_code, result.output


async def _run(db_url: str, *args: str) -> tuple[int, str]:
    return await asyncio.to_thread(_cli, db_url, *args)


async def test_c22_040_the_command_line_manages_triggers(db_url: str) -> None:
    """C22-040: ``create`` stores a trigger and prints its URL path and secret (the stored
    one), ``list`` and ``show`` read it, ``update`` changes it (``--new-secret`` prints a
    new one), ``delete`` removes it; the runtime calls what the command line made. Input
    refused before the store: exit 2; an unknown or taken id, an unknown thread: exit 1."""
    defs = Definitions().add(
        Model(name="m", provider=ScriptedProvider(), model="m"),
        Prompt(name="p", model="m", system="Answer."),
        Agent(name="bot", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )
    rt = await Runtime.open(db_url, definitions=defs)
    try:
        code, out = await _run(
            db_url, "create", "hook", "--agent", "bot", "--message", "Got {body}",
            "--arguments", '{"team": "a"}',
        )  # fmt: skip
        assert code == 0, out
        lines = out.splitlines()
        assert lines[0] == "created trigger hook: POST /api/triggers/hook/fire"
        secret = lines[1].removeprefix("secret: ")
        row = await rt.triggers.get("hook")
        assert row.secret == secret and row.trigger.arguments == {"team": "a"}
        assert (await _run(db_url, "create", "hook", "--agent", "bot"))[0] == 1
        gone = "00000000-0000-4000-8000-000000000000"
        assert (await _run(db_url, "create", "t2", "--thread", gone))[0] == 1
        for bad in (
            ["create", "b"],
            ["create", "b", "--agent", "bot", "--thread", gone],
            ["create", "_b", "--agent", "bot"],
            ["create", "b", "--agent", "bot", "--arguments", "[1]"],
            ["update", "hook"],
            ["update", "hook", "--message", "x", "--body-as-message"],
        ):
            code, out = await _run(db_url, *bad)
            assert code == 2, (bad, out)
        code, out = await _run(db_url, "list")
        assert code == 0
        assert out.splitlines()[0].split()[:3] == ["ID", "TARGET", "ENABLED"]
        assert out.splitlines()[1].split()[:4] == ["hook", "agent", "bot", "yes"]
        code, out = await _run(db_url, "update", "hook", "--body-as-message", "--new-secret")
        assert code == 0, out
        new_secret = out.splitlines()[1].removeprefix("secret: ")
        assert new_secret != secret and (await rt.triggers.get("hook")).secret == new_secret
        code, out = await _run(db_url, "show", "hook")
        assert "message:     (the request's body)" in out and "target:      agent bot" in out
        assert new_secret not in out
        fired = await rt.triggers.fire(await rt.triggers.get("hook"), "hello", "k")
        await rt.wait_idle(fired.thread_id, timeout=10)
        page = await (await rt.thread(fired.thread_id)).get_messages(order="asc")
        assert [m.content for m in page.messages if m.role == "user"] == ["hello"]
        code, out = await _run(db_url, "show", "hook")
        assert "calls:       1" in out and f"last thread: {fired.thread_id}" in out
        assert (await _run(db_url, "update", "hook", "--disable"))[0] == 0
        assert (await rt.triggers.get("hook")).trigger.enabled is False
        assert (await _run(db_url, "delete", "hook"))[0] == 0
        assert (await _run(db_url, "show", "hook"))[0] == 1
        assert (await _run(db_url, "delete", "hook"))[0] == 1
    finally:
        await rt.close(drain=0)

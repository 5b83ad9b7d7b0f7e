"""``threadloom schedules …`` (spec 18 §18.8) on both stores, beside a runtime that runs the
store's threads (as a server would) and fires what the command line makes due."""

from __future__ import annotations

import asyncio
import uuid

from typer.testing import CliRunner

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.cli.commands import app
from threadloom.define import Model, Prompt
from threadloom.engine.run.schedules import ScheduleOptions
from threadloom.providers.scripted import ScriptedProvider


def _cli(db_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["schedules", *args, "--store", db_url])
    return result.exit_code, result.output


async def _run(db_url: str, *args: str) -> tuple[int, str]:
    return await asyncio.to_thread(_cli, db_url, *args)


async def test_c18_095_the_command_line_manages_schedules_and_fires_through_the_server(
    db_url: str,
) -> None:
    """C18-095: ``create`` stores a schedule (its next fire printed), ``list`` and ``show``
    read it, ``update`` changes it, ``fire`` makes it due now and the runtime that runs the
    store's threads fires it (a thread of the agent gets the message), ``delete`` removes
    it. Input refused before the store: exit 2; an unknown or taken id: exit 1."""
    defs = Definitions().add(
        Model(name="m", provider=ScriptedProvider(), model="m"),
        Prompt(name="p", model="m", system="Answer."),
        Agent(name="reporter", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )
    rt = await Runtime.open(db_url, definitions=defs, schedules=ScheduleOptions(tick_s=0.05))
    try:
        code, out = await _run(
            db_url,
            "create",
            "nightly",
            "--message",
            "report",
            "--cron",
            "30 2 * * *",
            "--timezone",
            "Europe/Berlin",
            "--agent",
            "reporter",
            "--arguments",
            '{"team": "a"}',
        )
        assert code == 0, out
        assert out.startswith("created schedule nightly; next fire 20")
        assert (
            await _run(
                db_url,
                "create",
                "nightly",
                "--message",
                "x",
                "--every",
                "60",
                "--agent",
                "reporter",
            )
        )[0] == 1
        for bad in (
            ["create", "b", "--message", "x", "--agent", "reporter"],
            [
                "create",
                "b",
                "--message",
                "x",
                "--every",
                "60",
                "--cron",
                "* * * * *",
                "--agent",
                "reporter",
            ],
            [
                "create",
                "b",
                "--message",
                "x",
                "--every",
                "60",
                "--agent",
                "reporter",
                "--arguments",
                "[1]",
            ],
            ["update", "nightly", "--every", "0"],
            ["update", "nightly"],
        ):
            code, out = await _run(db_url, *bad)
            assert code == 2, (bad, out)
        code, out = await _run(db_url, "list")
        assert code == 0
        lines = out.splitlines()
        assert lines[0].split()[:3] == ["ID", "WHEN", "TARGET"]
        assert lines[1].startswith("nightly") and "30 2 * * * (Europe/Berlin)" in lines[1]
        code, out = await _run(
            db_url, "update", "nightly", "--message", "now", "--overlap", "queue"
        )
        assert code == 0, out
        code, out = await _run(db_url, "show", "nightly")
        assert "message:     now" in out and "overlap:     queue" in out
        assert 'arguments:   {"team": "a"}' in out
        code, out = await _run(db_url, "fire", "nightly")
        assert code == 0 and "due now" in out
        for _ in range(200):
            row = await rt.schedules.get("nightly")
            if row.fire_count:
                break
            await asyncio.sleep(0.05)
        assert row.fire_count == 1 and row.last_thread_id is not None
        await rt.wait_idle(row.last_thread_id, timeout=10)
        page = await (await rt.thread(row.last_thread_id)).get_messages(order="asc")
        assert [m.content for m in page.messages if m.role == "user"] == ["now"]
        assert (await rt.get_thread_record(row.last_thread_id)).arguments == {"team": "a"}
        assert (await _run(db_url, "delete", "nightly"))[0] == 0
        assert (await _run(db_url, "show", "nightly"))[0] == 1
        assert (await _run(db_url, "fire", str(uuid.uuid4())))[0] == 1
    finally:
        await rt.close(drain=0)

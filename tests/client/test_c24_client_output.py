"""The parsed value of a structured answer as the client reads it from the real server
(spec 24 §24.5, C24-039)."""

from __future__ import annotations

from typing import Any

from server.conftest import Api
from threadloom import Agent, Side
from threadloom.client import AsyncClient
from threadloom.client.chat import Delivery, from_record
from threadloom.define import Model, Prompt
from threadloom.providers.scripted import Script, ScriptedProvider

SCHEMA = {
    "type": "object",
    "properties": {"label": {"enum": ["spam", "ham"]}},
    "required": ["label"],
}


def shaped() -> tuple[Any, ...]:
    model = ScriptedProvider(Script().text('{"label": "maybe"}').text('{"label": "ham"}'))
    return (
        Model(name="shaped_model", provider=model, model="scripted-shaped"),
        Prompt(name="shaped_prompt", model="shaped_model", output_type=SCHEMA),
        Agent(
            name="shaped",
            side_a=Side(prompt="shaped_prompt", label="Agent"),
            side_b=Side(label="User"),
        ),
    )


async def test_c24_039_the_client_reads_the_value_and_the_problem(make_api: Any) -> None:
    """C24-039: over HTTP the answers carry ``metadata.output`` / ``metadata.output_error``;
    the client's records and its chat ``Message`` give the value as ``output``; the silent
    problem message is listed with silent messages only."""
    api: Api = await make_api(extra=shaped())
    async with AsyncClient(api.base, token=api.keys["alice"]) as client:
        created = await client.threads.create("shaped")
        await client.messages.send(created.thread_id, "classify: hello")
        await api.settle(created.thread_id)
        page = await client.messages.list(created.thread_id)
        assert [m.role for m in page.messages] == ["user", "assistant", "assistant"]
        first, second = page.messages[1], page.messages[2]
        assert first.output is None
        assert (first.metadata or {})["output_error"] == (
            "label: 'maybe' is not one of ['spam', 'ham']"
        )
        assert second.output == {"label": "ham"}
        everything = await client.messages.list(created.thread_id, include_silent=True)
        problems = [m for m in everything.messages if m.name == "output_validation"]
        assert len(problems) == 1 and problems[0].silent
        chat = from_record(second, Delivery.static(second.id))
        assert chat.output == {"label": "ham"}

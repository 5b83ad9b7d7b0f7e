"""Structured output in the engine on the scripted model, on both stores (spec 24 §24.2 –
§24.5; C24-030 … C24-038): what every request carries, which answers are checked, the
bounded retries counted per run, the failure, and what is logged."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from otel_support import by_name, in_memory
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.scripted import Call, Script, ScriptedProvider
from threadloom.records import Message

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


class Verdict(BaseModel):
    ok: bool


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@dataclass
class Chat:
    runtime: Runtime
    model: ScriptedProvider
    thread_id: str

    async def send(self, text: str) -> None:
        await self.runtime.send_message(self.thread_id, text)
        await self.runtime.wait_idle(self.thread_id, timeout=10)

    async def history(self) -> list[Message]:
        state = await self.runtime.thread(self.thread_id)
        page = await state.get_messages(order="asc", limit=None, include_silent=True)
        return list(page.messages)

    async def status(self) -> Any:
        return await (await self.runtime.thread(self.thread_id)).status()


@pytest.fixture
async def opened(db_url: str) -> AsyncIterator[list[Runtime]]:
    runtimes: list[Runtime] = []
    yield runtimes
    for runtime in runtimes:
        await runtime.close(0)


async def chat(opened: list[Runtime], db_url: str, script: Script, **prompt: Any) -> Chat:
    model = ScriptedProvider(script)
    defs = Definitions().add(
        Model(name="M", provider=model, model="scripted-1"),
        Prompt(name="P", model="M", system="Answer.", **prompt),
        lookup,
        Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="User")),
    )
    runtime = await Runtime.open(db_url, definitions=defs)
    opened.append(runtime)
    state = await runtime.create_thread("chat")
    return Chat(runtime, model, state.thread_id)


async def test_c24_030_every_request_carries_the_output_format(
    opened: list[Runtime], db_url: str
) -> None:
    """C24-030: each request of a prompt with an output type carries ``output`` (name,
    schema, strict); a tool-calling answer is not checked (no ``output`` or
    ``output_error`` on it); the final text answer after the tool round is."""
    script = Script().tool_calls(Call("lookup", {"q": "x"})).text('{"answer": 42}')
    c = await chat(
        opened, db_url, script, output_type=SCHEMA, output_name="result", tools=["lookup"]
    )
    await c.send("go")
    assert len(c.model.requests) == 2
    for sent in c.model.requests:
        assert sent.output is not None
        assert (sent.output.name, sent.output.json_schema, sent.output.strict) == (
            "result",
            SCHEMA,
            False,
        )
    rows = await c.history()
    calling = next(m for m in rows if m.role == "assistant" and m.tool_calls)
    assert calling.metadata is None or not {"output", "output_error"} & set(calling.metadata)
    assert rows[-1].role == "assistant" and rows[-1].output == {"answer": 42}


async def test_c24_031_no_output_type_no_output_anywhere(
    opened: list[Runtime], db_url: str
) -> None:
    """C24-031: a prompt without an output type sends ``output`` None, stores no output
    metadata, and its logged request body has no ``output`` key (unchanged)."""
    c = await chat(opened, db_url, Script().text('{"answer": 1}'))
    await c.send("go")
    assert c.model.requests[0].output is None
    answer = (await c.history())[-1]
    assert answer.output is None and answer.metadata is None
    logs = await c.runtime.store.list_logs(c.thread_id, limit=None)
    bodies = [json.loads(log.request_body) for log in logs if log.request_body]
    assert bodies and all("output" not in body for body in bodies)


async def test_c24_032_logged_request_body_carries_the_output(
    opened: list[Runtime], db_url: str
) -> None:
    """C24-032: the logged request body of a prompt with an output type carries it as
    ``output`` ``{name, json_schema, strict}`` (what was asked is auditable)."""
    c = await chat(opened, db_url, Script().text('{"answer": 1}'), output_type=SCHEMA)
    await c.send("go")
    logs = await c.runtime.store.list_logs(c.thread_id, limit=None)
    bodies = [json.loads(log.request_body) for log in logs if log.request_body]
    assert [body["output"] for body in bodies] == [
        {"name": "output", "json_schema": SCHEMA, "strict": False}
    ]


async def test_c24_033_zero_retries_fail_at_the_first_problem(
    opened: list[Runtime], db_url: str
) -> None:
    """C24-033: ``output_retries=0`` — the first answer that does not match fails the run;
    no message is sent back, no second request is made."""
    c = await chat(
        opened,
        db_url,
        Script().text("forty-two").text('{"answer": 1}'),
        output_type=SCHEMA,
        output_retries=0,
    )
    await c.send("go")
    assert len(c.model.requests) == 1
    status = await c.status()
    assert (status.state, status.reason) == ("failed", "step_error")
    assert status.error.type == "OutputInvalid"
    assert status.error.message.startswith(
        'Output of prompt "P" does not match its output type after 1 attempt: '
        "the answer is not valid JSON"
    )
    rows = await c.history()
    assert [m.role for m in rows] == ["user", "assistant"]
    assert rows[-1].metadata is not None and rows[-1].metadata["output_error"].startswith(
        "the answer is not valid JSON"
    )


async def test_c24_034_retries_counted_in_a_row_per_run(opened: list[Runtime], db_url: str) -> None:
    """C24-034: with ``output_retries=1`` a run that needs one retry succeeds, and so does
    the next run that needs one too: a matching answer clears the count, and each run
    starts from zero."""
    script = Script().text('{"answer": "x"}').text('{"answer": 1}').text("{}").text('{"answer": 2}')
    c = await chat(opened, db_url, script, output_type=SCHEMA, output_retries=1)
    await c.send("first")
    await c.send("second")
    assert len(c.model.requests) == 4
    status = await c.status()
    assert (status.state, status.reason, status.error) == ("idle", "stop_on_response", None)
    answers = [m for m in await c.history() if m.role == "assistant"]
    assert [m.output for m in answers] == [None, {"answer": 1}, None, {"answer": 2}]
    feedback = [m for m in await c.history() if m.name == "output_validation"]
    assert [m.metadata["output_attempt"] for m in feedback if m.metadata] == [1, 1]
    assert feedback[1].content is not None
    assert "(root): 'answer' is a required property" in feedback[1].content


async def test_c24_035_the_problem_is_the_last_message_of_the_next_request(
    opened: list[Runtime], db_url: str
) -> None:
    """C24-035: the retry request ends with the answer that did not match, then the
    silent user message naming the problem (the model sees both)."""
    script = Script().text('{"answer": "x"}').text('{"answer": 3}')
    c = await chat(opened, db_url, script, output_type=SCHEMA)
    await c.send("go")
    retry = c.model.requests[1]
    assert [m.role for m in retry.messages][-3:] == ["user", "assistant", "user"]
    assert retry.messages[-2].text == '{"answer": "x"}'
    assert retry.messages[-1].text == (
        "Your answer does not match the required output schema: answer: 'x' is not of type "
        "'integer'. Reply again with only a JSON value that matches the schema."
    )


async def test_c24_036_model_class_value_is_its_json_dump(
    opened: list[Runtime], db_url: str
) -> None:
    """C24-036: for a model class the stored value is the validated model's JSON dump
    (pydantic's coercions applied, e.g. ``"true"`` → ``true`` in lax mode), and
    ``parse_output`` gives the instance back."""
    prompt = Prompt(name="P", model="M", output_type=Verdict)
    c = await chat(
        opened, db_url, Script().text('```json\n{"ok": "true"}\n```'), output_type=Verdict
    )
    await c.send("go")
    answer = (await c.history())[-1]
    assert answer.content == '```json\n{"ok": "true"}\n```'  # stored as the model wrote it
    assert answer.output == {"ok": True}
    assert prompt.parse_output(answer) == Verdict(ok=True)


async def test_c24_037_the_value_survives_a_restart(opened: list[Runtime], db_url: str) -> None:
    """C24-037: the parsed value is part of the stored message: a new Runtime on the same
    store reads the same record."""
    c = await chat(opened, db_url, Script().text('{"answer": 7}'), output_type=SCHEMA)
    await c.send("go")
    stored = (await c.history())[-1]
    await c.runtime.close(0)
    opened.remove(c.runtime)
    again = await Runtime.open(db_url, definitions=c.runtime.definitions)
    opened.append(again)
    state = await again.thread(c.thread_id)
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    reread = page.messages[-1]
    assert reread.model_dump() == stored.model_dump() and reread.output == {"answer": 7}


async def test_c24_038_a_tool_reads_the_parsed_value(opened: list[Runtime], db_url: str) -> None:
    """C24-038: a tool (or hook) reads an earlier answer's value from the thread's
    messages as ``Message.output``."""
    seen: list[Any] = []

    script = Script().text('{"answer": 5}').tool_calls(Call("peek", {})).text('{"answer": 6}')
    model = ScriptedProvider(script)

    @tool
    async def peek(state: Any) -> str:
        """The last structured answer."""
        page = await state.get_messages(order="asc", limit=None)
        values = [m.output for m in page.messages if m.output is not None]
        seen.extend(values)
        return json.dumps(values)

    defs = Definitions().add(
        Model(name="M", provider=model, model="scripted-1"),
        Prompt(name="P", model="M", output_type=SCHEMA, tools=["peek"]),
        peek,
        Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="User")),
    )
    runtime = await Runtime.open(db_url, definitions=defs)
    opened.append(runtime)
    state = await runtime.create_thread("chat")
    for text in ("one", "two"):
        await runtime.send_message(state.thread_id, text)
        await runtime.wait_idle(state.thread_id, timeout=10)
    assert seen == [{"answer": 5}]


async def test_c24_040_side_b_gets_the_problem_from_the_other_side(
    opened: list[Runtime], db_url: str
) -> None:
    """C24-040: in a ``dual_ai`` agent whose side b prompt declares the output type, side
    b's mismatch (stored ``user``) is followed by the problem stored ``assistant`` — the
    other side's role —, which side b's next request presents as the user's turn."""
    model = ScriptedProvider(
        Script()
        .text("Alpha speaks")
        .text("not json")
        .text('{"answer": 9}')
        .text("Alpha again")
        .text('{"answer": 10}')
    )
    defs = Definitions().add(
        Model(name="M", provider=model, model="scripted-1"),
        Prompt(name="PA", model="M", system="You are A."),
        Prompt(name="PB", model="M", system="You are B.", output_type=SCHEMA),
        Agent(
            name="dual",
            type="dual_ai",
            side_a=Side(prompt="PA", label="Alpha"),
            side_b=Side(prompt="PB", label="Beta"),
            max_session_turns=2,
        ),
    )
    runtime = await Runtime.open(db_url, definitions=defs)
    opened.append(runtime)
    state = await runtime.create_thread("dual")
    await runtime.send_message(state.thread_id, "start")
    await runtime.wait_idle(state.thread_id, timeout=10)
    page = await (await runtime.thread(state.thread_id)).get_messages(
        order="asc", limit=None, include_silent=True
    )
    rows = [(m.role, m.prompt, m.content) for m in page.messages]
    problem = next(m for m in page.messages if m.name == "output_validation")
    assert problem.role == "assistant" and problem.silent
    b_answers = [m for m in page.messages if m.prompt == "PB" and m.name != "output_validation"]
    assert [m.role for m in b_answers] == ["user", "user", "user"], rows
    assert [m.output for m in b_answers] == [None, {"answer": 9}, {"answer": 10}]
    status = await (await runtime.thread(state.thread_id)).status()
    assert (status.reason, status.error) == ("max_session_turns", None)
    retry = model.requests[2]  # side b's second request
    assert retry.messages[-1].role == "user"
    assert retry.messages[-1].text.startswith("Your answer does not match")


async def test_c24_041_model_spans_say_json_output(opened: list[Runtime], db_url: str) -> None:
    """C24-041: the ``chat`` span of a request carrying an output type has
    ``gen_ai.output.type`` ``json``; one without an output type has no such attribute."""
    options, exporter = in_memory()
    model = ScriptedProvider(Script().text('{"answer": 1}').text("plain"))
    defs = Definitions().add(
        Model(name="M", provider=model, model="scripted-1"),
        Prompt(name="P", model="M", output_type=SCHEMA),
        Prompt(name="Q", model="M"),
        Agent(name="shaped", side_a=Side(prompt="P"), side_b=Side(label="User")),
        Agent(name="plain", side_a=Side(prompt="Q"), side_b=Side(label="User")),
    )
    runtime = await Runtime.open(db_url, definitions=defs, tracing=options)
    opened.append(runtime)
    for agent in ("shaped", "plain"):
        state = await runtime.create_thread(agent)
        await runtime.send_message(state.thread_id, "go")
        await runtime.wait_idle(state.thread_id, timeout=10)
    chats = by_name(exporter.get_finished_spans(), "chat ")
    by_prompt = {
        dict(s.attributes or {})["threadloom.prompt"]: dict(s.attributes or {}) for s in chats
    }
    assert by_prompt["P"]["gen_ai.output.type"] == "json"
    assert "gen_ai.output.type" not in by_prompt["Q"]


async def test_c24_042_a_large_value_is_stored_whole(opened: list[Runtime], db_url: str) -> None:
    """C24-042: the caller's 16 KiB metadata limit (spec 01) does not apply to the value
    the runtime stores: a 40 KB answer keeps its whole value."""
    text = "x" * 40_000
    answer = json.dumps({"answer": 1, "notes": text})
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "notes": {"type": "string"}}}
    c = await chat(opened, db_url, Script().text(answer), output_type=schema)
    await c.send("go")
    stored = (await c.history())[-1]
    assert stored.output == {"answer": 1, "notes": text}
    status = await c.status()
    assert status.error is None

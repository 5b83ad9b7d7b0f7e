"""The browser tests' model, scripted by the last user message:

- ``order <id>``: calls ``lookup_order`` and then answers ``Order <id> has shipped.``;
- ``slow``: streams a long text, two characters every 0.15 s (about a minute), so a test
  can watch it arrive and stop it midway;
- ``gate-<name>``: waits until the file ``<name>`` exists in ``THREADLOOM_TEST_GATE_DIR``,
  then answers ``passed gate-<name>``;
- ``help <text>``: starts the ``helper`` subagent (blocking) with ``<text>``;
- ``notes <text>``: runs the ``notes_prompt`` sub-prompt on ``<text>`` (its model answers
  ``notes on <text>``, after waiting for a gate when ``<text>`` is ``gate-<name>``) and then
  answers ``The notes say: …``;
- ``log-steps <gate>``: calls ``log_steps``, which waits for ``<gate>-1``, logs a row,
  waits for ``<gate>-2`` and logs another;
- ``pay-two``: calls ``pay`` twice in one step (5 to bo, 700 to eve), each waiting for a
  person's approval, then answers ``Payments handled.``;
- ``chart``: calls ``draw_chart`` (a PNG attachment) and then answers ``Here is the chart.``;
- ``markdown``: answers ``MARKDOWN`` (a heading, bold, a list, a code block, links — one
  ``javascript:`` — and raw HTML), streamed in a second;
- ``fail``: the model call fails (not retryable), so the run settles ``failed``;
- anything else: ``echo: <text>``, streamed in small chunks with reasoning first.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from threadloom.define import Model
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest

MARKDOWN = """## Release notes

Some **bold** words, a [safe link](https://example.com/notes) and a [bad one](javascript:alert(1)).

- first item
- second item

```python
print("hello < world")
```

<img src=x onerror="alert(2)"> stays text.
"""

SLOW_TEXT = "This reply streams slowly so that it can be watched and stopped. " * 12


def _last_user(request: ProviderRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text
    return ""


async def _chat(request: ProviderRequest) -> Reply:
    last = request.messages[-1]
    text = _last_user(request).strip()
    if last.role == "tool":
        if text.startswith("help "):
            return Reply.text(f"The helper said: {last.text}", chunk_size=6, chunk_delay=0.02)
        if text.startswith("notes "):
            return Reply.text(f"The notes say: {last.text}", chunk_size=6, chunk_delay=0.02)
        if text.startswith("log-steps "):
            return Reply.text("The steps are logged.")
        if text == "pay-two":
            return Reply.text("Payments handled.")
        if text == "chart":
            return Reply.text("Here is the chart.")
        order = text.split(" ", 1)[1] if " " in text else "?"
        return Reply.text(f"Order {order} has shipped.", chunk_size=3, chunk_delay=0.03)
    if text.startswith("order "):
        return Reply.tool_calls(Call("lookup_order", {"order_id": text.split(" ", 1)[1]}))
    if text.startswith("help "):
        create = {"agent": "helper", "name": "h", "message": text[5:], "attachments": []}
        return Reply.tool_calls(Call("subagent_create", create))
    if text.startswith("notes "):
        return Reply.tool_calls(Call("notes_prompt", {"text": text[6:]}))
    if text.startswith("log-steps "):
        return Reply.tool_calls(Call("log_steps", {"gate": text[10:]}))
    if text == "pay-two":
        return Reply.tool_calls(
            Call("pay", {"amount": 5, "to": "bo"}), Call("pay", {"amount": 700, "to": "eve"})
        )
    if text == "chart":
        return Reply.tool_calls(Call("draw_chart", {}))
    if text == "markdown":
        return Reply.text(MARKDOWN, chunk_size=12, chunk_delay=0.03)
    if text == "fail":
        return Reply.error("The model is unavailable", retryable=False)
    if text == "slow":
        return Reply.text(SLOW_TEXT, chunk_size=2, chunk_delay=0.15)
    if text.startswith("gate-"):
        folder = os.environ.get("THREADLOOM_TEST_GATE_DIR")
        if folder:
            gate = Path(folder) / text
            for _ in range(1200):
                if gate.exists():
                    break
                await asyncio.sleep(0.05)
        return Reply.text(f"passed {text}", chunk_size=4, chunk_delay=0.01)
    return Reply.text(
        f"echo: {text}",
        chunk_size=2,
        chunk_delay=0.12,
        reasoning_content=f"The user wrote {len(text)} characters.",
    )


async def _notes(request: ProviderRequest) -> Reply:
    text = _last_user(request).strip()
    try:
        text = json.loads(text)["text"]
    except (ValueError, KeyError, TypeError):
        pass
    await _wait_for_gate(text)
    return Reply.text(f"notes on {text}", chunk_size=4, chunk_delay=0.02)


async def _wait_for_gate(text: str) -> None:
    folder = os.environ.get("THREADLOOM_TEST_GATE_DIR")
    if folder and text.startswith("gate-"):
        gate = Path(folder) / text
        for _ in range(1200):
            if gate.exists():
                break
            await asyncio.sleep(0.05)


def _helper(request: ProviderRequest) -> Reply:
    return Reply.tool_calls(Call("report", {"summary": f"helped with: {_last_user(request)}"}))


chat_model = Model(
    name="chat_model",
    provider=ScriptedProvider(_chat, record=False),
    model="chat-1",
    input_price=1.0,
    output_price=2.0,
)
notes_model = Model(
    name="notes_model",
    provider=ScriptedProvider(_notes, record=False),
    model="notes-1",
    input_price=1.0,
    output_price=2.0,
)
helper_model = Model(
    name="helper_model",
    provider=ScriptedProvider(_helper, record=False),
    model="helper-1",
    input_price=1.0,
    output_price=2.0,
)

"""The crash suite's hook: a message ``hold-hook <gate>`` waits for its gate in
``before_create_message``, i.e. in the middle of queue delivery (spec 04 §4.10)."""

from typing import Any

from threadloom_project.models.models import wait_gate

from threadloom.define import hook


@hook("before_create_message", id="hold_delivery", timeout_s=None)
async def hold_delivery(state: Any, message: Any) -> None:
    content = message.content if isinstance(message.content, str) else ""
    if content.startswith("hold-hook "):
        await wait_gate(content.removeprefix("hold-hook "))

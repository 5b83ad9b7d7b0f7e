"""What a successful call of a side's session binding does beyond its result (spec 04
§4.14.3 step 7, spec 06 §6.5 and §6.8.5).

- ``session_status``: the label (the ``message_property`` argument, else the result text)
  is written into the parent's registry entry, as ``set_status`` does.
- ``session_stop`` / ``session_fail`` with ``attachments_property``: the paths named there
  must be files of this thread; they join the result's attachments (and so the session
  result's). Anything else turns the call into an error, so the session does not end and
  the model can retry.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from threadloom.define.tool import ToolResult
from threadloom.engine.env import StepEnv
from threadloom.records import ToolCall, json_compact, name_of
from threadloom.thread.files import attachment_ref
from threadloom.thread.transfer import display_name

logger = logging.getLogger("threadloom.engine")

INVALID_VALUE = "(invalid attachment path value)"


def _binding(side_def: Any, field_name: str, call: ToolCall) -> Any:
    binding = getattr(side_def, field_name, None)
    if binding is None or getattr(binding, "name", binding) != call.function.name:
        return None
    return binding


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.function.arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def status_label(binding: Any, call: ToolCall, result: ToolResult) -> str | None:
    """The label of a successful ``session_status`` call (§6.5)."""
    prop = getattr(binding, "message_property", None)
    if prop:
        value = _arguments(call).get(prop)
        text = value.strip() if isinstance(value, str) else None
        if value is not None and not isinstance(value, str):
            text = json_compact(value)
        if text:
            return text
    return (result.result or "").strip() or None


def _paths(value: Any) -> list[str] | None:
    """A path string, a list of path strings or of objects with a string ``path``."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        return None
    paths: list[str] = []
    for item in value:
        if isinstance(item, str):
            paths.append(item)
        elif isinstance(item, dict) and isinstance(item.get("path"), str):
            paths.append(item["path"])
        else:
            return None
    return paths


async def returned_files(
    state: Any, binding: Any, call: ToolCall, result: ToolResult
) -> ToolResult:
    """§6.8.5: the result with the files named at ``attachments_property`` added, or the
    error that keeps the session going."""
    prop = getattr(binding, "attachments_property", None)
    arguments = _arguments(call)
    if not prop or prop not in arguments:
        return result
    paths = _paths(arguments[prop])
    missing: list[str] = []
    refs = list(result.attachments)
    known = {getattr(a, "path", None) for a in refs}
    for path in paths or []:
        record = await state.stat_file(path)
        if record is None or record.is_directory:
            missing.append(path)
        elif record.path not in known:
            known.add(record.path)
            refs.append(attachment_ref(record, display_name(record.name, name_of(path)), None))
    if paths is None or missing:
        shown = ", ".join(missing) if paths is not None else INVALID_VALUE
        return ToolResult(
            status="error",
            error=(
                f"Provided attachment path(s) not found in this thread: {shown}. Use the exact "
                "path of an existing file in this thread."
            ),
        )
    return result.model_copy(update={"attachments": refs})


async def apply(env: StepEnv, state: Any, call: ToolCall, result: ToolResult) -> ToolResult:
    """Step 7 for side X's bindings; other calls pass unchanged."""
    if result.status != "success" or env.depth != 0:
        return result
    side_def = env.side_def
    for field_name in ("session_stop", "session_fail"):
        binding = _binding(side_def, field_name, call)
        if binding is not None:
            return await returned_files(state, binding, call, result)
    binding = _binding(side_def, "session_status", call)
    if binding is not None:
        label = status_label(binding, call, result)
        if label:
            try:
                await state.set_status(label)
            except Exception:
                logger.exception("thread %s: writing the session status", state.thread_id)
    return result


__all__ = ["apply", "returned_files", "status_label"]

"""The SQLite store builds Messages from rows without pydantic's per-field loop; the result
must be indistinguishable from ``Message.model_construct`` with every field."""

from __future__ import annotations

import json

from threadloom.records import Message
from threadloom.store.core.codec import message_from_row


def test_message_from_row_equals_model_construct() -> None:
    attachments = [
        {
            "id": "f1",
            "type": "file",
            "path": "/a.png",
            "name": "a.png",
            "mimeType": "image/png",
            "size": 3,
            "width": 1,
            "height": 1,
        }
    ]
    row = (
        "m1",
        "assistant",
        "hi",
        "bot",
        '[{"id":"c1"}]',
        None,
        None,
        "completed",
        json.dumps(attachments),
        "thinking",
        None,
        "p",
        1_700_000_000_000_000,
        None,
        0,
        1,
        '{"k": 1}',
        "child-1",
        "log-1",
    )
    fast = message_from_row(row)
    slow = Message.model_construct(
        id="m1",
        role="assistant",
        content="hi",
        name="bot",
        tool_calls='[{"id":"c1"}]',
        tool_call_id=None,
        tool_status=None,
        status="completed",
        attachments=fast.attachments,
        reasoning_content="thinking",
        reasoning_details=None,
        prompt="p",
        created_at=1_700_000_000_000_000,
        parent_id=None,
        depth=0,
        silent=True,
        metadata={"k": 1},
        subagent_id="child-1",
        subagent_relationship=None,
        subagent_name=None,
        subagent_title=None,
        subagent_description=None,
        subagent_status=None,
        subagent_blocking=None,
        subagent_thread_name=None,
        subagent_spawn_group_id=None,
        log_id="log-1",
    )
    assert fast == slow
    assert fast.model_dump() == slow.model_dump()
    assert fast.to_wire() == slow.to_wire()
    assert fast.model_fields_set == slow.model_fields_set
    copy = fast.model_copy(update={"content": "changed"})
    assert copy.content == "changed" and fast.content == "hi"
    assert Message.model_validate(fast.model_dump()) == fast

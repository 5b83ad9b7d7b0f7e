"""The incremental context (``engine.request.context_cache``) equals the full pass of spec 04 §4.11.

Random histories are grown, edited and trimmed one operation at a time; after every
operation the incremental context of each side must equal, message for message and
fragment for fragment, what the full pipeline of ``context.assemble`` computes from the
whole history (eligibility, orphans, perspective, reasoning replay, normalisation).
"""

from __future__ import annotations

import random

import pytest

from threadloom.engine.request.context import _drop_orphans, _eligible, _present
from threadloom.engine.request.context_cache import ContextCache, Prepared
from threadloom.engine.request.fragments import fragment
from threadloom.engine.request.presentation import (
    RequestMessage,
    convert,
    normalize,
    provider_message,
)
from threadloom.engine.request.request_body import request_body
from threadloom.records import (
    AttachmentRef,
    Message,
    ToolCall,
    encode_tool_calls,
)
from threadloom.thread.history import MessageHistory

SYSTEM = "You are a test agent."


def full_pass(history: MessageHistory, side: str, include_reasoning: bool) -> list[RequestMessage]:
    """What ``context.assemble`` computes for a step with no hook and the defaults."""
    snapshot = _eligible(history.raw(), True, None)
    snapshot = _drop_orphans(snapshot, history)
    messages = _present(snapshot, side, include_reasoning, history, {}, frozenset(), {})
    messages.insert(0, RequestMessage(role="system", content=SYSTEM))
    return normalize(messages, True)


class Grower:
    """Random messages shaped like a conversation, with the odd irregular one."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.n = 0
        self.open_calls: list[str] = []
        self.all_calls: list[str] = []

    def _id(self) -> str:
        self.n += 1
        return f"m{self.n:05d}"

    def message(self) -> Message:
        rng = self.rng
        status = rng.choices(["completed", "pending", "failed"], [0.85, 0.1, 0.05])[0]
        kind = rng.choices(
            ["user", "assistant", "calls", "tool", "stray_tool", "system", "attached"],
            [0.25, 0.2, 0.15, 0.25, 0.03, 0.04, 0.08],
        )[0]
        mid = self._id()
        if kind == "calls":
            calls: list[ToolCall] = []
            for _ in range(rng.randint(1, 3)):
                call_id = f"call_{self.n}_{len(calls)}"
                calls.append(ToolCall(id=call_id, function={"name": "echo", "arguments": "{}"}))
                self.open_calls.append(call_id)
                self.all_calls.append(call_id)
            role = rng.choice(["assistant", "assistant", "user"])
            content = rng.choice([None, "", "  ", "calling"])
            return Message(
                id=mid,
                role=role,
                content=content,
                tool_calls=encode_tool_calls(calls),
                status=status,
                created_at=self.n,
            )
        if kind == "tool" and self.open_calls:
            call_id = self.open_calls.pop(rng.randrange(len(self.open_calls)))
            if rng.random() < 0.05:  # answered twice
                self.open_calls.append(call_id)
            return Message(
                id=mid,
                role="tool",
                content=f"result {self.n}",
                name="echo",
                tool_call_id=call_id,
                tool_status=rng.choice(["success", "error"]),
                status=status,
                created_at=self.n,
            )
        if kind == "stray_tool":
            return Message(
                id=mid,
                role="tool",
                content="stray",
                name="echo",
                tool_call_id=f"call_unknown_{self.n}",
                status=status,
                created_at=self.n,
            )
        if kind == "system":
            return Message(id=mid, role="system", content="note", status=status, created_at=self.n)
        if kind == "attached":
            image = rng.random() < 0.02
            ref = AttachmentRef(
                id=f"f{self.n}",
                path=f"/f{self.n}",
                name=f"f{self.n}.{'png' if image else 'txt'}",
                mimeType="image/png" if image else "text/plain",
                size=3,
            )
            return Message(
                id=mid,
                role="user",
                content="see file",
                attachments=[ref],
                status=status,
                created_at=self.n,
            )
        role = "user" if kind == "user" else "assistant"
        return Message(
            id=mid,
            role=role,
            content=rng.choice(["hello", "", None, "answer"]) if role == "assistant" else "hi",
            reasoning_content=rng.choice([None, None, "thinking"]) if role == "assistant" else None,
            reasoning_details='[{"type":"reasoning.text","text":"t","signature":"s"}]'
            if role == "assistant" and rng.random() < 0.1
            else None,
            status=status,
            created_at=self.n,
        )


def _check(history: MessageHistory, caches: dict[tuple[str, bool], ContextCache]) -> bool:
    """Compare every cache with the full pass; True when each gave an incremental answer."""
    all_fast = True
    for (side, include_reasoning), cache in caches.items():
        prepared = cache.prepare(history, SYSTEM)
        if prepared is None:
            all_fast = False
            continue
        expected = full_pass(history, side, include_reasoning)
        assert [m.model_dump() for m in prepared.messages] == [m.model_dump() for m in expected]
        assert prepared.fragments == [fragment(provider_message(m)) for m in expected]
        validated = [provider_message(m) for m in expected]  # built without validation:
        assert prepared.providers == validated  # the same messages, the same fields set
        assert [p.model_fields_set for p in prepared.providers] == [
            p.model_fields_set for p in validated
        ]
        _check_body(prepared)
    return all_fast


HEAD = '{"model":"m","messages":"__slot__","tools":[],"_metadata":{"promptName":"P"}}'


def _check_body(prepared: Prepared) -> None:
    """The request body is the head with the messages array of all the fragments; its
    delta, applied to the last body stored from this cache, gives the same text."""
    fragments = prepared.fragments
    before, _, after = HEAD.partition('"__slot__"')
    expected = before + "[" + ",".join(fragments) + "]" + after
    body = request_body(HEAD, "__slot__", fragments, prepared, True)
    assert body.length() == len(expected)  # summed without a join (the text is not built)
    assert body.text == expected
    last = prepared.cache.last_request
    delta = body.delta()
    # what the request builder uses: the view through the cache's lists, the same body
    viewed = request_body(HEAD, "__slot__", prepared.fragment_view, prepared, True)
    assert viewed.length() == len(expected)
    assert viewed.delta() == delta
    assert viewed.text == expected
    if len(fragments) == 1:  # the system message alone: no delta is offered
        assert delta is None
        return
    assert delta is not None
    if delta.base_log_id is not None:
        assert last is not None and delta.keep > 0
        kept = last.fragments[last.first : last.first + delta.keep]
    else:
        kept = []
    rebuilt = delta.prefix + ",".join([*kept, *delta.fragments]) + delta.suffix
    assert rebuilt == expected
    body.stored(f"log-{id(body)}")


@pytest.mark.parametrize("seed", range(12))
def test_incremental_context_equals_full_pass_under_appends_edits_and_removals(
    seed: int,
) -> None:
    rng = random.Random(seed)
    grower = Grower(rng)
    history = MessageHistory()
    caches = {
        (side, reasoning): ContextCache("assistant" if side == "a" else "user", reasoning)
        for side in ("a", "b")
        for reasoning in (True, False)
    }
    fast_checks = 0
    for _ in range(250):
        roll = rng.random()
        records = history.raw()
        if roll < 0.75 or not records:
            history.upsert(grower.message())
        elif roll < 0.9:
            # settle or edit a message: a pending one completes, an old one changes text
            target = rng.choice(records[-5:] if rng.random() < 0.7 else records)
            update: dict[str, object] = {"status": "completed"}
            if target.role != "tool" and rng.random() < 0.3:
                update["content"] = f"edited {grower.n}"
            history.upsert(target.model_copy(update=update))
        else:
            history.remove([rng.choice(records).id])
        if _check(history, caches):
            fast_checks += 1
    assert fast_checks >= 100  # most histories stay incremental (an image attachment leaves)


def test_a_conversation_stays_on_the_incremental_path_and_commits_its_prefix() -> None:
    history = MessageHistory()
    cache = ContextCache("assistant", True)
    call = ToolCall(id="call_1", function={"name": "echo", "arguments": "{}"})
    for turn in range(50):
        history.upsert(Message(id=f"u{turn}", role="user", content=f"q{turn}"))
        assert cache.prepare(history, SYSTEM) is not None
        pending = Message(id=f"a{turn}", role="assistant", status="pending")
        history.upsert(pending)
        history.upsert(
            pending.model_copy(
                update={
                    "status": "completed",
                    "tool_calls": encode_tool_calls(
                        [call.model_copy(update={"id": f"call_{turn}"})]
                    ),
                }
            )
        )
        history.upsert(
            Message(
                id=f"t{turn}", role="tool", content="r", name="echo", tool_call_id=f"call_{turn}"
            )
        )
        history.upsert(Message(id=f"b{turn}", role="assistant", status="pending"))
        prepared = cache.prepare(history, SYSTEM)
        assert prepared is not None
        # everything but the trailing pending message is committed: no pass over history
        assert cache.consumed == len(history) - 1
        assert prepared.committed == len(prepared.messages) - 1
        history.upsert(Message(id=f"b{turn}", role="assistant", content="done", status="completed"))
    prepared = cache.prepare(history, SYSTEM)
    assert prepared is not None
    assert [m.model_dump() for m in prepared.messages] == [
        m.model_dump() for m in full_pass(history, "a", True)
    ]
    assert len(prepared.messages) == 1 + 50 * 4


def test_a_committed_message_is_kept_as_its_provider_message_and_fragment_only() -> None:
    """Issue 40: once the cache commits a record, the history lets go of what it
    remembered of it for the cache (its request form, decoded calls, call ids); the
    request's messages are built again from the records when asked for, and a full pass
    after that computes them again, equal."""
    history = MessageHistory()
    cache = ContextCache("assistant", True)
    calls = [ToolCall(id=f"call_{i}", function={"name": "echo", "arguments": "{}"}) for i in (1, 2)]
    history.upsert(Message(id="u", role="user", content="q"))
    history.upsert(Message(id="a", role="assistant", tool_calls=encode_tool_calls(calls)))
    history.upsert(Message(id="t1", role="tool", content="r1", name="echo", tool_call_id="call_1"))
    history.upsert(Message(id="t2", role="tool", content="r2", name="echo", tool_call_id="call_2"))
    history.upsert(Message(id="b", role="assistant", status="pending"))
    prepared = cache.prepare(history, SYSTEM)
    assert prepared is not None
    assert cache.consumed == 4  # all but the pending message
    remembered = {mid for values in history._memo.values() for mid in values}
    assert remembered <= {"b"}  # nothing of the four committed records
    assert [p.role for p in prepared.providers] == ["system", "user", "assistant", "tool", "tool"]
    expected = [m.model_dump() for m in full_pass(history, "a", True)]
    assert [m.model_dump() for m in prepared.messages] == expected
    assert [m.model_dump() for m in full_pass(history, "a", True)] == expected  # computed again
    again = cache.prepare(history, SYSTEM)
    assert again is not None and again.providers == prepared.providers


def test_caches_with_the_same_system_text_share_its_entry() -> None:
    first, second = ContextCache("assistant", True), ContextCache("user", False)
    entry = first.system_entry(SYSTEM)
    assert second.system_entry(SYSTEM) is entry  # one entry a process, not one a thread
    assert entry[0].model_dump() == RequestMessage(role="system", content=SYSTEM).model_dump()
    assert entry[2] == fragment(provider_message(entry[0]))
    other = second.system_entry(SYSTEM + " Be brief.")
    assert other is not entry and other[0].content == SYSTEM + " Be brief."


def test_a_result_stored_before_its_call_leaves_the_incremental_path() -> None:
    history = MessageHistory()
    cache = ContextCache("assistant", True)
    history.upsert(Message(id="t", role="tool", content="early", name="echo", tool_call_id="c1"))
    history.upsert(
        Message(
            id="a",
            role="assistant",
            tool_calls=encode_tool_calls(
                [ToolCall(id="c1", function={"name": "echo", "arguments": "{}"})]
            ),
        )
    )
    assert cache.prepare(history, SYSTEM) is None
    assert cache.usable is False


def test_a_request_message_built_without_validation_is_the_validated_one() -> None:
    rng = random.Random(7)
    grower = Grower(rng)
    history = MessageHistory()
    for _ in range(300):
        history.upsert(grower.message())
    checked = 0
    for m in history.raw():
        for own in ("assistant", "user"):
            for include_reasoning in (True, False):
                item = convert(m, own, include_reasoning, history=history)
                if item is None:
                    continue
                request = item.request
                given = {k: getattr(request, k) for k in request.model_fields_set}
                validated = RequestMessage(**given)
                assert request == validated and repr(request) == repr(validated)
                assert request.model_fields_set == validated.model_fields_set
                assert request.model_dump_json() == validated.model_dump_json()
                checked += 1
    assert checked > 500

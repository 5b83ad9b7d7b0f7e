"""Unit tests of hook definitions, resolution and the hook runner (spec 03 §3.1–§3.5).

The runner treats ``state`` as opaque, so plain Python objects stand in for a ThreadState.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from typing import Any

import pytest

from threadloom.define import DROP, HOOK_NAMES, RUNTIME_DEFAULT, HookContext, HookDefinition, hook
from threadloom.define.hook import (
    EVENT_HOOK_NAMES,
    TRANSFORM_HOOK_NAMES,
    HookRegistry,
    hook_definition_of,
)
from threadloom.errors import (
    HookBlocked,
    HookIdConflict,
    HookRecursionError,
    HookTimeout,
    InvalidMessage,
    UnknownHookError,
)
from threadloom.records import Message
from threadloom.thread.hooks import (
    MAX_HOOK_DEPTH,
    HookRunner,
    copy_value,
    format_hook_error,
    hook_depth,
)

STATE = object()
Failure = tuple[Any, HookDefinition, HookContext, BaseException]


def agent_ctx(d: HookDefinition) -> HookContext:
    return HookContext.for_agent(d.name, d.id, "support")


def chain(*defs: HookDefinition) -> list[tuple[HookDefinition, HookContext]]:
    return [(d, agent_ctx(d)) for d in defs]


def define(name: str, hook_id: str, fn: Callable[..., Any], **kw: Any) -> HookDefinition:
    return HookDefinition(name=name, id=hook_id, fn=fn, **kw)


def accept_any(previous: Any, returned: Any, hook: HookDefinition) -> Any:
    return returned


def accept_str(previous: Any, returned: Any, hook: HookDefinition) -> Any:
    if not isinstance(returned, str):
        raise InvalidMessage(f"hook {hook.id} returned {type(returned).__name__}, not str")
    return returned


def recording_runner(**kw: Any) -> tuple[HookRunner, list[Failure]]:
    failures: list[Failure] = []

    async def on_failure(
        state: Any, d: HookDefinition, ctx: HookContext, exc: BaseException
    ) -> None:
        failures.append((state, d, ctx, exc))

    return HookRunner(on_failure=on_failure, **kw), failures


# --- definitions (§3.1, §3.2) -------------------------------------------------------------


def test_hook_names_catalogue() -> None:
    assert len(HOOK_NAMES) == 15
    assert EVENT_HOOK_NAMES | TRANSFORM_HOOK_NAMES == HOOK_NAMES
    assert not EVENT_HOOK_NAMES & TRANSFORM_HOOK_NAMES
    assert "after_create_message" in EVENT_HOOK_NAMES
    assert "after_tool_call_success" in TRANSFORM_HOOK_NAMES
    assert repr(DROP) == "threadloom.DROP"
    assert copy.deepcopy(DROP) is DROP


def test_c03_001_decorator_returns_function() -> None:
    def keep_last(state: Any, messages: list[Any]) -> list[Any]:
        return messages[-1:]

    decorated = hook("filter_messages")(keep_last)
    assert decorated is keep_last
    definition = hook_definition_of(keep_last)
    assert definition is keep_last.__threadloom_hook__  # type: ignore[attr-defined]
    assert definition is not None
    assert (definition.name, definition.id) == ("filter_messages", "keep_last")
    assert definition.fn is keep_last
    assert definition.timeout_s is RUNTIME_DEFAULT
    assert definition.kind == "transform"
    assert keep_last(None, [1, 2]) == [2]  # still directly callable


def test_c03_001_explicit_id_and_timeout() -> None:
    @hook("before_create_message", id="redact_cards", timeout_s=5)
    def redact(state: Any, message: Any) -> None:
        return None

    definition = hook_definition_of(redact)
    assert definition is not None
    assert (definition.id, definition.timeout_s) == ("redact_cards", 5)


@pytest.mark.parametrize(
    "name", ["not_a_hook", "user_value_changed", "user_client_attached", "user_client_detached"]
)
def test_c03_002_unknown_hook_name_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="unknown hook name"):

        @hook(name)
        def fn(state: Any) -> None: ...


@pytest.mark.parametrize("bad_id", ["Bad-Id", "1abc", "_x", "a b", ""])
def test_c03_003_invalid_id_rejected(bad_id: str) -> None:
    with pytest.raises(ValueError, match="invalid hook id"):

        @hook("filter_messages", id=bad_id)
        def fn(state: Any, messages: Any) -> None: ...


def test_c03_003_invalid_default_id_from_function_name() -> None:
    def BadName(state: Any, messages: Any) -> None: ...

    with pytest.raises(ValueError, match="invalid hook id"):
        hook("filter_messages")(BadName)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "5", True])
def test_invalid_timeout_rejected(timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        hook("filter_messages", timeout_s=timeout)


def test_c03_004_id_conflict_and_idempotent_registration() -> None:
    @hook("after_create_message", id="audit")
    def audit_one(state: Any, message: Any) -> None: ...

    @hook("after_create_message", id="audit")
    def audit_two(state: Any, message: Any) -> None: ...

    registry = HookRegistry()
    first = registry.register(audit_one)
    assert registry.register(audit_one) is first  # same function twice: no-op
    assert registry.register(hook_definition_of(audit_one)) is first  # type: ignore[arg-type]
    with pytest.raises(HookIdConflict, match="audit") as info:
        registry.register(audit_two)
    assert isinstance(info.value, ValueError)
    assert registry.get("audit") is first
    assert len(registry) == 1


def test_register_undecorated_function_is_type_error() -> None:
    with pytest.raises(TypeError):
        HookRegistry().register(lambda state: None)


def test_check_ids_names_id_and_definition() -> None:
    registry = HookRegistry()
    registry.register(define("filter_messages", "known", lambda s, m: None))
    registry.check_ids(["known"], 'Prompt "support_prompt"')
    with pytest.raises(UnknownHookError) as info:
        registry.check_ids(["known", "ghost"], 'Prompt "support_prompt"')
    assert str(info.value) == 'Prompt "support_prompt": hook "ghost" is not defined'


# --- resolution (§3.3) --------------------------------------------------------------------


@pytest.fixture
def registry() -> HookRegistry:
    reg = HookRegistry()
    for hook_id in ("p1", "p2", "a1", "a2", "c1", "c2"):
        reg.register(define("filter_messages", hook_id, lambda s, m: None))
    reg.register(define("before_create_message", "other", lambda s, m: None))
    return reg


def ids(resolved: list[tuple[HookDefinition, HookContext]]) -> list[str]:
    return [d.id for d, _ in resolved]


def test_resolve_prompt_list_replaces_agent_list(registry: HookRegistry) -> None:
    resolved = registry.resolve(
        "filter_messages",
        prompt_hooks=["p1"],
        prompt_name="P",
        agent_hooks=["a1"],
        agent_name="support",
    )
    assert ids(resolved) == ["p1"]
    assert resolved[0][1] == HookContext(
        "filter_messages", "p1", {"kind": "prompt", "prompt_name": "P"}
    )


@pytest.mark.parametrize("prompt_hooks", [None, []])
def test_resolve_falls_back_to_agent_list(
    registry: HookRegistry, prompt_hooks: list[str] | None
) -> None:
    resolved = registry.resolve(
        "filter_messages",
        prompt_hooks=prompt_hooks,
        prompt_name="P",
        agent_hooks=["a2", "a1"],
        agent_name="support",
    )
    assert ids(resolved) == ["a2", "a1"]
    assert dict(resolved[0][1].source) == {"kind": "agent", "agent_name": "support"}


def test_resolve_duplicates_run_once_at_first_position(registry: HookRegistry) -> None:
    resolved = registry.resolve(
        "filter_messages",
        prompt_hooks=["p2", "p1", "p2", "p1"],
        prompt_name="P",
        agent_hooks=[],
        agent_name="support",
    )
    assert ids(resolved) == ["p2", "p1"]


def test_resolve_skips_ids_of_other_names_and_unregistered(registry: HookRegistry) -> None:
    resolved = registry.resolve(
        "filter_messages",
        prompt_hooks=["other", "p1", "ghost"],
        prompt_name="P",
        agent_hooks=[],
        agent_name="support",
    )
    assert ids(resolved) == ["p1"]
    create = registry.resolve(
        "before_create_message",
        prompt_hooks=["other", "p1"],
        prompt_name="P",
        agent_hooks=[],
        agent_name="support",
    )
    assert ids(create) == ["other"]


def test_resolve_child_hooks_wrap_base_list(registry: HookRegistry) -> None:
    resolved = registry.resolve(
        "filter_messages",
        prompt_hooks=["p1", "c1"],
        prompt_name="P",
        agent_hooks=[],
        agent_name="support",
        child_hooks_before=[("c1", "research", "researcher")],
        child_hooks_after=[("c2", "research", "researcher"), ("other", "research", "r")],
    )
    assert ids(resolved) == ["c1", "p1", "c2"]
    assert dict(resolved[0][1].source) == {
        "kind": "child",
        "relationship_name": "research",
        "agent_name": "researcher",
    }


def test_resolve_unregistered_child_hook_fails_closed(registry: HookRegistry) -> None:
    with pytest.raises(UnknownHookError, match="ghost"):
        registry.resolve(
            "filter_messages",
            prompt_hooks=None,
            prompt_name=None,
            agent_hooks=[],
            agent_name="support",
            child_hooks_after=[("ghost", "research", "researcher")],
        )


# --- runner: transform chains (§3.4) ------------------------------------------------------


async def test_transform_chain_order() -> None:
    runner = HookRunner()
    a = define("after_system_message", "a", lambda state, text: text + "A")
    b = define("after_system_message", "b", lambda state, text: text + "B")
    result = await runner.run_transform(
        chain(a, b), STATE, "x", validate=accept_str, propagate=True
    )
    assert result == "xAB"


async def test_transform_none_is_unchanged_and_in_place_change_discarded() -> None:
    seen: list[Any] = []

    def mutate(state: Any, message: Message) -> None:
        message.content = "mutated"

    def observe(state: Any, message: Message) -> None:
        seen.append(message.content)

    def mutate_list(state: Any, messages: list[dict[str, Any]]) -> None:
        messages.clear()

    runner = HookRunner()
    original = Message(id="m1", role="user", content="hello")
    hooks = chain(
        define("before_create_message", "mutate", mutate),
        define("before_create_message", "observe", observe),
    )
    result = await runner.run_transform(hooks, STATE, original, validate=accept_any, propagate=True)
    assert result.content == "hello"
    assert original.content == "hello"
    assert seen == ["hello"]

    history = [{"role": "user", "content": "hi"}]
    filtered = await runner.run_transform(
        chain(define("filter_messages", "mutate_list", mutate_list)),
        STATE,
        history,
        validate=accept_any,
        propagate=True,
    )
    assert filtered == [{"role": "user", "content": "hi"}]


async def test_validate_receives_clean_previous_value() -> None:
    calls: list[tuple[Any, Any, str]] = []

    def merge(previous: Any, returned: Any, hook: HookDefinition) -> Any:
        calls.append((copy.deepcopy(previous), returned, hook.id))
        return {**previous, **returned}

    def patch(state: Any, value: dict[str, Any]) -> dict[str, Any]:
        value["content"] = "dirty"  # in-place change of the copy
        return {"name": "bot"}

    runner = HookRunner()
    result = await runner.run_transform(
        chain(define("before_create_message", "patch", patch)),
        STATE,
        {"content": "x"},
        validate=merge,
        propagate=True,
    )
    assert result == {"content": "x", "name": "bot"}
    assert calls == [({"content": "x"}, {"name": "bot"}, "patch")]


async def test_args_builder_for_update_hook() -> None:
    received: list[tuple[Any, ...]] = []

    def hook_fn(state: Any, message_id: str, updates: dict[str, Any]) -> dict[str, Any]:
        received.append((state, message_id, dict(updates)))
        return {"content": "Z"}

    runner = HookRunner()
    result = await runner.run_transform(
        chain(define("before_update_message", "upd", hook_fn)),
        STATE,
        {"content": "x"},
        validate=accept_any,
        propagate=True,
        args_builder=lambda v: (STATE, "m1", v),
    )
    assert result == {"content": "Z"}
    assert received == [(STATE, "m1", {"content": "x"})]


async def test_propagate_raises_first_failure_unchanged() -> None:
    boom = RuntimeError("boom")
    ran: list[str] = []

    def fail(state: Any, text: str) -> str:
        raise boom

    def later(state: Any, text: str) -> str:
        ran.append("later")
        return text

    runner, failures = recording_runner()
    hooks = chain(
        define("after_system_message", "fail", fail), define("after_system_message", "later", later)
    )
    with pytest.raises(RuntimeError) as info:
        await runner.run_transform(hooks, STATE, "x", validate=accept_str, propagate=True)
    assert info.value is boom
    assert ran == [] and failures == []

    wrong = chain(define("after_system_message", "wrong", lambda s, t: 5))
    with pytest.raises(InvalidMessage, match="wrong"):
        await runner.run_transform(wrong, STATE, "x", validate=accept_str, propagate=True)
    assert failures == []


async def test_record_keeps_last_good_value_and_continues(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fail(state: Any, text: str) -> str:
        raise RuntimeError("boom")

    runner, failures = recording_runner()
    good = define("after_system_message", "good", lambda s, t: t + "G")
    bad = define("after_system_message", "bad", fail)
    wrong = define("after_system_message", "wrong", lambda s, t: 5)
    tail = define("after_system_message", "tail", lambda s, t: t + "T")
    with caplog.at_level(logging.WARNING, logger="threadloom.hooks"):
        result = await runner.run_transform(
            chain(good, bad, wrong, tail), STATE, "x", validate=accept_str, propagate=False
        )
    assert result == "xGT"
    assert [(f[0], f[1].id) for f in failures] == [(STATE, "bad"), (STATE, "wrong")]
    assert isinstance(failures[0][3], RuntimeError)
    assert isinstance(failures[1][3], InvalidMessage)
    assert failures[0][2] == agent_ctx(bad)
    warnings = [r for r in caplog.records if r.name == "threadloom.hooks"]
    assert len(warnings) == 2
    assert "after_system_message" in warnings[0].getMessage()
    assert "bad" in warnings[0].getMessage()
    assert warnings[0].exc_info is not None


async def test_on_failure_error_does_not_break_chain() -> None:
    async def broken(state: Any, d: HookDefinition, c: HookContext, e: BaseException) -> None:
        raise OSError("log store down")

    def fail(state: Any, text: str) -> str:
        raise RuntimeError("boom")

    runner = HookRunner(on_failure=broken)
    hooks = chain(define("after_system_message", "bad", fail))
    result = await runner.run_transform(hooks, STATE, "x", validate=accept_str, propagate=False)
    assert result == "x"


async def test_drop_ends_chain() -> None:
    ran: list[str] = []
    dropper = define("after_tool_call_success", "dropper", lambda s, call, result: DROP)
    after = define("after_tool_call_success", "after", lambda s, c, r: ran.append("after"))
    runner = HookRunner()
    result = await runner.run_transform(
        chain(dropper, after),
        STATE,
        {"status": "success"},
        validate=accept_any,
        propagate=False,
        args_builder=lambda v: (STATE, {"id": "call_1"}, v),
    )
    assert result is DROP
    assert ran == []


async def test_drop_from_other_hook_goes_to_validate() -> None:
    runner, failures = recording_runner()
    hooks = chain(define("after_system_message", "dropper", lambda s, t: DROP))
    result = await runner.run_transform(hooks, STATE, "x", validate=accept_str, propagate=False)
    assert result == "x"
    assert isinstance(failures[0][3], InvalidMessage)


async def test_block_ends_chain_only_when_allowed() -> None:
    def block(state: Any, messages: list[Any]) -> None:
        raise HookBlocked("quota exceeded")

    ran: list[str] = []
    blocker = define("prefilter_llm_history", "blocker", block)
    after = define("prefilter_llm_history", "after", lambda s, m: ran.append("after"))
    runner, failures = recording_runner()
    with pytest.raises(HookBlocked, match="quota exceeded"):
        await runner.run_transform(
            chain(blocker, after),
            STATE,
            [],
            validate=accept_any,
            propagate=False,
            allow_block=True,
        )
    assert ran == [] and failures == []

    result = await runner.run_transform(
        chain(blocker, after), STATE, [], validate=accept_any, propagate=False
    )
    assert result == [] and ran == ["after"]
    assert [f[1].id for f in failures] == ["blocker"]


# --- runner: events (§3.4 rule 4) ---------------------------------------------------------


async def test_event_hooks_all_run_when_one_fails() -> None:
    ran: list[str] = []

    def make(name: str, fail: bool = False) -> HookDefinition:
        def fn(state: Any, message: Any) -> str:
            ran.append(name)
            if fail:
                raise ValueError(name)
            return "ignored"

        return define("after_create_message", name, fn)

    runner, failures = recording_runner()
    await runner.run_event(chain(make("a"), make("b", fail=True), make("c")), STATE, {"id": "m1"})
    assert ran == ["a", "b", "c"]
    assert [(f[1].id, str(f[3])) for f in failures] == [("b", "b")]


# --- runner: calling conventions, timeouts, recursion (§3.2, §3.5) ------------------------


async def test_c03_010_hook_context_only_when_declared() -> None:
    received: list[Any] = []

    def with_ctx(state: Any, message: Any, *, hook_context: HookContext) -> None:
        received.append(hook_context)

    async def positional_ctx(state: Any, message: Any, hook_context: Any = None) -> None:
        received.append(hook_context)

    def without(state: Any, message: Any, **kwargs: Any) -> None:
        received.append(kwargs)

    runner = HookRunner()
    hooks = chain(
        define("after_create_message", "with_ctx", with_ctx),
        define("after_create_message", "positional_ctx", positional_ctx),
        define("after_create_message", "without", without),
    )
    runner_failures, failures = recording_runner()
    await runner_failures.run_event(hooks, STATE, {"id": "m1"})
    await runner.run_event(hooks, STATE, {"id": "m1"})
    assert failures == []
    ctx = received[0]
    assert ctx.source["kind"] == "agent" and ctx.source["agent_name"] == "support"
    assert (ctx.hook_name, ctx.hook_id) == ("after_create_message", "with_ctx")
    assert received[1].hook_id == "positional_ctx"
    assert received[2] == {}


async def test_c03_011_sync_and_async_identical() -> None:
    def sync_upper(state: Any, text: str) -> str:
        return text.upper() + "!"

    async def async_upper(state: Any, text: str) -> str:
        await asyncio.sleep(0)
        return text.upper() + "!"

    runner = HookRunner()
    results = [
        await runner.run_transform(
            chain(define("after_system_message", "h", fn)),
            STATE,
            "hi",
            validate=accept_str,
            propagate=True,
        )
        for fn in (sync_upper, async_upper)
    ]
    assert results == ["HI!", "HI!"]


async def slow(state: Any, value: Any) -> str:
    await asyncio.sleep(5)
    return "late"


async def test_c03_012_timeout_raises_hook_timeout_when_propagating() -> None:
    runner, failures = recording_runner()
    hooks = chain(define("before_create_message", "slow", slow, timeout_s=0.05))
    with pytest.raises(HookTimeout, match="slow") as info:
        await runner.run_transform(hooks, STATE, "x", validate=accept_any, propagate=True)
    assert isinstance(info.value, TimeoutError)
    assert failures == []


async def test_c03_013_event_timeout_is_recorded() -> None:
    runner, failures = recording_runner(default_timeout_s=0.05)
    after = define("after_create_message", "after", lambda s, m: None)
    await runner.run_event(chain(define("after_create_message", "slow", slow), after), STATE, {})
    assert [(f[1].id, type(f[3])) for f in failures] == [("slow", HookTimeout)]


async def test_timeout_none_disables_and_own_timeout_error_is_not_hook_timeout() -> None:
    async def short(state: Any, value: Any) -> str:
        await asyncio.sleep(0.02)
        return "done"

    async def raises_timeout(state: Any, value: Any) -> str:
        raise TimeoutError("upstream")

    runner = HookRunner(default_timeout_s=0.001)
    ok = define("after_system_message", "short", short, timeout_s=None)
    assert runner.timeout_for(ok) is None
    assert await runner.call(ok, agent_ctx(ok), STATE, "x") == "done"
    own = define("after_system_message", "own", raises_timeout, timeout_s=1)
    with pytest.raises(TimeoutError) as info:
        await runner.call(own, agent_ctx(own), STATE, "x")
    assert not isinstance(info.value, HookTimeout)


@pytest.mark.parametrize("propagate", [True, False])
async def test_recursion_fails_at_ninth_level(propagate: bool) -> None:
    runner, failures = recording_runner()
    levels: list[int] = []

    async def reenter(state: Any, value: str) -> Any:
        levels.append(hook_depth())
        return await runner.run_transform(
            hooks, state, value + ".", validate=accept_str, propagate=propagate
        )

    hooks = chain(define("before_create_message", "reenter", reenter))
    if propagate:
        with pytest.raises(HookRecursionError):
            await runner.run_transform(hooks, STATE, "x", validate=accept_str, propagate=True)
        assert failures == []
    else:
        await runner.run_transform(hooks, STATE, "x", validate=accept_str, propagate=False)
        assert [type(f[3]) for f in failures] == [HookRecursionError]
    assert levels == list(range(1, MAX_HOOK_DEPTH + 1))
    assert hook_depth() == 0


async def test_depth_is_per_task() -> None:
    runner = HookRunner()
    depths: list[int] = []

    async def nested(state: Any, value: Any) -> None:
        depths.append(hook_depth())
        await asyncio.sleep(0.01)

    d = define("after_create_message", "nested", nested)
    await asyncio.gather(*(runner.run_event(chain(d), STATE, i) for i in range(12)))
    assert depths == [1] * 12
    assert hook_depth() == 0


# --- helpers ------------------------------------------------------------------------------


def test_format_hook_error_cuts_trace() -> None:
    # two alternating functions, so Python does not fold the repeated frames
    def ping(n: int) -> None:
        if n == 0:
            raise ValueError("bad value")
        pong(n - 1)

    def pong(n: int) -> None:
        ping(n - 1)

    try:
        ping(200)
    except ValueError as exc:
        text = format_hook_error(exc)
    head, _, trace = text.partition("\n\nStack trace:\n")
    assert head == "ValueError: bad value"
    assert trace.startswith("Traceback (most recent call last):")
    assert len(trace.splitlines()) == 100
    assert format_hook_error(RuntimeError("x")).startswith("RuntimeError: x\n\nStack trace:\n")


def test_copy_value_is_deep() -> None:
    message = Message(id="m", role="user", content="a", metadata={"k": [1]})
    copied = copy_value(message)
    assert copied == message and copied is not message
    assert copied.metadata is not message.metadata
    nested = {"a": [1]}
    assert copy_value(nested)["a"] is not nested["a"]

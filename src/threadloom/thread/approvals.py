"""A thread's tool-call approvals (spec 14 §14.3): reading them and deciding one.

A decision is one store transaction (``Store.decide_approval``) that either records it or
refuses it and changes nothing; once no approval of the thread is pending, the engine
starts the run that runs the decided calls (``ThreadHub.resume_decided``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.errors import ApprovalForbidden, InvalidArgument
from threadloom.records import Approval, ApprovalDecision

if TYPE_CHECKING:
    from threadloom.thread.state import ThreadState


async def list_approvals(state: ThreadState, *, pending_only: bool = False) -> list[Approval]:
    found = await state.hub.store.list_approvals(state.thread_id)
    return [a for a in found if a.state == "pending"] if pending_only else found


def _check_arguments(state: ThreadState, tool: str, arguments: Any) -> None:
    """Edited arguments must pass the tool's schema (spec 14 §14.3): ``InvalidArgument``."""
    if not isinstance(arguments, dict):
        raise InvalidArgument("arguments must be a JSON object")
    resolved = state.hub.definitions.resolve_name(tool)
    target = getattr(resolved, "target", None)
    definition = getattr(target, "tool_definition", target)
    if getattr(definition, "arguments_model", None) is None:
        return  # an MCP tool: the server checks its arguments
    try:
        definition.bind_arguments(arguments)  # type: ignore[union-attr]
    except ValueError as exc:
        raise InvalidArgument(f"arguments: {exc}") from None


async def _authorize(state: ThreadState, shown: Approval, decision: ApprovalDecision) -> None:
    """The ``before_decide_approval`` hooks may refuse a decision (spec 14 §14.3 rule 6):
    one that answers ``False`` — or fails: a hook that cannot say yes says no — refuses
    it with ``ApprovalForbidden``."""
    hooks = state.hub.resolve_hooks(
        "before_decide_approval", state.agent_id, state.prompt_name, state.prompt_hooks
    )
    for hook, context in hooks:
        try:
            answer = await state.hub.hooks.call(
                hook, context, state, shown.model_copy(), decision.model_copy()
            )
        except Exception as exc:
            await state.hub.hooks.record_failure(state, hook, context, exc)
            raise ApprovalForbidden(
                f"The decision was refused: hook {hook.id} failed ({type(exc).__name__})"
            ) from None
        if answer is False:
            raise ApprovalForbidden(f"The decision was refused by hook {hook.id}")


async def decide(state: ThreadState, tool_call_id: str, decision: ApprovalDecision) -> Approval:
    """Record ``decision`` on the pending approval of ``tool_call_id``; the run goes on
    once none is pending. Refusals change nothing: ``ApprovalNotFound``,
    ``ApprovalConflict``, ``InvalidArgument``."""
    hub, tid = state.hub, state.thread_id
    shown = await hub.store.get_approval(tid, tool_call_id)
    if shown is not None:
        if decision.arguments is not None:
            _check_arguments(state, shown.tool, decision.arguments)
        await _authorize(state, shown, decision)
    async with hub.lock(tid):
        decided = await hub.store.decide_approval(tid, tool_call_id, decision)
        await hub.publish_events(decided.events)
    if decided.ready and hub.resume_decided is not None:
        await hub.resume_decided(tid)
    return decided.approval

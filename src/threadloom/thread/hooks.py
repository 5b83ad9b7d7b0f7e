"""The hook runner: calls resolved hooks with timeouts, chaining and failure handling.

Spec 03 §3.4 (chaining), §3.5 (failures, timeouts, recursion). The runner knows nothing
about ThreadState: the ``state`` argument is passed to hooks and to ``on_failure`` as is,
so the ThreadState can write the ``hook_error`` log row itself (§3.5.1 item 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import logging
import traceback
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any, Final

from pydantic import BaseModel

from threadloom.define.hook import (
    DROP,
    DROP_HOOK_NAMES,
    RUNTIME_DEFAULT,
    HookContext,
    HookDefinition,
)
from threadloom.errors import HookRecursionError, HookTimeout

logger = logging.getLogger("threadloom.hooks")

#: Deepest allowed nesting of hook calls within one task; the next call fails (§3.5.5).
MAX_HOOK_DEPTH: Final = 8
#: Lines of traceback kept in a hook error row (§3.5.1 item 2).
MAX_TRACE_LINES: Final = 100

OnFailure = Callable[[Any, HookDefinition, HookContext, BaseException], Awaitable[None]]
Validate = Callable[[Any, Any, HookDefinition], Any]
ArgsBuilder = Callable[[Any], tuple[Any, ...]]
ResolvedHooks = Sequence[tuple[HookDefinition, HookContext]]

_depth: ContextVar[int] = ContextVar("threadloom_hook_depth", default=0)


def hook_depth() -> int:
    """How many hook calls enclose the caller in the current task (0 outside any hook)."""
    return _depth.get()


def format_hook_error(exc: BaseException) -> str:
    """The ``error`` column of a hook error row: type, message and a 100-line traceback."""
    head = f"{type(exc).__name__}: {exc}"
    lines = "".join(traceback.format_exception(exc)).rstrip("\n").splitlines()
    return head + "\n\nStack trace:\n" + "\n".join(lines[:MAX_TRACE_LINES])


def copy_value(value: Any) -> Any:
    """A deep copy the hook may mutate freely; the runtime keeps the original (§3.4 rule 3)."""
    if isinstance(value, BaseModel):
        return value.model_copy(deep=True)
    return copy.deepcopy(value)


def _wants_context(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    param = parameters.get("hook_context")
    return param is not None and param.kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


class HookRunner:
    """Runs hooks for one runtime: one call, a transform chain, or an event fan-out."""

    def __init__(
        self, default_timeout_s: float | None = 60.0, on_failure: OnFailure | None = None
    ) -> None:
        self.default_timeout_s = default_timeout_s
        self.on_failure = on_failure
        self._wants_context: dict[Any, bool] = {}

    def timeout_for(self, hook: HookDefinition) -> float | None:
        """The hook's own ``timeout_s``, else the runtime default; ``None`` means no limit."""
        if hook.timeout_s is RUNTIME_DEFAULT:
            return self.default_timeout_s
        return hook.timeout_s

    def _accepts_context(self, fn: Callable[..., Any]) -> bool:
        try:
            cached = self._wants_context.get(fn)
        except TypeError:  # unhashable callable object: inspect every time
            return _wants_context(fn)
        if cached is None:
            cached = self._wants_context[fn] = _wants_context(fn)
        return cached

    async def call(self, hook: HookDefinition, context: HookContext, *args: Any) -> Any:
        """Call one hook (sync or async) with ``args``, its timeout and the depth limit.

        Raises ``HookRecursionError`` instead of calling when this would be the ninth
        nested hook call of the task, and ``HookTimeout`` when the call runs too long.
        """
        depth = _depth.get()
        if depth >= MAX_HOOK_DEPTH:
            raise HookRecursionError(
                f"hook {hook.id} ({hook.name}) would be nested hook call {depth + 1}; "
                f"at most {MAX_HOOK_DEPTH} levels are allowed"
            )
        token = _depth.set(depth + 1)
        try:
            kwargs = {"hook_context": context} if self._accepts_context(hook.fn) else {}
            result = hook.fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await self._await_with_timeout(hook, result)
            return result
        finally:
            _depth.reset(token)

    async def _await_with_timeout(self, hook: HookDefinition, awaitable: Awaitable[Any]) -> Any:
        timeout_s = self.timeout_for(hook)
        if timeout_s is None:
            return await awaitable
        try:
            async with asyncio.timeout(timeout_s) as scope:
                return await awaitable
        except TimeoutError:
            if not scope.expired():
                raise  # the hook's own TimeoutError, not ours
            raise HookTimeout(
                f"hook {hook.id} ({hook.name}) timed out after {timeout_s:g} s"
            ) from None

    async def record_failure(
        self, state: Any, hook: HookDefinition, context: HookContext, exc: BaseException
    ) -> None:
        """Record a failure the default way (§3.5.1): a WARNING, then ``on_failure``."""
        logger.warning(
            "hook %s (id %s) failed: %s",
            hook.name,
            hook.id,
            f"{type(exc).__name__}: {exc}",
            exc_info=(type(exc), exc, exc.__traceback__),
        )
        if self.on_failure is None:
            return
        try:
            await self.on_failure(state, hook, context, exc)
        except Exception:  # recording must never break the caller's write
            logger.exception("recording the failure of hook %s (id %s) failed", hook.name, hook.id)

    async def run_transform(
        self,
        hooks: ResolvedHooks,
        state: Any,
        value: Any,
        *,
        validate: Validate,
        propagate: bool,
        args_builder: ArgsBuilder | None = None,
        allow_block: bool = False,
    ) -> Any:
        """Chain transform hooks over ``value`` and return the final value, or ``DROP``.

        Each hook gets a deep copy of the current value (via ``args_builder``, default
        ``(state, copy)``); ``None`` keeps the value; anything else goes through
        ``validate(previous, returned, hook)``, which returns the new value or raises.
        ``DROP`` from an ``after_tool_call_*`` hook ends the chain and is returned; from any
        other hook it is handed to ``validate`` like any other return. With ``propagate``
        the first failure is raised unchanged (§3.5.2); otherwise it is recorded and the
        chain goes on with the last good value (§3.5.1). With ``allow_block`` an exception
        whose ``block`` attribute is ``True`` ends the chain and is raised (§3.5.3).
        """

        def default_args(current_copy: Any) -> tuple[Any, ...]:
            return (state, current_copy)

        build = args_builder if args_builder is not None else default_args
        current = value
        for hook, context in hooks:
            try:
                returned = await self.call(hook, context, *build(copy_value(current)))
                if returned is None:
                    continue
                if returned is DROP and hook.name in DROP_HOOK_NAMES:
                    return DROP
                current = validate(current, returned, hook)
            except Exception as exc:
                if allow_block and getattr(exc, "block", False) is True:
                    with contextlib.suppress(AttributeError, TypeError):
                        exc.hook_id = hook.id  # type: ignore[attr-defined]
                    raise
                if propagate:
                    raise
                await self.record_failure(state, hook, context, exc)
        return current

    async def run_event(self, hooks: ResolvedHooks, state: Any, *args: Any) -> None:
        """Run every event hook in order with ``(state, *args)``; failures are recorded.

        Return values are ignored and a failure never stops the later hooks (§3.4 rule 4).
        """
        for hook, context in hooks:
            try:
                await self.call(hook, context, state, *args)
            except Exception as exc:
                await self.record_failure(state, hook, context, exc)

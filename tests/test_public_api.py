"""One obvious import place: what a user writes comes from ``threadloom``, the scripted test
model from ``threadloom.testing``, and every error derives from ``threadloom.ThreadloomError``
(issue 24 item 2). A prompt's ``tools`` takes the decorated function itself."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import threadloom
import threadloom.testing

TOP_LEVEL = {
    # definitions
    "Model",
    "Prompt",
    "tool",
    "hook",
    "Agent",
    "Side",
    "Subagent",
    "Subprompt",
    "SessionBinding",
    "Reasoning",
    "Immediate",
    "MCPServer",
    "Budget",
    "ToolResult",
    "Attachment",
    "HookContext",
    "ParentHook",
    "DROP",
    "Definitions",
    # running
    "Runtime",
    "Schedule",
    "ThreadState",
    "Memory",
    "EventRetention",
    "RetentionPolicy",
    "RetentionReport",
    "StaticUsers",
    "tune_gc",
    # records
    "Message",
    "ThreadStatus",
    "StatusError",
    "MemoryItem",
    # errors
    "ThreadloomError",
    "DefinitionError",
    "ProviderError",
    "ToolArgumentsError",
    "AgentNotFound",
    "ThreadNotFound",
    "MessageNotFound",
    "ThreadTerminated",
    "ThreadBusy",
    "InvalidArgument",
    "StoreError",
    "StoreLocked",
    "FileError",
    "HookBlocked",
    "MemoryConflict",
    "__version__",
}

TESTING = {
    "ScriptedProvider",
    "Reply",
    "Call",
    "Expect",
    "Fail",
    "Script",
    "ProviderError",
    "ProviderRequest",
    "SystemMessage",
    "UserMessage",
    "AssistantMessage",
    "ToolMessage",
    "png",
}


def test_the_top_level_names() -> None:
    assert set(threadloom.__all__) == TOP_LEVEL
    assert len(threadloom.__all__) == len(TOP_LEVEL)  # no name twice
    for name in threadloom.__all__:
        assert getattr(threadloom, name) is not None, name
    namespace: dict[str, Any] = {}
    exec("from threadloom import *", namespace)
    assert TOP_LEVEL - {"__version__"} <= set(namespace)


def test_the_top_level_names_are_the_definitions_themselves() -> None:
    from threadloom import define, errors, records

    for name in ("Model", "Prompt", "tool", "hook", "Agent", "Side", "ToolResult", "Attachment"):
        assert getattr(threadloom, name) is getattr(define, name)
    assert threadloom.ThreadloomError is errors.ThreadloomError
    assert threadloom.StatusError is records.StatusError


def test_the_version_is_the_package_version() -> None:
    assert threadloom.__version__ == version("threadloom")


def test_the_scripted_model_lives_in_threadloom_testing() -> None:
    assert set(threadloom.testing.__all__) == TESTING
    from threadloom.providers.scripted import ScriptedProvider

    assert threadloom.testing.ScriptedProvider is ScriptedProvider
    assert "ScriptedProvider" in (threadloom.testing.__doc__ or "")


def _public_exceptions() -> list[type[BaseException]]:
    """Every exception class a user can import: the public modules' names."""
    modules = [
        "threadloom",
        "threadloom.errors",
        "threadloom.testing",
        "threadloom.define",
        "threadloom.client",
        "threadloom.client.errors",
        "threadloom.providers",
        "threadloom.server.settings",
        "threadloom.server.serve",
        "threadloom.engine.step.model_call",
    ]
    found: dict[int, type[BaseException]] = {}
    for name in modules:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("threadloom")
            ):
                found[id(value)] = value
    return list(found.values())


def test_every_error_derives_from_one_base() -> None:
    classes = _public_exceptions()
    assert len(classes) > 40
    strays = [c.__qualname__ for c in classes if not issubclass(c, threadloom.ThreadloomError)]
    assert strays == []
    from threadloom import client
    from threadloom.client.errors import NotFoundError

    assert client.ThreadloomError is threadloom.ThreadloomError
    assert issubclass(NotFoundError, threadloom.ThreadloomError)


def test_no_module_defines_a_second_base() -> None:
    root = Path(threadloom.__file__).parent
    defining = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "class ThreadloomError" in path.read_text(encoding="utf-8")
    ]
    assert defining == ["errors.py"]


# -- tools=[the function] ---------------------------------------------------------------------


@threadloom.tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"{order_id}: shipped"


def test_c04_112_a_prompt_takes_the_tool_function_itself() -> None:
    prompt = threadloom.Prompt(name="p", model="m", tools=[lookup_order, "other"])
    assert prompt.tools == ("lookup_order", "other")
    assert prompt.given_definitions == (lookup_order,)
    assert prompt == prompt.model_copy()
    with pytest.raises(ValueError, match="tools"):
        threadloom.Prompt(name="p", model="m", tools=[42])


async def test_c04_112_a_tool_given_as_a_function_is_defined_and_called(db_url: str) -> None:
    from threadloom.testing import Call, Reply, ScriptedProvider

    model = ScriptedProvider(
        [Reply.tool_calls(Call("lookup_order", {"order_id": "A-1"})), Reply.text("It shipped.")]
    )
    definitions = threadloom.Definitions().add(
        threadloom.Model(name="m", provider=model, model="demo"),
        threadloom.Prompt(name="p", model="m", tools=[lookup_order]),  # not added on its own
        threadloom.Agent(name="a", side_a=threadloom.Side(prompt="p")),
    )
    runtime = await threadloom.Runtime.open(db_url, definitions=definitions)
    try:
        state = await runtime.create_thread("a")
        await runtime.send_message(state.thread_id, "where is A-1?")
        await runtime.wait_idle(state.thread_id, timeout=10)
        page = await state.get_messages(order="asc")
        assert [(m.role, m.content) for m in page.messages][-2:] == [
            ("tool", "A-1: shipped"),
            ("assistant", "It shipped."),
        ]
    finally:
        await runtime.close()


RUNTIME_ROOMS = (
    "threadloom.engine",
    "threadloom.node",
    "threadloom.thread",
    "threadloom.store",
    "threadloom.server",
    "threadloom.define",
    "threadloom.providers",
)


def _runtime_modules_loaded_by(code: str) -> tuple[list[str], str]:
    """The runtime's modules a fresh interpreter has loaded after ``code``, and its stdout."""
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)), file=sys.stderr)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    rooms = tuple(f"{room}." for room in RUNTIME_ROOMS)
    loaded = [m for m in done.stderr.split() if m in RUNTIME_ROOMS or m.startswith(rooms)]
    return loaded, done.stdout


def test_importing_the_client_does_not_load_the_runtime() -> None:
    loaded, _ = _runtime_modules_loaded_by("import threadloom.client")
    assert loaded == []


def test_the_version_answers_without_loading_the_runtime() -> None:
    code = (
        "import sys\nsys.argv = ['threadloom', '--version']\n"
        "from threadloom.cli import entrypoint\nentrypoint()"
    )
    loaded, stdout = _runtime_modules_loaded_by(code)
    assert (loaded, stdout) == ([], f"threadloom {threadloom.__version__}\n")


def test_the_package_face_loads_a_name_when_it_is_first_used() -> None:
    loaded, _ = _runtime_modules_loaded_by("import threadloom")
    assert loaded == []
    loaded, _ = _runtime_modules_loaded_by("from threadloom import Runtime")
    assert any(m.startswith("threadloom.engine.") for m in loaded)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        threadloom.Nothing  # noqa: B018


async def test_c17_010_the_runtime_has_its_metrics(db_url: str) -> None:
    """``Runtime.metrics`` (spec 17 §17.1): the runtime's instruments, on a registry of
    their own that the library's ``generate_latest`` reads."""
    from prometheus_client import generate_latest

    from threadloom.metrics import Metrics

    runtime = await threadloom.Runtime.open(db_url)
    try:
        assert isinstance(runtime.metrics, Metrics)
        text = generate_latest(runtime.metrics.registry).decode()
        assert "# TYPE threadloom_turns_total counter" in text
    finally:
        await runtime.close()

"""MCP servers as tool sources (spec 13 §13.4), against real MCP servers written with the
SDK's own server API (``mcp_servers/calc.py``), over stdio and over streamable HTTP, with a
real Runtime on SQLite and PostgreSQL and the scripted model calling the tools."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from threadloom import Agent, Definitions, MCPServer, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.errors import DefinitionError
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

CALC = Path(__file__).resolve().parent / "mcp_servers" / "calc.py"


def stdio(name: str = "calc", **options: Any) -> MCPServer:
    return MCPServer(name=name, command=sys.executable, args=(str(CALC),), **options)


def agent_defs(server: MCPServer, tools: list[str], model: ScriptedProvider) -> Definitions:
    return Definitions().add(
        server,
        Model(name="m", provider=model, model="scripted"),
        Prompt(name="p", model="m", system="You compute.", tools=tools),
        Agent(name="calc_agent", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )


def tool_messages(request: ProviderRequest) -> list[ToolMessage]:
    return [m for m in request.messages if isinstance(m, ToolMessage)]


def calls_then_text(*calls: Call) -> ScriptedProvider:
    """A model that makes ``calls`` in its first answer, then answers with the results."""

    def reply(request: ProviderRequest) -> Reply:
        results = tool_messages(request)
        if results:
            return Reply.text("results: " + " | ".join(m.text for m in results))
        return Reply.tool_calls(*calls)

    return ScriptedProvider(reply, max_records=None)


async def one_turn(runtime: Runtime, text: str = "go") -> list[Any]:
    """A thread of ``calc_agent``, one message, the run awaited: its messages, oldest first."""
    state = await runtime.create_thread("calc_agent")
    await runtime.send_message(state.thread_id, text)
    await runtime.wait_idle(state.thread_id, 30)
    page = await state.get_messages(limit=100)
    return list(reversed(page.messages))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_calc() -> Iterator[str]:
    """``calc.py`` serving streamable HTTP (token ``s3cret``); its URL."""
    port = free_port()
    proc = start_http_calc(port, CALC_TOKEN="s3cret")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def start_http_calc(port: int, **env: str) -> subprocess.Popen[bytes]:
    """``calc.py`` serving streamable HTTP on ``port``, once it answers."""
    proc = subprocess.Popen(
        [sys.executable, str(CALC), "http", str(port)],
        env={**_env(), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.TransportError:
            if proc.poll() is not None:
                raise AssertionError("the MCP HTTP server exited") from None
            time.sleep(0.05)
    return proc


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}


async def test_c13_020_c13_023_stdio_server_tools_in_a_full_turn(db_url: str) -> None:
    """All of a stdio server's tools by the server's name, each with the server's input
    schema; the model calls one, the result is stored and reaches the next request."""
    model = calls_then_text(Call("greet", {"name": "Ada"}))
    server = stdio(env={"CALC_GREETING": "Good morning"})
    runtime = await Runtime.open(db_url, definitions=agent_defs(server, ["calc"], model))
    try:
        messages = await one_turn(runtime)
    finally:
        await runtime.close()
    first, second = model.requests
    offered = {tool.name: tool for tool in first.tools}
    assert list(offered) == ["add", "divide", "greet", "wait", "crash"]
    assert offered["add"].parameters["properties"] == {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    }
    assert offered["add"].parameters["required"] == ["a", "b"]
    assert offered["greet"].description == "Greet someone with the server's greeting."
    (result,) = tool_messages(second)
    assert result.text == "Good morning, Ada!" and not result.is_error
    roles = [(m.role, m.content, m.tool_status) for m in messages]
    assert roles[0] == ("user", "go", None)
    assert roles[2] == ("tool", "Good morning, Ada!", "success")
    assert roles[3] == ("assistant", "results: Good morning, Ada!", None)


async def test_c13_021_c13_022_http_server_with_headers_and_one_tool(
    db_url: str, http_calc: str
) -> None:
    """A streamable HTTP server reached with the declared headers; ``server:tool`` offers
    that tool alone."""
    model = calls_then_text(Call("add", {"a": 20, "b": 22}))
    server = MCPServer(name="calc", url=http_calc, headers={"Authorization": "Bearer s3cret"})
    runtime = await Runtime.open(db_url, definitions=agent_defs(server, ["calc:add"], model))
    try:
        messages = await one_turn(runtime)
    finally:
        await runtime.close()
    first, second = model.requests
    assert [tool.name for tool in first.tools] == ["add"]
    assert [m.text for m in tool_messages(second)] == ["42"]
    assert messages[-1].content == "results: 42"


async def test_c13_022_an_unknown_tool_of_a_server_is_a_definition_error(db_url: str) -> None:
    model = calls_then_text()
    defs = agent_defs(stdio(), ["calc:cube"], model)
    with pytest.raises(DefinitionError) as raised:
        await Runtime.open(db_url, definitions=defs)
    assert 'Prompt "p": MCP server "calc" has no tool "cube"' in str(raised.value)


async def test_c13_024_c13_026_error_results_and_the_call_timeout(db_url: str) -> None:
    """An MCP error result is a tool result with tool_status "error" (its text kept); a call
    that outlasts the server's timeout is an error result saying so."""
    model = calls_then_text(Call("divide", {"a": 1, "b": 0}), Call("wait", {"seconds": 30}))
    defs = agent_defs(stdio(timeout=1.0), ["calc"], model)
    runtime = await Runtime.open(db_url, definitions=defs)
    started = time.monotonic()
    try:
        messages = await one_turn(runtime)
    finally:
        await runtime.close()
    assert time.monotonic() - started < 20
    results = [(m.name, m.tool_status, m.content) for m in messages if m.role == "tool"]
    (divide, wait) = results
    assert divide[:2] == ("divide", "error") and "division by zero" in divide[2]
    assert wait == (
        "wait",
        "error",
        'Failed to execute tool: MCP server "calc": tool wait timed out after 1 s',
    )
    assert [m.is_error for m in tool_messages(model.requests[-1])] == [True, True]


async def test_c13_025_a_server_that_cannot_start_is_a_definition_error(db_url: str) -> None:
    """Both failures are reported at once, each naming its server; nothing is left open."""
    broken = MCPServer(name="broken", command="/nonexistent/threadloom-mcp-server")
    silent = MCPServer(name="silent", command=sys.executable, args=("-c", "pass"))
    defs = Definitions().add(
        broken,
        silent,
        Model(name="m", provider=ScriptedProvider(), model="scripted"),
        Prompt(name="p", model="m", system="s", tools=["broken", "silent"]),
        Agent(name="a", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )
    with pytest.raises(DefinitionError) as raised:
        await Runtime.open(db_url, definitions=defs)
    lines = raised.value.problems
    assert any(
        line.startswith('defined in code: MCP server "broken" could not start: FileNotFoundError')
        for line in lines
    ), lines
    assert any(
        line.startswith('defined in code: MCP server "silent" could not start:') for line in lines
    ), lines


async def test_c13_027_one_session_per_runtime_reopened_after_a_failure(db_url: str) -> None:
    """Calls share the session the runtime opened; when the server dies the call that saw
    it is an error result, and the next call opens a new session."""
    answers = iter(
        [
            Reply.tool_calls(Call("add", {"a": 1, "b": 1})),
            Reply.tool_calls(Call("crash", {})),
            Reply.tool_calls(Call("add", {"a": 2, "b": 2})),
            Reply.text("done"),
        ]
    )
    model = ScriptedProvider(lambda request: next(answers), max_records=None)
    runtime = await Runtime.open(db_url, definitions=agent_defs(stdio(), ["calc"], model))
    try:
        assert runtime.mcp is not None
        session = runtime.mcp.sessions["calc"]
        assert session.opened == 1
        messages = await one_turn(runtime)
        opened = session.opened
    finally:
        await runtime.close()
    results = [(m.name, m.tool_status, m.content) for m in messages if m.role == "tool"]
    assert results[0] == ("add", "success", "2")
    assert results[1][:2] == ("crash", "error")
    assert "the connection was lost" in results[1][2]
    assert results[2] == ("add", "success", "4")
    assert opened == 2


async def test_c13_110_a_call_after_the_server_lost_the_session_is_made_on_a_new_one(
    db_url: str,
) -> None:
    """C13-110: a stateful HTTP server restarted after the runtime opened its session (it
    answers 404 to the old session's id and runs nothing) → the call is made once more on a
    new session and succeeds; later calls use that session."""
    port = free_port()
    proc = start_http_calc(port, CALC_LEGACY="1")
    model = calls_then_text(Call("add", {"a": 2, "b": 3}))
    server = MCPServer(name="calc", url=f"http://127.0.0.1:{port}/mcp")
    runtime = await Runtime.open(db_url, definitions=agent_defs(server, ["calc:add"], model))
    try:
        assert runtime.mcp is not None
        session = runtime.mcp.sessions["calc"]
        assert session.opened == 1
        proc.terminate()
        await asyncio.to_thread(proc.wait, 10)  # the loop goes on: heartbeats (PostgreSQL)
        proc = await asyncio.to_thread(start_http_calc, port, CALC_LEGACY="1")
        messages = await one_turn(runtime)
        again = await one_turn(runtime)
        opened = session.opened
    finally:
        await runtime.close()
        proc.terminate()
        proc.wait(timeout=10)
    results = [(m.name, m.tool_status, m.content) for m in messages + again if m.role == "tool"]
    assert results == [("add", "success", "5"), ("add", "success", "5")]
    assert opened == 2


async def test_c13_028_an_mcp_server_found_in_a_project_folder(db_url: str, tmp_path: Path) -> None:
    """``MCPServer`` is importable from ``threadloom`` and a module-level one in a project
    file is registered like a tool."""
    project = tmp_path / "project"
    for folder in ("models", "tools", "prompts", "agents"):
        (project / folder).mkdir(parents=True)
    (project / "tools" / "calc.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            from threadloom import MCPServer

            calc = MCPServer(name="calc", command=sys.executable, args=[{str(CALC)!r}])
            """
        )
    )
    (project / "models" / "m.py").write_text(
        "from threadloom.define import Model\n"
        "from threadloom.providers.scripted import ScriptedProvider\n"
        "m = Model(name='m', provider=ScriptedProvider(), model='scripted')\n"
    )
    (project / "prompts" / "p.py").write_text(
        "from threadloom.define import Prompt\n"
        "p = Prompt(name='p', model='m', system='s', tools=['calc:greet', 'calc:add'])\n"
    )
    (project / "agents" / "a.py").write_text(
        "from threadloom import Agent, Side\n"
        "a = Agent(name='a', side_a=Side(prompt='p'), side_b=Side(label='User'))\n"
    )
    runtime = await Runtime.open(db_url, project=project)
    try:
        defs = runtime.definitions
        server = defs.mcp_server("calc")
        assert server is not None and defs.origin_of(server) == "tools/calc.py"
        assert [t.name for t in defs.offered_tools("p")] == ["greet", "add"]
    finally:
        await runtime.close()


def test_c13_029_declaration_problems_are_reported_with_the_others() -> None:
    defs = Definitions().add(
        MCPServer(name="both", command="x", url="http://h/mcp"),
        MCPServer(name="neither"),
        MCPServer(name="bad url", url="ftp://h"),
        MCPServer(name="slow", command="x", timeout=0),
        Model(name="m", provider=ScriptedProvider(), model="scripted"),
        Prompt(name="p", model="m", system="s", tools=["nowhere:add"]),
    )
    problems = defs.problems()
    assert (
        'defined in code: MCP server "both": give either command (stdio) or url (HTTP)' in problems
    )
    assert (
        'defined in code: MCP server "neither": give either command (stdio) or url (HTTP)'
        in problems
    )
    assert 'defined in code: MCP server name "bad url" is invalid' in problems
    assert (
        'defined in code: MCP server "bad url": url must start with http:// or https://' in problems
    )
    assert 'defined in code: MCP server "slow": timeout must be a number of seconds > 0' in problems
    assert 'defined in code: Prompt "p": tool "nowhere:add" is not defined' in problems


def test_c13_024_a_result_of_blocks_becomes_text_and_files() -> None:
    """The conversion of an MCP result: text blocks joined, images as attachments,
    structured content when there is no text, isError as an error result."""
    from mcp import types

    from threadloom.engine.mcp_sessions import tool_result

    image = types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")
    both = types.CallToolResult(
        content=[types.TextContent(type="text", text="one"), image],
        structured_content={"ignored": True},
    )
    converted = tool_result("draw", both)
    assert (converted.status, converted.result) == ("success", "one")
    (attachment,) = converted.attachments
    assert (attachment.name, attachment.mime_type) == ("draw-2.png", "image/png")
    only_data = types.CallToolResult(content=[], structured_content={"total": 3})
    assert json.loads(tool_result("sum", only_data).result or "") == {"total": 3}
    failed = types.CallToolResult(
        content=[types.TextContent(type="text", text="no such order")], is_error=True
    )
    assert (tool_result("find", failed).status, tool_result("find", failed).error) == (
        "error",
        "no such order",
    )


@pytest.mark.sqlite_only  # the command's own store: a file of the test
@pytest.mark.parametrize("command", ["serve", "run"])
def test_c13_048_the_cli_reports_a_server_that_cannot_start_in_one_line(
    tmp_path: Path, command: str
) -> None:
    """Not as a failed ASGI lifespan with uvicorn's traceback: the project's findings and
    exit 2, and ``serve`` neither printed its banner nor listened."""
    from test_cli_run import run_cli

    project = tmp_path / "project"
    files = {
        "tools/servers.py": "from threadloom import MCPServer\n"
        "calc = MCPServer(name='calc', command='/nonexistent/threadloom-mcp-server')\n",
        "models/m.py": "from threadloom.define import Model\n"
        "from threadloom.providers.scripted import ScriptedProvider\n"
        "m = Model(name='m', provider=ScriptedProvider(), model='scripted')\n",
        "prompts/p.py": "from threadloom.define import Prompt\n"
        "p = Prompt(name='p', model='m', system='s', tools=['calc'])\n",
        "agents/a.py": "from threadloom import Agent, Side\n"
        "a = Agent(name='a', side_a=Side(prompt='p'), side_b=Side(label='User'))\n",
    }
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = ["--port", str(port)] if command == "serve" else ["-m", "hi"]
    done = run_cli(command, str(project), *args, "--store", "sqlite:///c.db", cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output and "lifespan" not in output, output
    lines = done.stderr.splitlines()
    assert lines[0] == "The project does not load:", output
    assert lines[1].startswith(
        '  tools/servers.py: MCP server "calc" could not start: FileNotFoundError'
    ), output
    assert "Uvicorn running" not in output and "web UI" not in output, output


async def test_c14_022_an_mcp_servers_tool_can_need_approval(db_url: str) -> None:
    """C14-022: ``MCPServer(requires_approval=("add",))`` → a call of ``add`` parks the run
    (nothing sent to the server) while ``greet`` of the same response runs at once; the
    approve runs ``add`` on the server once and the model gets its result."""
    model = calls_then_text(Call("greet", {"name": "Ada"}), Call("add", {"a": 2, "b": 3}))
    server = stdio(requires_approval=("add",))
    runtime = await Runtime.open(db_url, definitions=agent_defs(server, ["calc"], model))
    try:
        state = await runtime.create_thread("calc_agent")
        await runtime.send_message(state.thread_id, "go")
        await runtime.wait_idle(state.thread_id, 30)
        assert (await state.status()).reason == "awaiting_approval"
        [pending] = await state.get_approvals()
        assert (pending.tool, pending.arguments) == ("add", {"a": 2, "b": 3})
        page = await state.get_messages(limit=100, order="asc")
        assert [m.content for m in page.messages if m.role == "tool"] == ["Hello, Ada!"]
        await state.decide_approval(
            pending.tool_call_id, approve=True, arguments_hash=pending.arguments_hash
        )
        await runtime.wait_idle(state.thread_id, 30)
        page = await state.get_messages(limit=100, order="asc")
    finally:
        await runtime.close()
    assert [m.content for m in page.messages if m.role == "tool"] == ["Hello, Ada!", "5"]
    assert page.messages[-1].content == "results: Hello, Ada! | 5"

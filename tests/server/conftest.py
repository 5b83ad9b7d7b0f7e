"""Black-box fixtures for the HTTP API: a real uvicorn server on 127.0.0.1 serving a real
Runtime on a SQLite file, talked to with httpx (spec 08 conformance fixtures).

Agents: ``echo`` (side A on a scripted model answering ``echo: <last user text>``, side B
human), ``bot_only`` (no human side) and ``gate`` (like ``echo``, but each model request waits
until the test opens the gate). Users ``alice`` and ``bob`` (role user), ``root`` (admin) and
``apiu`` (role api) are rows of the store, each with an API key (``api.keys``); the server
resolves credentials through the store (``StoreCredentials``). ``with_keys=False`` creates
no user at all, so a loopback server in ``auth="auto"`` runs in local development mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import pytest
import uvicorn

from threadloom import Agent, Definitions, Runtime, Side, ThreadState
from threadloom.define import Model, Prompt, SessionBinding, Subagent, hook, tool
from threadloom.engine.options import EngineOptions
from threadloom.errors import UsernameTaken
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage, UserMessage
from threadloom.records import UserHandle
from threadloom.server.app import ThreadloomApp, create_app
from threadloom.server.auth.accounts import issue_api_key, new_user
from threadloom.server.auth.passwords import hash_password
from threadloom.server.auth.principal import Principal
from threadloom.server.settings import ServerSettings, StreamSettings


def fixture_user(username: str, role: Literal["admin", "user", "api"], suffix: str) -> Principal:
    """A fixture user with a fixed id (stored as a user row with an API key by the harness)."""
    return Principal(
        id=f"5e2b7c1a-0000-4000-8000-{suffix:0>12}",
        username=username,
        role=role,
        auth_type="api_key",
        has_user_row=True,
    )


USERS = {
    "alice": fixture_user("alice", "user", "a11c"),
    "bob": fixture_user("bob", "user", "b0b"),
    "root": fixture_user("root", "admin", "ad"),
    "apiu": fixture_user("apiu", "api", "a9"),
}


def stream_settings(**stream: Any) -> ServerSettings:
    """Settings of an ``auth="required"`` server whose sockets use these ``StreamSettings``
    (short heartbeats, small buffers, quick re-checks)."""
    return ServerSettings(auth="required", stream=StreamSettings(**stream))


def last_user_text(request: ProviderRequest) -> str:
    last = next((m for m in reversed(request.messages) if isinstance(m, UserMessage)), None)
    return last.text if last is not None else ""


@dataclass
class Gate:
    """Holds every model request of the ``gate`` agent until ``open()``."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[ProviderRequest] = field(default_factory=list)

    async def reply(self, request: ProviderRequest) -> Reply:
        self.requests.append(request)
        self.entered.set()
        await self.event.wait()
        return Reply.text(f"echo: {last_user_text(request)}")

    def open(self) -> None:
        self.event.set()


@dataclass
class Probe:
    """What the ``whoami`` tool of the ``who`` agent saw: ``state.user()`` twice per call,
    with a pause in between (the ``hold`` event: the tool waits until it is set)."""

    seen: list[UserHandle | None] = field(default_factory=list)
    paused: asyncio.Event = field(default_factory=asyncio.Event)
    hold: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.hold.set()


@dataclass
class Api:
    base: str
    runtime: Runtime
    app: ThreadloomApp
    keys: dict[str, str]
    gate: Gate
    echo: ScriptedProvider
    probe: Probe
    created: list[str] = field(default_factory=list)
    """Content of each message the ``hooked`` agent's after_create_message hook saw."""
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    def client(self, user: str | None = "alice", **headers: str) -> httpx.AsyncClient:
        """A client authenticated as ``user`` (None: no credentials)."""
        all_headers = dict(headers)
        if user is not None:
            all_headers["Authorization"] = f"Bearer {self.keys[user]}"
        client = httpx.AsyncClient(base_url=self.base, headers=all_headers, timeout=30)
        self.clients.append(client)
        return client

    async def thread(self, agent: str = "echo", user: str = "alice", **body: Any) -> str:
        """Create a thread over HTTP; its id."""
        response = await self.client(user).post("/api/threads", json={"agent_id": agent, **body})
        assert response.status_code == 200, response.text
        thread_id: str = response.json()["threadId"]
        return thread_id

    async def settle(self, thread_id: str, timeout: float = 10.0) -> None:
        await self.runtime.wait_idle(thread_id, timeout)

    async def set_password(self, user: str, password: str) -> None:
        """Give a fixture user a password (hashing is slow, so only on demand)."""
        from threadloom.store.base import UserPatch

        patch = UserPatch(set_password=True, password_hash=hash_password(password))
        await self.runtime.store.update_user(USERS[user].id, patch)


async def add_users(runtime: Runtime) -> dict[str, str]:
    """The fixture users as store rows, each with one API key; name → key."""
    keys: dict[str, str] = {}
    for name, who in USERS.items():
        try:
            await runtime.store.create_user(new_user(name, who.role, user_id=who.id))
        except UsernameTaken:  # a second server on the same store: the users are there
            pass
        keys[name] = (await issue_api_key(runtime.store, who.id, f"{name}-key")).key
    return keys


def who_reply(request: ProviderRequest) -> Reply:
    """Call ``whoami`` once, then answer."""
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return Reply.text("done")
    return Reply.tool_calls(("whoami", {}))


def definitions(
    gate: Gate,
    echo: ScriptedProvider,
    probe: Probe,
    created: list[str],
    with_who: bool = False,
    extra: tuple[Any, ...] = (),
) -> Definitions:
    gated = ScriptedProvider(gate.reply)
    defs = Definitions()
    if extra:
        defs.add(*extra)

    @hook("after_create_message", id="count_created")
    def count_created(state: Any, message: Any) -> None:
        created.append(message.content)

    defs.add(
        count_created,
        Agent(
            name="hooked",
            side_a=Side(prompt="echo_prompt", label="Agent"),
            side_b=Side(label="Customer"),
            hooks=("count_created",),
        ),
    )

    @tool
    async def whoami(state: ThreadState) -> str:
        """Read the thread owner twice."""
        probe.seen.append(await state.user())
        probe.paused.set()
        await probe.hold.wait()
        probe.seen.append(await state.user())
        return "ok"

    if with_who:
        defs.add(
            whoami,
            Model(name="who_model", provider=ScriptedProvider(who_reply), model="scripted-who"),
            Prompt(name="who_prompt", model="who_model", system="You check.", tools=["whoami"]),
            Agent(
                name="who",
                side_a=Side(prompt="who_prompt", label="Agent"),
                side_b=Side(label="Customer"),
            ),
        )
    return defs.add(
        Model(name="echo_model", provider=echo, model="scripted-echo"),
        Model(name="gate_model", provider=gated, model="scripted-gate"),
        Prompt(name="echo_prompt", model="echo_model", system="You echo."),
        Prompt(name="gate_prompt", model="gate_model", system="You echo, slowly."),
        Agent(
            name="echo",
            title="Echo",
            description="Echoes the user",
            side_a=Side(prompt="echo_prompt", label="Agent"),
            side_b=Side(label="Customer"),
        ),
        Agent(
            name="bot_only",
            type="dual_ai",
            side_a=Side(prompt="echo_prompt", label="A"),
            side_b=Side(prompt="echo_prompt", label="B"),
        ),
        Agent(
            name="gate",
            side_a=Side(prompt="gate_prompt", label="Agent"),
            side_b=Side(label="Customer"),
        ),
    )


def spawn_reply(request: ProviderRequest) -> Reply:
    """The ``spawner``'s first request creates a ``helper`` child; the helper finishes at
    once; every later ``spawner`` request answers in text."""
    system = request.messages[0].text if request.messages else ""
    if "helper" in system:
        return Reply.tool_calls(Call("finish", {"summary": "done"}))
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return Reply.text("ok")
    args = {"agent": "helper", "name": "H1", "message": "help", "attachments": []}
    return Reply.tool_calls(Call("subagent_create", args))


def spawning() -> tuple[Any, ...]:
    """Definitions for ``make_api(extra=…)``: agent ``spawner`` (its run creates one
    non-blocking ``helper`` child with ``subagent_create``) and the ``dual_ai`` agent
    ``helper`` (ends its session with ``finish``; its result wakes the parent)."""

    @tool
    def finish(summary: str) -> str:
        """Finish the task with a summary."""
        return "Done."

    return (
        finish,
        Model(name="spawn_model", provider=ScriptedProvider(spawn_reply), model="scripted-spawn"),
        Prompt(
            name="spawner_prompt",
            model="spawn_model",
            system="You delegate.",
            tools=[Subagent("helper")],
        ),
        Prompt(
            name="helper_a", model="spawn_model", system="You are the helper.", tools=["finish"]
        ),
        Prompt(name="helper_b", model="spawn_model", system="You review the helper."),
        Agent(name="spawner", side_a=Side(prompt="spawner_prompt"), side_b=Side(label="Customer")),
        Agent(
            name="helper",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Helps",
            max_session_turns=3,
            side_a=Side(prompt="helper_a", session_stop=SessionBinding(name="finish")),
            side_b=Side(prompt="helper_b"),
        ),
    )


async def start_server(app: Any) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        ws="websockets-sansio",
        proxy_headers=False,  # proxies are trusted by THREADLOOM_TRUSTED_PROXIES, not uvicorn
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, task, f"http://127.0.0.1:{port}"


@pytest.fixture
async def make_api(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    started: list[tuple[Api, uvicorn.Server, asyncio.Task[None]]] = []

    async def make(
        settings: ServerSettings | None = None,
        *,
        with_keys: bool = True,
        with_who: bool = False,
        extra: tuple[Any, ...] = (),
        **runtime: Any,
    ) -> Api:
        """A server; ``with_who`` adds the ``who`` agent, whose ``whoami`` tool reads
        ``state.user()`` into ``api.probe``; ``extra`` are more definitions (agents, prompts,
        models, tools) for one test."""
        gate = Gate()
        probe = Probe()
        created: list[str] = []
        echo = ScriptedProvider(lambda request: Reply.text(f"echo: {last_user_text(request)}"))
        rt = await Runtime.open(
            db_url,
            definitions=definitions(gate, echo, probe, created, with_who, extra),
            options=EngineOptions(drain_seconds=0),
            **runtime,
        )
        keys = await add_users(rt) if with_keys else {}
        app = create_app(rt, settings or ServerSettings(auth="required"))
        server, task, base = await start_server(app)
        api = Api(base, rt, app, keys, gate, echo, probe, created)
        started.append((api, server, task))
        return api

    yield make
    for api, server, task in started:
        api.gate.open()
        api.probe.hold.set()
        for client in api.clients:
            await client.aclose()
        server.should_exit = True
        await task
        await api.runtime.close(drain=0)


@pytest.fixture
async def api(make_api: Callable[..., Any]) -> Api:
    made: Api = await make_api()
    return made

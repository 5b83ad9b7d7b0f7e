"""``threadloom`` — the command line: chat with an agent of a project in the terminal.

``threadloom run PROJECT_DIR --agent NAME`` opens (or creates) a SQLite store, creates a
thread (or resumes one with ``--thread``) and shows what the run does as it happens:
streamed text and reasoning, tool calls and their outcome, and the run status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from threadloom.cli_auth import register as register_auth_commands
from threadloom.engine.runtime import Runtime
from threadloom.errors import DefinitionError, ThreadloomError
from threadloom.thread.events import Subscription

app = typer.Typer(add_completion=False, help="Threadloom: a durable thread runtime for agents.")
console = Console(highlight=False)
errors = Console(stderr=True, highlight=False)


@app.callback()
def main() -> None:
    """Threadloom command line."""


class Renderer:
    """Turns bus events of one thread into terminal output."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.streaming: str | None = None
        self.streamed: set[str] = set()
        self.failure: str | None = None
        """Why the last run failed (its status's error), ``None`` when it did not."""

    def _end_stream(self) -> None:
        if self.streaming is not None:
            console.print()
            self.streaming = None

    def label(self, role: str, name: str | None) -> str:
        return name or ("Agent" if role == "assistant" else "You")

    def handle(self, kind: str, data: Any) -> None:
        if kind == "message_chunk":
            if self.streaming != data["message_id"]:
                self._end_stream()
                self.streaming = data["message_id"]
                self.streamed.add(data["message_id"])
                console.print(Text("… ", style="bold cyan"), end="")
            console.print(data["chunk"], end="", soft_wrap=True)
        elif kind == "reasoning_chunk":
            if self.streaming != "reasoning:" + data["message_id"]:
                self._end_stream()
                self.streaming = "reasoning:" + data["message_id"]
                console.print(Text("(thinking) ", style="dim"), end="")
            console.print(Text(data["chunk"], style="dim italic"), end="")
        elif kind == "event" and data.get("event_type") == "tool_call_started":
            self._end_stream()
            console.print(Text(f"  ⚙ {data['data']['name']} …", style="yellow"))
        elif kind == "event" and data.get("event_type") == "tool_call_done":
            status = data["data"]["status"]
            style = "green" if status == "success" else "red"
            console.print(Text(f"  ⚙ {data['data']['name']} → {status}", style=style))
        elif kind == "message":
            message = data.get("message") or {}
            if (
                message.get("status") == "completed"
                and message.get("role") in ("assistant", "user")
                and message.get("name")
            ):
                self._end_stream()
                content = message.get("content")
                if content and message.get("id") not in self.streamed:
                    console.print(Text(f"{message['name']}: ", style="bold cyan"), end="")
                    console.print(content)
        elif kind == "status":
            status = data.get("status") or {}
            state = status.get("state")
            if state == "running":
                self.failure = None
            elif state == "failed":
                self._end_stream()
                self.failure = failure_text(status)
                errors.print(Text(f"The run failed: {self.failure}", style="bold red"))
                log_id = (status.get("error") or {}).get("log_id")
                if log_id:
                    errors.print(Text(f"  details: log row {log_id}", style="dim"))
            else:
                self._end_stream()
                console.print(Text(f"[{state}: {status.get('reason')}]", style="dim"))


def failure_text(status: dict[str, Any]) -> str:
    """The one line that says why a failed run failed: its error's message, else (a store
    written before failures kept their cause) the reason code."""
    error = status.get("error") or {}
    return str(error.get("message") or status.get("reason") or "unknown cause")


async def _pump(subscription: Subscription, renderer: Renderer, done: asyncio.Event) -> None:
    async for event in subscription:
        renderer.handle(event.kind, event.data)
        if event.kind == "status" and (event.data.get("status") or {}).get("state") != "running":
            done.set()


async def _chat(
    project: Path, agent: str | None, store: str, thread_id: str | None, message: str | None
) -> str | None:
    """The chat; returns why the last run failed, ``None`` when it did not."""
    runtime = await Runtime.open(store, project=project)
    try:
        names = sorted(a.name for a in runtime.definitions.agents())
        if agent is None:
            if len(names) != 1:
                listed = ", ".join(names) or "none"
                raise typer.BadParameter(
                    f"the project has {len(names)} agents ({listed}): choose one with --agent"
                )
            agent = names[0]
        definition = runtime.definitions.agent(agent)
        if definition is None:
            listed = ", ".join(names) or "none"
            raise typer.BadParameter(
                f"agent {agent!r} is not defined in {project} (its agents: {listed})"
            )
        state = await runtime.thread(thread_id) if thread_id else await runtime.create_thread(agent)
        console.print(
            Text(f"thread {state.thread_id} · agent {agent} · store {store}", style="dim")
        )
        renderer = Renderer(definition)
        subscription = runtime.events.subscribe(state.thread_id)
        while True:
            text = message if message is not None else await asyncio.to_thread(_ask)
            if text is None or text.strip() in ("/quit", "/exit"):
                return renderer.failure
            if not text.strip():
                continue
            done = asyncio.Event()
            pump = asyncio.create_task(_pump(subscription, renderer, done))
            await runtime.send_message(state.thread_id, text)
            await runtime.wait_idle(state.thread_id)
            await asyncio.sleep(0.05)
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
            renderer._end_stream()
            if message is not None:
                return renderer.failure
    finally:
        await runtime.close(drain=5)


def _ask() -> str | None:
    try:
        return input("You: ")
    except EOFError:
        return None


@app.command()
def run(
    project: Annotated[Path, typer.Argument(help="Project folder (agents/, prompts/, …)")],
    agent: Annotated[
        str | None,
        typer.Option("--agent", "-a", help="Agent to chat with (default: the project's only one)"),
    ] = None,
    store: Annotated[str, typer.Option(help="Store URL")] = "sqlite:///threadloom.db",
    thread: Annotated[str | None, typer.Option(help="Resume this thread id")] = None,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="Send one message and exit")
    ] = None,
) -> None:
    """Chat with AGENT of the project in PROJECT in the terminal; exits with 1 when the
    last run failed (the cause is printed)."""
    configure_logging("warning", hide_run_failures=True)
    try:
        failure = asyncio.run(_chat(project, agent, store, thread, message))
    except DefinitionError as exc:
        console.print(Text(f"The project does not load:\n{exc}", style="red"))
        raise typer.Exit(2) from None
    except ThreadloomError as exc:
        console.print(Text(f"error: {exc}", style="red"))
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if failure is not None:
        raise typer.Exit(1)


class _NotRunFailures(logging.Filter):
    """Leaves out the records of failed runs (the chat shows them itself)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "threadloom_run_failed", False)


def configure_logging(level: str, *, hide_run_failures: bool = False) -> None:
    """Show the ``threadloom.*`` loggers on stderr at ``level`` (warnings: missing
    credentials, tool exceptions with their traceback, failed runs), unless the
    application configured logging itself."""
    root = logging.getLogger()
    package = logging.getLogger("threadloom")
    if root.handlers or package.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    if hide_run_failures:
        handler.addFilter(_NotRunFailures())
    package.addHandler(handler)
    package.setLevel(level.upper() if level.upper() in logging._nameToLevel else "INFO")


@app.command()
def serve(
    project: Annotated[
        Path | None, typer.Argument(help="Project folder (agents/, prompts/, …)")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = 8000,
    store: Annotated[
        str | None,
        typer.Option(
            help="Store URL: sqlite:///file.db or postgresql://user@host:5432/db"
            " (default THREADLOOM_DATABASE_URL, THREADLOOM_STORE, sqlite:///./threadloom.db)"
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Serve the REST API and the thread stream for PROJECT (spec 08–10)."""
    from threadloom.server.serve import ServeError, run_server

    configure_logging(log_level)
    try:
        run_server(project, host=host, port=port, store=store, log_level=log_level)
    except ServeError as exc:  # refused before listening (spec 10 §10.1)
        errors.print(Text(f"threadloom: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(2) from None
    except DefinitionError as exc:
        console.print(Text(f"The project does not load:\n{exc}", style="red"))
        raise typer.Exit(2) from None


# -- users and keys (spec 10 §10.13): their own module ---------------------------------------
register_auth_commands(app)


def entrypoint() -> None:
    app(prog_name="threadloom")


if __name__ == "__main__":  # pragma: no cover
    entrypoint()

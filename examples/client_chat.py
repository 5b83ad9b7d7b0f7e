"""Chat with a running Threadloom server from the terminal through ``ThreadSession``.

Start a server first (``make serve``), then::

    .venv/bin/python examples/client_chat.py                      # agent "support"
    .venv/bin/python examples/client_chat.py --agent writer_critic
    .venv/bin/python examples/client_chat.py -m "Where is order A-1001?"   # one message, exit

Each message is printed when its delivery state changes — ``sending`` (shown at once,
before the server answered), ``queued`` (the server stored it), ``streaming`` (text arriving)
and ``complete`` with its outcome — so the life of a send is visible. ``THREADLOOM_URL`` and
``THREADLOOM_TOKEN`` (an API key) are read when the options are not given; on 127.0.0.1 in
local development mode no key is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from threadloom.client import AsyncClient
from threadloom.client.chat import Message, Phase
from threadloom.client.reduce import ThreadView


def label(message: Message) -> str:
    return {"user": "You", "assistant": "Agent", "tool": "Tool"}.get(message.role, message.role)


def state_of(message: Message) -> str:
    delivery = message.delivery
    if delivery.phase is Phase.COMPLETE:
        return f"complete:{delivery.outcome.value if delivery.outcome else '?'}"
    return delivery.phase.value


def show(view: ThreadView, printed: dict[str, str]) -> None:
    """Print each visible message whose delivery state changed since the last view."""
    for message in view.visible():
        state = state_of(message)
        if printed.get(message.key) == state:
            continue
        printed[message.key] = state
        text = message.text or ", ".join(u.name for u in message.tool_uses) or ""
        print(f"[{state:>16}] {label(message)}: {text}", flush=True)


def settled(view: ThreadView, sent_key: str) -> bool:
    """The send is complete and no run is going on any more."""
    sent = view.by_key(sent_key)
    done = sent is not None and sent.delivery.phase is Phase.COMPLETE
    return done and not view.running


async def chat(url: str, token: str | None, agent: str, message: str | None) -> None:
    async with AsyncClient(url, token=token) as client:
        created = await client.threads.create(agent)
        print(f"thread {created.thread_id} · agent {agent} · {url}", flush=True)
        printed: dict[str, str] = {}
        async with client.session(created.thread_id) as session:
            waiting: dict[str, asyncio.Event] = {}

            async def watch() -> None:
                """Print every view as it comes, so ``sending`` shows before the 202."""
                async for view in session.views():
                    show(view, printed)
                    for key, event in list(waiting.items()):
                        if settled(view, key):
                            event.set()

            watcher = asyncio.create_task(watch())
            try:
                while True:
                    text = message if message is not None else await asyncio.to_thread(ask)
                    if text is None or text.strip() in ("/quit", "/exit"):
                        return
                    if not text.strip():
                        continue
                    sent = await session.send(text)
                    done = waiting.setdefault(sent.key, asyncio.Event())
                    if settled(session.view, sent.key):
                        done.set()
                    await done.wait()
                    del waiting[sent.key]
                    if message is not None:
                        return
            finally:
                watcher.cancel()


def ask() -> str | None:
    try:
        return input("You: ")
    except EOFError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("THREADLOOM_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("THREADLOOM_TOKEN"))
    parser.add_argument("--agent", default="support")
    parser.add_argument("-m", "--message", help="send one message, print the exchange, exit")
    args = parser.parse_args()
    asyncio.run(chat(args.url, args.token, args.agent, args.message))


if __name__ == "__main__":
    main()

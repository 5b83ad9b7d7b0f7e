"""The shared state in the Python client (spec 02 §2.20, spec 09 §9.9.8, C08-161) against
the real server: the stream's typed ``StateUpdatedFrame`` and a session's
``view.shared_state``."""

from __future__ import annotations

import asyncio
from typing import Any

from server.conftest import Api
from threadloom.client import AsyncClient
from threadloom.client.frames import Frame, StateUpdatedFrame
from threadloom.client.reduce import ThreadView


async def test_c08_161_the_stream_and_a_session_follow_the_shared_state(
    api: Api, client: AsyncClient
) -> None:
    """C08-161: a state written while a stream and a session are open arrives as a durable
    ``StateUpdatedFrame`` (state, version) and in the session's ``view.shared_state``; a
    second write replaces it there."""
    thread = (await client.threads.create("echo")).thread_id
    frames: list[Frame] = []

    async def read() -> None:
        async with client.stream(thread) as stream:
            async for frame in stream:
                frames.append(frame)
                if isinstance(frame, StateUpdatedFrame) and frame.version == 2:
                    return

    reader = asyncio.create_task(read())
    async with client.session(thread) as session:
        await client.threads.set_state(thread, {"todos": ["milk"]})

        def has(version: int) -> Any:
            def done(view: ThreadView) -> bool:
                shown = view.shared_state
                return shown is not None and shown.version == version

            return done

        view = await session.wait_for(has(1))
        assert view.shared_state is not None and view.shared_state.state == {"todos": ["milk"]}
        await client.threads.set_state(thread, {"todos": []})
        view = await session.wait_for(has(2))
        assert view.shared_state is not None and view.shared_state.state == {"todos": []}
    async with asyncio.timeout(10):
        await reader
    updates = [f for f in frames if isinstance(f, StateUpdatedFrame)]
    assert [(f.version, f.state) for f in updates][-1] == (2, {"todos": []})
    assert all(f.durable for f in updates)

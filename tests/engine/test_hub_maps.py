"""The hub's per-thread maps stay bounded (issue 23 item 8): the entries of idle,
unsubscribed threads go once there are more than ``IDLE_KEPT`` of them, and what the
entries are for keeps working — a warm history is still reused, a subscribed thread
still notices another writer's events, a queue still delivers."""

from __future__ import annotations

from typing import Any

from threadloom.providers.scripted import Reply

KEPT = 8


def per_thread(hub: Any) -> int:
    """Entries of the maps that used to grow with every thread that ever ran."""
    return (
        len(hub._seq)
        + len(hub._queue_empty)
        + len(hub._stale_warm)
        + len(hub._histories)
        + len(hub.registry_checked)
    )


async def test_idle_threads_entries_go_and_the_busy_ones_stay(make_chat: Any) -> None:
    chat = await make_chat(lambda request: Reply.text("ok"))
    runtime = chat.runtime
    hub = runtime.hub
    hub.IDLE_KEPT = hub._seq_cap = KEPT
    hub.warm_messages = 4  # two threads' histories: the others are evicted as they run
    watched = await chat.thread()
    subscription = runtime.events.subscribe(watched.thread_id)
    await runtime.send_message(watched.thread_id, "hello")
    await runtime.wait_idle(watched.thread_id, timeout=5)
    sizes = []
    for i in range(60):  # threads that run once and are never used again
        state = await chat.thread()
        await runtime.send_message(state.thread_id, f"q{i}")
        await runtime.wait_idle(state.thread_id, timeout=5)
        sizes.append(per_thread(hub))
    assert max(sizes) <= 6 * KEPT  # each map's idle entries: at most about twice KEPT
    assert len(hub._seq) <= 2 * KEPT + 2
    assert watched.thread_id in hub._seq  # subscribed: kept
    last = state.thread_id
    assert last in hub._seq and last in hub._warm  # warm: kept
    assert all(histories for histories in hub._histories.values())  # no empty lists

    # the last thread's next run reuses its warm history: no reload from the store
    kept = hub._warm[last]
    await runtime.send_message(last, "again")
    await runtime.wait_idle(last, timeout=5)
    assert hub._warm[last] is kept
    assert [m.content for m in kept.raw() if m.role == "user"] == ["q59", "again"]

    # the subscribed thread still notices an event number it did not see (another writer)
    seq = hub._seq[watched.thread_id]
    hub.publish(watched.thread_id, "status", seq + 2, {})
    assert watched.thread_id in hub._stale_warm
    subscription.close()


async def test_an_evicted_thread_runs_as_a_new_one(make_chat: Any) -> None:
    """A thread whose entries went is correct on its next run: it reloads its history
    and reads its queue, and sees every message."""
    chat = await make_chat(lambda request: Reply.text(f"n={len(request.messages)}"))
    runtime = chat.runtime
    hub = runtime.hub
    hub.IDLE_KEPT = hub._seq_cap = KEPT
    hub.warm_messages = 2
    first = await chat.thread()
    await runtime.send_message(first.thread_id, "one")
    await runtime.wait_idle(first.thread_id, timeout=5)
    for i in range(4 * KEPT):
        state = await chat.thread()
        await runtime.send_message(state.thread_id, f"q{i}")
        await runtime.wait_idle(state.thread_id, timeout=5)
    assert first.thread_id not in hub._seq and first.thread_id not in hub._queue_empty
    await runtime.send_message(first.thread_id, "two")
    await runtime.wait_idle(first.thread_id, timeout=5)
    page = await first.get_messages(order="asc")
    assert [m.content for m in page.messages] == ["one", "n=2", "two", "n=4"]

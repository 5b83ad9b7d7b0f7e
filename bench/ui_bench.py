"""Web UI benchmark: a thread of 10,000 messages and a list of 10,000 threads in a real
browser.

Run with ``make bench-ui`` (or ``.venv/bin/python bench/ui_bench.py --help``). It is a
benchmark, not a test: it prints its tables and exits 0.

This process seeds a fresh SQLite file through the Runtime (``examples/``): one thread of
``--messages`` messages (user and assistant turns, every tenth assistant turn a tool call
with its result) and ``--threads`` more threads. Then a ``threadloom serve`` child serves
it in local mode, and Debian's chromium (Playwright, as the browser tests launch it)
opens the pages:

- thread: from ``page.goto`` to the newest message on screen (the newest page, 100
  messages), then "older pages on demand": each scroll of the conversation to its top
  (as a person reads back; the page reads the next older page there) until the next 100
  are on screen; then ``--deep`` more, reading far back, with the number of messages in
  the DOM after each (the page keeps at most 500 loaded). Not a click on "Load older
  messages": Playwright's click first scrolls the button into view, at the top, where the
  page has already begun reading that page, then waits for the button to be enabled again
  and reads one more — two pages a click, counted against one (the button itself is
  held by tests/ui);
- list: from ``page.goto("/")`` to the first page of 50 rows, the next page ("Older"), and
  a deep page (``/?offset=<threads - 50>``);
- timeline: a real run of ``--steps`` model steps (a scripted model that calls a tool at
  each step but the last, through the Runtime: one log row and two messages a step), from
  ``page.goto("/threads/<id>#timeline")`` to every step of the run drawn in the waterfall.

Each is measured ``--repeat`` times (median and worst). Beside each the floor: the same
data from the API alone (httpx, no browser: the newest page of messages, a page of
threads, the run's log rows and messages), so the ratio shows what the page adds. Goals:
the newest page of the long thread on screen in under a second, every list page likewise,
and the timeline of the 200-step run likewise (PASS / MISS).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from _report import cpu_model, percentile, progress, table, verdict

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("THREADLOOM_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
GOAL_MS = 1000.0


async def seed(db: Path, messages: int, threads: int) -> str:
    """The long thread's id, after seeding ``db``."""
    from threadloom import Runtime

    runtime = await Runtime.open(f"sqlite:///{db}", project=ROOT / "examples")
    try:
        started = time.perf_counter()
        state = await runtime.create_thread("support", tags=["name:long thread"])
        i = 0
        while i < messages:
            if i % 20 == 19 and i + 1 < messages:
                call = f"call_{i}"
                calls = [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1"}'},
                    }
                ]
                await state.inject_message(role="assistant", content=None, tool_calls=calls)
                await state.inject_message(
                    role="tool", content='{"status": "shipped"}', tool_call_id=call
                )
                i += 2
                continue
            role = "user" if i % 2 == 0 else "assistant"
            await state.inject_message(role=role, content=f"message {i} " + "lorem ipsum " * 8)
            i += 1
        progress(f"seeded {messages} messages in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        for n in range(threads):
            await runtime.create_thread("support", tags=[f"name:thread {n}", f"batch:{n % 7}"])
        progress(f"seeded {threads} threads in {time.perf_counter() - started:.1f} s")
        return state.thread_id
    finally:
        await runtime.close()


async def seed_steps(db: Path, steps: int) -> str:
    """A thread with one real run of ``steps`` model steps (its id): each step but the last
    calls the ``step`` tool, the last answers. The agent is not in ``examples/``: served
    from there the thread reads as orphaned, which the timeline does not mind."""
    from threadloom import Agent, Definitions, Runtime, Side
    from threadloom.define import Model, Prompt, tool
    from threadloom.providers.script import Call
    from threadloom.providers.scripted import Reply, ScriptedProvider
    from threadloom.providers.types import ProviderRequest, ToolMessage

    def reply(request: ProviderRequest) -> Reply:
        done = sum(isinstance(m, ToolMessage) for m in request.messages)
        if done + 1 >= steps:
            return Reply.text(f"done after {done} tool calls")
        return Reply.tool_calls(Call("step", {"n": done + 1}))

    @tool
    def step(n: int) -> str:
        """One step of the benchmark's run."""
        return f"step {n} done"

    defs = Definitions().add(
        step,
        Model(name="bench_model", provider=ScriptedProvider(reply, record=False), model="s"),
        Prompt(name="bench_prompt", model="bench_model", system="Step.", tools=["step"]),
        Agent(name="bench_steps", side_a=Side(prompt="bench_prompt"), side_b=Side(label="User")),
    )
    runtime = await Runtime.open(f"sqlite:///{db}", definitions=defs)
    try:
        started = time.perf_counter()
        state = await runtime.create_thread("bench_steps", tags=["name:200-step run"])
        await runtime.send_message(state.thread_id, "go")
        await runtime.wait_idle(state.thread_id, timeout=600)
        progress(f"ran {steps} steps in {time.perf_counter() - started:.1f} s")
        return state.thread_id
    finally:
        await runtime.close()


def serve(db: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("THREADLOOM_")
    }
    env["THREADLOOM_NODE_ID"] = f"bench-ui-{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-m", "threadloom.cli", "serve", str(ROOT / "examples")]
    command += ["--port", str(port), "--store", f"sqlite:///{db}", "--log-level", "warning"]
    proc = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not become ready")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def row(name: str, samples: list[float], floor: list[float] | None) -> list[str]:
    med = percentile(samples, 50)
    floor_med = percentile(floor, 50) if floor else None
    return [
        name,
        f"{med:.0f}",
        f"{max(samples):.0f}",
        f"{floor_med:.1f}" if floor_med is not None else "—",
        f"{med / floor_med:.1f}x" if floor_med else "—",
    ]


def first_index(page: Any) -> int:
    """The position of the oldest message the thread page holds (its ``range``)."""
    value: int = page.evaluate("() => window.threadloom.range.first")
    return value


def measure(
    base: str, thread: str, threads: int, repeat: int, far: int, run: str, steps: int
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=base)
        page = context.new_page()
        page.set_default_timeout(30000)
        newest: list[float] = []
        for _ in range(repeat):

            def open_thread() -> None:
                page.goto(f"/threads/{thread}")
                page.locator("#stream-live[data-state=live]").wait_for()
                page.locator("li.msg").last.wait_for()

            newest.append(timed(open_thread))
        shown = page.locator("li.msg").count()
        start = first_index(page)

        def load_older() -> None:
            first = page.locator("#messages > li.msg").first.get_attribute("data-id") or ""
            page.locator("#conversation").evaluate("el => { el.scrollTop = 0; }")
            expect(page.locator("#messages > li.msg").first).not_to_have_attribute("data-id", first)

        older = [timed(load_older) for _ in range(repeat)]
        back = start - first_index(page)
        deep_pages: list[float] = []
        in_dom: list[int] = []
        for _ in range(far):
            if page.get_by_role("button", name="Load older messages").is_hidden():
                break
            deep_pages.append(timed(load_older))
            in_dom.append(page.locator("li.msg").count())

        first: list[float] = []
        for _ in range(repeat):

            def open_list() -> None:
                page.goto("/")
                page.locator("#threads-body tr[data-thread-id]").nth(49).wait_for()

            first.append(timed(open_list))
        following: list[float] = []
        for _ in range(repeat):
            label = page.locator("#threads-count").inner_text()

            def next_page(label: str = label) -> None:
                page.get_by_role("button", name="Older →").click()
                expect(page.locator("#threads-count")).not_to_have_text(label)

            following.append(timed(next_page))
        deep: list[float] = []
        for _ in range(repeat):

            def deep_page() -> None:
                page.goto(f"/?offset={threads + 1 - 50}")
                page.locator("#threads-body tr[data-thread-id]").nth(49).wait_for()

            deep.append(timed(deep_page))
        timeline: list[float] = []
        for _ in range(repeat):

            def open_timeline() -> None:
                page.goto(f"/threads/{run}#timeline")
                page.locator("#timeline li.step-llm").nth(steps - 1).wait_for()

            page.goto("/")  # a fresh document each time
            timeline.append(timed(open_timeline))
        drawn = page.locator("#timeline li.step-llm").count()
        browser.close()

    api_messages: list[float] = []
    api_threads: list[float] = []
    api_deep: list[float] = []
    api_run: list[float] = []
    with httpx.Client(base_url=base) as client:
        for _ in range(repeat):

            def read_run() -> None:
                logs: dict[str, str | int] = {"timing": "true", "order": "desc", "limit": 1000}
                client.get(f"/api/threads/{run}/logs", params=logs).raise_for_status()
                messages: dict[str, str | int] = {
                    "limit": 1000,
                    "depth": 16,
                    "includeSilent": "true",
                }
                client.get(f"/api/threads/{run}/messages", params=messages).raise_for_status()

            api_run.append(timed(read_run))
            api_messages.append(
                timed(lambda: client.get(f"/api/threads/{thread}/messages").raise_for_status())
            )
            api_threads.append(timed(lambda: client.get("/api/threads").raise_for_status()))
            api_deep.append(
                timed(
                    lambda: client.get(
                        "/api/threads", params={"offset": threads + 1 - 50, "limit": 50}
                    ).raise_for_status()
                )
            )

    print()
    print(
        f"Thread of the long history: {shown} messages on screen first, {back} older ones "
        f"read with {repeat} scrolls to the top, then {len(deep_pages)} more pages "
        f"back with at most {max(in_dom, default=0)} messages in the DOM; the list holds "
        f"{threads + 1} threads."
    )
    print()
    headers = ["view", "median ms", "worst ms", "API alone ms", "ratio"]
    rows = [
        row("thread: newest page on screen", newest, api_messages),
        row("thread: each older page", older, api_messages),
        row(f"thread: older pages, {len(deep_pages)} more back", deep_pages or [0.0], api_messages),
        row("list: first page (50 rows)", first, api_threads),
        row("list: next page", following, api_threads),
        row(f"list: deep page (offset {threads + 1 - 50})", deep, api_deep),
        row(f"timeline: a {steps}-step run drawn", timeline, api_run),
    ]
    print(table(headers, rows))
    print()
    # the first repeat is the cold load (an empty browser cache, the server's first read)
    each = ", ".join(f"{ms:.0f}" for ms in newest)
    print(f"thread: newest page on screen, each repeat in order (ms): {each}")
    print(f"timeline: each repeat in order (ms): {', '.join(f'{ms:.0f}' for ms in timeline)}")
    print()
    worst_list = max(max(first), max(following), max(deep))
    print(
        f"goal: the newest page of the long thread on screen and live < {GOAL_MS:.0f} ms "
        f"(worst {max(newest):.0f} ms): {verdict(max(newest) < GOAL_MS)}"
    )
    print(f"goal: only a page is read first ({shown} <= 100): {verdict(shown <= 100)}")
    print(
        f"goal: older pages on demand ({back} more after {repeat} scrolls to the top): "
        f"{verdict(back == 100 * repeat)}"
    )
    bounded = max(in_dom, default=0)
    print(
        f"goal: the DOM stays bounded reading far back (at most {bounded} messages after "
        f"{len(deep_pages)} more pages, <= 500): {verdict(bool(deep_pages) and bounded <= 500)}"
    )
    print(
        f"goal: every list page on screen < {GOAL_MS:.0f} ms (worst {worst_list:.0f} ms): "
        f"{verdict(worst_list < GOAL_MS)}"
    )
    print(
        f"goal: the timeline of a {steps}-step run on screen < {GOAL_MS:.0f} ms, every step "
        f"drawn ({drawn} model calls; worst {max(timeline):.0f} ms): "
        f"{verdict(max(timeline) < GOAL_MS and drawn == steps)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--deep", type=int, default=20, help="pages read further back")
    parser.add_argument("--steps", type=int, default=200, help="model steps of the timed run")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: apt-get install -y chromium (as root)")
        return
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as folder:
        db = Path(folder) / "ui.db"
        thread = asyncio.run(seed(db, args.messages, args.threads))
        run = asyncio.run(seed_steps(db, args.steps))
        port = free_port()
        proc = serve(db, port)
        try:
            print(f"bench-ui: {cpu_model()}, {os.cpu_count()} cores; chromium {CHROMIUM}")
            print(f"{args.messages} messages in one thread, {args.threads} other threads")
            base = f"http://127.0.0.1:{port}"
            measure(base, thread, args.threads, args.repeat, args.deep, run, args.steps)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()

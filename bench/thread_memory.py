"""Where an active thread's memory goes, and what the collector does, at N concurrent
threads (issue 40): a diagnostic, not a benchmark with goals.

The peer bench's concurrent scenario on one process — ``Runtime.open`` on a SQLite file,
the chat agent of bench/_workload.py at ``--latency`` per model call, ``--threads``
threads × 3 turns gathered (each thread's turns in order) — sampled once two thirds of
the turns are done (about the peak of the peer bench's RSS). Printed, per thread (over
the RSS of the runtime open with no thread):

- the RSS (``VmRSS``) at the sample and its peak (``VmHWM``);
- how the process's memory splits there: pymalloc's arenas (``sys._debugmallocstats``:
  bytes in allocated blocks, free blocks in used pools, empty pools, arenas), glibc's
  heaps (``mallinfo2`` and ``malloc_info``: in use and free, on the main arena and on the
  arenas of other threads — the store's worker threads allocate there whatever they
  build above 512 bytes, SQLite's pages included);
- the objects the collector tracks, by type (the largest);
- the collector's work over the whole run (``gc.callbacks``): collections and their CPU by
  generation, and the objects promoted to the oldest generation per turn (what makes
  the full collections come: CPython 3.11 runs one once those promoted since the last
  exceed a quarter of the objects that survived it).

``--trace`` adds ``tracemalloc`` (slower; its own memory is not counted in the Python
heap it reports): the traced heap per thread at the sample and the largest allocators by
the first frame in threadloom.

    cd /tmp && PYTHONPATH=<worktree>/src <worktree>/.venv/bin/python \\
        <worktree>/bench/thread_memory.py --threads 1000 [--trace]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import os
import re
import sys
import tempfile
import time
import tracemalloc
import types
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _workload import make_definitions, one_turn
from threadloom import Runtime

KIB = 1024


def status(field: str) -> int:
    """A ``/proc/self/status`` field, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * KIB
    return 0


class Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = Mallinfo2
_libc.fdopen.restype = ctypes.c_void_p
_libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
_libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
_libc.fclose.argtypes = [ctypes.c_void_p]


def glibc() -> dict[str, int]:
    """glibc's heaps: ``mallinfo2`` (all arenas) and, from ``malloc_info``, the main
    arena's and the other arenas' bytes in use and free."""
    info = _libc.mallinfo2()
    out = {
        "heap bytes (sbrk + arenas' mmaps)": info.arena,
        "in use": info.uordblks,
        "free in heaps": info.fordblks,
        "mmapped blocks": info.hblkhd,
    }
    # malloc_info(0, FILE*) writes XML; through a temporary file
    with tempfile.TemporaryFile() as tmp:
        fp = _libc.fdopen(os.dup(tmp.fileno()), b"w")
        _libc.malloc_info(0, fp)
        _libc.fclose(fp)
        tmp.seek(0)
        xml = tmp.read().decode()
    heaps = re.findall(r'<heap nr="(\d+)">(.*?)</heap>', xml, re.S)
    main_total = other_total = main_free = other_free = 0
    for nr, body in heaps:
        chunks = re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', body)
        free = sum(int(x) for x in chunks)
        current = re.search(r'<system type="current" size="(\d+)"', body)
        total = int(current.group(1)) if current else 0
        if nr == "0":
            main_total, main_free = total, free
        else:
            other_total += total
            other_free += free
    out["main arena: system"] = main_total
    out["main arena: free"] = main_free
    out["other arenas: system"] = other_total
    out["other arenas: free"] = other_free
    out["other arenas: count"] = max(0, len(heaps) - 1)
    return out


def pymalloc() -> dict[str, int]:
    """pymalloc's arenas from ``sys._debugmallocstats`` (written to stderr)."""
    r, w = os.pipe()
    saved = os.dup(2)
    os.dup2(w, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(w)
    with os.fdopen(r) as f:
        text = f.read()

    def grab(label: str) -> int:
        m = re.search(re.escape(label) + r"\s*=\s*([\d,]+)", text)
        return int(m.group(1).replace(",", "")) if m else 0

    return {
        "arenas": int(m.group(1).replace(",", ""))
        if (m := re.search(r"arenas \* \d+ bytes/arena\s*=\s*([\d,]+)", text))
        else 0,
        "allocated blocks": grab("# bytes in allocated blocks"),
        "free blocks in used pools": grab("# bytes in available blocks"),
        "empty pools": grab("unused pools * 16384 bytes") or grab("unused pools * 4096 bytes"),
        "pool headers": grab("# bytes lost to pool headers"),
        "quantization": grab("# bytes lost to quantization"),
        "arena alignment": grab("# bytes lost to arena alignment"),
    }


def containers(objects: list[Any]) -> Counter[tuple[str, str]]:
    """Lists and dictionaries held in an attribute of a tracked object, by the holder's
    type and attribute, empty or not (``--holders``)."""
    out: Counter[tuple[str, str]] = Counter()
    skip = (type, type(sys), type(containers))
    for o in objects:
        if isinstance(o, skip):
            continue
        cls = type(o)
        items: list[tuple[str, Any]] = []
        try:
            d = o.__dict__ if not isinstance(o, dict) else None
        except Exception:
            d = None
        if type(d) is dict:
            items.extend(d.items())
        for klass in cls.__mro__:
            for slot in klass.__dict__.get("__slots__", ()) or ():
                if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                    try:
                        items.append((slot, object.__getattribute__(o, slot)))
                    except (AttributeError, TypeError):
                        pass
        for key, value in items:
            kind = type(value)
            if kind is list or kind is dict or kind is set:
                state = "empty" if not value else "items"
                out[(f"{cls.__qualname__}.{key}", f"{kind.__name__} {state}")] += 1
    return out


_HELPERS = ("records/trusted.py", "records/ids.py", "store/core/codec.py")
"""Allocators whose callers tell more (``--trace``): both are printed."""


def _short(frame: Any) -> str:
    name = frame.filename.split("/threadloom/")[-1].split("site-packages/")[-1]
    return f"{name}:{frame.lineno}"


def _kind(o: Any) -> str:
    """An object's type; a coroutine's with its function."""
    kind = type(o)
    if kind is _COROUTINE:
        return f"coroutine {o.cr_code.co_qualname}"
    if kind is _METHOD:
        return f"method {getattr(o.__func__, '__qualname__', '?')}"
    if kind is _BUILTIN:
        return f"builtin {type(o.__self__).__qualname__}.{o.__name__}"
    if kind is _FUNCTION:
        return f"function {o.__qualname__}"
    return kind.__qualname__


_METHOD = types.MethodType
_BUILTIN = types.BuiltinMethodType
_FUNCTION = types.FunctionType
_COROUTINE = types.CoroutineType
_CELL = types.CellType


def _held_cells(objects: list[Any]) -> Counter[str]:
    """The cells among ``objects``, by the function or coroutine among them holding them."""
    cells = {id(o) for o in objects if type(o) is _CELL}
    out: Counter[str] = Counter()
    for o in objects:
        kind = type(o)
        if kind is _FUNCTION:
            held = [c for c in o.__closure__ or () if id(c) in cells]
        elif kind is _COROUTINE:
            held = [r for r in gc.get_referents(o) if id(r) in cells]
        else:
            continue
        for cell in held:
            out[_kind(o)] += 1
            cells.discard(id(cell))
    out["?"] += len(cells)
    return out


def _held_lists(objects: list[Any]) -> Counter[str]:
    """The lists among ``objects``, by what holds them among ``objects``: an attribute
    (``Type.name``, through its instance dictionary or a slot), a dictionary's key, or
    the holder's type; ``empty`` when they are."""
    lists = {id(o): o for o in objects if type(o) is list}
    out: Counter[str] = Counter()
    owners: dict[int, Any] = {}
    for o in objects:
        d = None
        try:
            d = o.__dict__ if type(o) is not dict and not isinstance(o, type) else None
        except Exception:
            pass
        if type(d) is dict:
            owners[id(d)] = o
    for o in objects:
        if type(o) is dict:
            for key, value in o.items():
                if id(value) in lists:
                    owner = owners.get(id(o))
                    name = type(owner).__qualname__ if owner is not None else "dict"
                    out[f"{name}.{key} {'empty' if not value else ''}"] += 1
                    lists.pop(id(value))
        elif type(o) is _COROUTINE and o.cr_frame is not None:
            for key, value in o.cr_frame.f_locals.items():
                if id(value) in lists:
                    where = f"{o.cr_code.co_qualname}: {key}"
                    out[f"coroutine {where} {'empty' if not value else ''}"] += 1
                    lists.pop(id(value))
        elif type(o) is not list:
            for r in gc.get_referents(o):
                if id(r) in lists:
                    out[f"{type(o).__qualname__} (ref) {'empty' if not r else ''}"] += 1
                    lists.pop(id(r))
    for value in lists.values():
        out[f"? {'empty' if not value else ''}"] += 1
    return out


class Collector:
    """Times every collection (process CPU) and counts the objects promoted to the
    oldest generation: at the start of a collection of generation 1 the objects in
    generations 0 and 1 are counted; those it does not free move to generation 2."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.cpu = [0.0, 0.0, 0.0]
        self.promoted = 0
        self._t = 0.0
        self._young = 0
        self.middle: Counter[str] = Counter()
        self.lists: Counter[str] = Counter()
        self.cells: Counter[str] = Counter()
        self.holders = False
        self.sampled = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        g = info["generation"]
        if phase == "start":
            if g == 1:
                middle = gc.get_objects(1)
                self._young = len(gc.get_objects(0)) + len(middle)
                if self.count[1] % 5 == 0:  # what survived a young collection: by type
                    self.middle.update(_kind(o) for o in middle)
                    self.sampled += 1
                    if self.holders:
                        self.lists.update(_held_lists(middle))
                        self.cells.update(_held_cells(middle))
                del middle
            self._t = time.process_time()
        else:
            self.cpu[g] += time.process_time() - self._t
            self.count[g] += 1
            if g == 1:
                self.promoted += self._young - info["collected"]


async def main(args: argparse.Namespace) -> None:
    workdir = tempfile.mkdtemp(prefix="thread-memory-")
    runtime = await Runtime.open(
        f"sqlite:///{workdir}/db.sqlite",
        definitions=make_definitions(args.latency, fixed_usage=True),
    )
    gc.collect()
    base = status("VmRSS")
    base_types = Counter(type(o).__qualname__ for o in gc.get_objects())
    base_objects = base_types.total()
    base_py = pymalloc()
    base_c = glibc()
    threads = [await runtime.create_thread("chat") for _ in range(args.threads)]
    ids = [t.thread_id for t in threads]
    del threads
    gc.collect()
    total = args.threads * args.turns
    done = 0
    sample: dict[str, Any] = {}
    event = asyncio.Event()

    async def run(thread_id: str) -> None:
        nonlocal done
        for i in range(args.turns):
            await one_turn(runtime, thread_id, i)
            done += 1
            if done == total * 2 // 3:
                event.set()

    collector = Collector()
    collector.holders = args.holders
    if args.trace:
        tracemalloc.start(25)
    gc.callbacks.append(collector)
    t0 = time.perf_counter()
    c0 = time.process_time()
    tasks = [asyncio.create_task(run(t)) for t in ids]
    await event.wait()
    gc.callbacks.remove(collector)  # the sample's own work is not the turns'
    sample["rss"] = status("VmRSS")
    sample["objects"] = gc.get_objects()
    sample["py"] = pymalloc()
    sample["c"] = glibc()
    if args.trace:
        sample["trace"] = tracemalloc.take_snapshot()
        sample["traced"] = tracemalloc.get_traced_memory()[0]
    by_type = Counter(type(o).__qualname__ for o in sample["objects"])
    by_type.subtract(base_types)
    holders = containers(sample["objects"]) if args.holders else None
    n_objects = len(sample["objects"])
    del sample["objects"]
    gc.callbacks.append(collector)
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    gc.callbacks.remove(collector)
    peak = status("VmHWM")
    if args.trace:
        tracemalloc.stop()
    gc.collect()
    idle_objects = len(gc.get_objects())
    await runtime.close()

    n = args.threads
    out = sys.stdout
    print(
        f"thread_memory: {n:,} threads × {args.turns} turns at {args.latency * 1000:g} ms,"
        f" sampled at {total * 2 // 3:,} turns done; python {sys.version.split()[0]}",
        file=out,
    )
    print(
        f"RSS open, no thread: {base / 2**20:.1f} MiB;"
        f" at the sample: {sample['rss'] / 2**20:.1f} MiB"
        f" ({(sample['rss'] - base) / n / KIB:.1f} KiB/thread); peak {peak / 2**20:.1f} MiB"
        f" ({(peak - base) / n / KIB:.1f} KiB/thread)",
        file=out,
    )
    print("\nper thread at the sample, over the runtime open with no thread (KiB):", file=out)
    for name, value in sample["py"].items():
        print(f"  pymalloc {name:<36} {(value - base_py[name]) / n / KIB:8.2f}", file=out)
    for name, value in sample["c"].items():
        if name.endswith("count"):
            print(f"  glibc {name:<39} {base_c[name]} -> {value}", file=out)
        else:
            print(f"  glibc {name:<39} {(value - base_c[name]) / n / KIB:8.2f}", file=out)
    if args.trace:
        print(
            f"  tracemalloc: traced Python heap             {sample['traced'] / n / KIB:8.2f}"
            " (from the threads' creation on)",
            file=out,
        )
    print(
        f"\ntracked objects: open {base_objects:,}; at the sample {n_objects:,}"
        f" ({(n_objects - base_objects) / n:.1f}/thread); idle after the turns"
        f" {idle_objects:,} ({(idle_objects - base_objects) / n:.1f}/thread)",
        file=out,
    )
    for name, count in by_type.most_common(args.top):
        print(f"  {count / n:7.2f}  {name}", file=out)
    print(
        f"\nturns: wall {wall:.1f} s, CPU {cpu:.1f} s ({cpu / total * 1000:.2f} ms/turn)", file=out
    )
    for g in range(3):
        print(
            f"  collections of generation {g}: {collector.count[g]:6,},"
            f" CPU {collector.cpu[g]:6.2f} s",
            file=out,
        )
    print(
        f"  promoted to generation 2: {collector.promoted:,}"
        f" ({collector.promoted / total:.1f}/turn)",
        file=out,
    )
    if collector.sampled:
        print(
            "\nin generation 1 at the start of its collections (every 5th; they move to"
            " generation 2 unless freed), by type, per turn:",
            file=out,
        )
        for name, count in collector.middle.most_common(args.top):
            print(
                f"  {count * collector.count[1] / collector.sampled / total:7.2f}  {name}", file=out
            )
    if collector.cells:
        print("\ncells among them, by holder, per turn:", file=out)
        for name, count in collector.cells.most_common(args.top):
            share = count * collector.count[1] / collector.sampled / total
            print(f"  {share:7.2f}  {name}", file=out)
    if collector.lists:
        print("\nlists among them, by holder, per turn:", file=out)
        for name, count in collector.lists.most_common(args.top):
            print(
                f"  {count * collector.count[1] / collector.sampled / total:7.2f}  {name}", file=out
            )
    if holders is not None:
        print(
            "\nlists and dicts held in attributes at the sample, per thread"
            " (holder.attribute, kind):",
            file=out,
        )
        for (name, kind), count in holders.most_common(args.top):
            print(f"  {count / n:7.2f}  {name} {kind}", file=out)
    if args.trace:
        stats = sample["trace"].statistics("traceback")
        where: Counter[str] = Counter()
        for stat in stats:
            ours = [f for f in reversed(stat.traceback) if "threadloom" in f.filename]
            frames = ours[:1]
            if ours and ours[0].filename.endswith(_HELPERS):  # and who called the helper
                frames += [f for f in ours[1:] if not f.filename.endswith(_HELPERS)][:1]
            where[" < ".join(_short(f) for f in frames or stat.traceback[-1:])] += stat.size
        print("\nlargest allocators (innermost threadloom frame), bytes/thread:", file=out)
        for name, size in where.most_common(args.top):
            print(f"  {size / n:8.0f}  {name}", file=out)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1000)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--latency", type=float, default=0.1)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--trace", action="store_true")
    p.add_argument("--holders", action="store_true", help="lists and dicts by holder")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(p.parse_args()))

"""What both benchmarks print with: percentiles, aligned tables, verdicts, the machine."""

from __future__ import annotations

import gc
import os
import platform
import resource
import shutil
import sys
from collections.abc import Awaitable, Callable, Sequence


def percentile(samples: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile of ``samples`` by linear interpolation between ranks."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def progress(text: str) -> None:
    """One progress line on stderr (the tables go to stdout)."""
    print(text, file=sys.stderr, flush=True)


def verdict(ok: bool) -> str:
    """PASS / MISS for a goal."""
    return "PASS" if ok else "MISS"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        out = [cells[0].ljust(widths[0])]
        out += [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def cpu_model() -> str:
    """The processor's model name: ``/proc/cpuinfo`` on Linux (where ``platform`` has
    none), else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown processor"


def filesystem_of(path: str) -> str:
    """``device type mountpoint`` of the filesystem holding ``path`` (Linux), else ``?``."""
    real = os.path.realpath(path)
    best: tuple[str, str, str] | None = None
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for entry in mounts:
                parts = entry.split()
                if len(parts) < 3:
                    continue
                device, mountpoint, fstype = parts[0], parts[1], parts[2]
                inside = real == mountpoint or real.startswith(mountpoint.rstrip("/") + "/")
                if inside and (best is None or len(mountpoint) >= len(best[1])):
                    best = (device, mountpoint, fstype)
    except OSError:
        pass
    usage = shutil.disk_usage(real)
    free = f"{usage.free / 2**30:.0f} GiB free of {usage.total / 2**30:.0f} GiB"
    if best is None:
        return f"? ({free})"
    return f"{best[2]} on {best[0]} mounted at {best[1]} ({free})"


def peak_rss_mib() -> float:
    """This process's peak resident set size so far, in MiB: ``VmHWM`` where Linux has it,
    since ``ru_maxrss`` carries the parent's peak over a fork + exec; ``ru_maxrss``
    elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10  # kB
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def peak_rss_source() -> str:
    """How :func:`peak_rss_mib` measures on this machine."""
    return (
        "VmHWM of /proc/self/status (ru_maxrss would include the parent's peak)"
        if os.path.exists("/proc/self/status")
        else "getrusage ru_maxrss"
    )


def ms(ns: float) -> str:
    """Nanoseconds as milliseconds for a table cell."""
    return f"{ns / 1e6:,.2f}"


async def rotating_blocks(
    runners: Sequence[Callable[[int, int], Awaitable[None]]],
    turns: int,
    blocks: int,
    label: str,
) -> None:
    """Call every runner for ``turns`` turns each, in ``blocks`` blocks, the runners' order
    rotating per block (``runner(start, count)``), so load from elsewhere on the machine
    falls on all of them alike; a progress line per block."""
    per_block = max(1, turns // blocks)
    done = block = 0
    gc.collect()
    while done < turns:
        count = per_block if block < blocks - 1 else turns - done
        shift = block % len(runners)
        for runner in [*runners[shift:], *runners[:shift]]:
            await runner(done, count)
        done += count
        block += 1
        progress(f"  {label}: {done:,}/{turns:,} turns per side")

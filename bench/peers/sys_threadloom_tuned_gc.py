"""Threadloom with ``threadloom serve``'s garbage-collector tuning: exactly the Threadloom
system of ``sys_threadloom.py``, but once the runtime is open and the scenario's threads
exist (where a server would have finished starting) the process calls
``threadloom.tune_gc()`` — ``gc.collect``, ``gc.freeze``,
``gc.set_threshold(*GC_THRESHOLD)`` — as ``threadloom serve`` does for its own process.

Information, not a goal: the library never touches the collector, so the goals are judged
on the ``threadloom`` row, which runs with CPython's defaults as a library user's process
does. It runs the concurrent scenario only, where Threadloom is CPU-bound and the collector
takes a large share of its CPU; from empty and at a long history it would add minutes and
say little."""

from __future__ import annotations

import gc

from sys_threadloom import Threadloom

from threadloom.gc_tuning import GC_THRESHOLD, tune_gc


class ThreadloomTunedGc(Threadloom):
    name = "threadloom-tuned-gc"
    concurrent_only = "informational row, run in the concurrent scenario only"

    def started(self) -> str | None:
        tune_gc()
        return (
            f"threadloom serve's GC tuning after start: {gc.get_freeze_count():,} objects"
            f" frozen, thresholds {GC_THRESHOLD}"
        )


SYSTEM = ThreadloomTunedGc()

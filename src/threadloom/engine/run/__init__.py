"""The run: a thread's runs and their lifecycle (spec 04 §4.7–§4.10, §4.20, §4.21; spec 06).

``runtime.py`` (the :class:`Runtime`), ``runs.py`` (who runs which thread: the start gate
and the entry points), ``loop.py`` (one :class:`Run`: its steps, turns and stop
conditions), ``ending.py`` (how a run ends and is settled), ``results.py`` (a child run's
session result for its parent), ``children.py`` and ``subagents.py`` (child threads).
A run's steps are ``engine/step/``.
"""

"""One model step of a run (spec 04 §4.9.2 steps 8-12, §4.12–§4.14, §4.17).

``step.py`` (the step), ``pending.py`` (its pending model message, held back while the
request is young), ``model_call.py`` and ``stream.py`` (the model request with its retries
and fallbacks, and the reading of its stream), ``tools.py`` and ``session_tools.py`` (the
tool calls of a response), ``dispatch.py`` (one call by its kind), ``subprompt.py`` (a
prompt called as a tool: one nested step), ``threads.py`` (the worker threads of plain
``def`` tools). The request a step sends is built by ``engine/request/``.
"""

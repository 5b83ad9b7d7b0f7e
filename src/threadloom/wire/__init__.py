"""The HTTP contract, declared once (spec 08): per route group, the request and answer
models and their query parameters (``threads``, ``messages``, ``control``, ``logs``,
``files``, ``catalog``, ``auth``, ``users``, ``stream``, ``agui``), built on ``model``
(the request and answer bases, the error body), ``patterns`` and ``query``; and
``routes``, the table of every operation (method, path, models, error statuses).

The server generates ``/openapi.json`` from the table (``server/openapi.py``). This room
imports only the records floor and pydantic: never the engine, the thread floor, the store
or the server.
"""

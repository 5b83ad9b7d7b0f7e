"""The HTTP contract, declared once (spec 08): per route group, the request and answer
models and their query parameters (``threads``, ``messages``, ``control``, ``logs``,
``files``, ``catalog``, ``auth``, ``users``, ``stream``, ``agui``), built on ``model``
(the request and answer bases, the error body), ``patterns`` (accepted texts and their
checks), ``query`` and ``problems`` (a field checked by the spec's rule, with its text, and
the one mapper from a ``ValidationError`` to the 400's details); and ``routes``, the table
of every operation (method, path, models, error statuses).

The server generates ``/openapi.json`` from the table (``server/openapi.py``), parses
request bodies with these models (``server.deps.body_of``) and builds the thread, user and
auth answers with them (``Answer.to_wire``); the client reads answers with them where the
shapes are its own (``MessagePage``, ``HookEntry``, ``Ticket``). This room imports only the
records floor and pydantic: never the engine, the thread floor, the store or the server.
"""

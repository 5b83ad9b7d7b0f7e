"""The live channels (spec 09): a thread's stream over WebSocket and SSE and its log socket
(``stream.py``: the HTTP side), one subscriber's session (``session.py``), the frames and
the bounded outbox (``frames.py``), the thread-list events socket (``list_events.py``), and
how these sockets authenticate (``auth.py``, spec 10 §10.9: tickets, credentials and the
periodic re-check, over ``server/auth/``)."""

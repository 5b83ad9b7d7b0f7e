"""Who a request is (spec 10): principals and the ``Credentials`` seam (``principal.py``),
users, API keys and sessions kept in the store (``accounts.py``), password hashing
(``passwords.py``), WebSocket tickets (``tickets.py``) and the rate limits
(``ratelimit.py``). The auth routes are ``server/routes/auth.py`` and ``routes/users.py``;
stream sockets authenticate through ``server/stream/auth.py``."""

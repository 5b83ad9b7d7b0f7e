"""The model request of a step: its context and body (spec 04 §4.11, §4.12).

``context.py`` (the context a step sends: system message, history, hooks),
``context_cache.py`` (what a thread's next request can reuse), ``presentation.py`` (stored
messages as request messages), ``fragments.py``, ``request_head.py`` and
``request_body.py`` (the request body written as JSON text from its parts).
"""

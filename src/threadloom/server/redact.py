"""Keep credentials out of the server's logs (spec 10 §10.9 rule 3, §10.12 rule 2).

``?token=`` and ``?ticket=`` values in request lines are replaced by ``***`` in every
record of the uvicorn access and error loggers and of ``threadloom.server``.
"""

from __future__ import annotations

import logging
import re

_SECRET_PARAM = re.compile(r"((?:^|[?&;])(?:token|ticket)=)[^&;\s\"']*", re.IGNORECASE)
LOGGERS = ("uvicorn.access", "uvicorn.error", "threadloom.server")


def redact(text: str) -> str:
    """``text`` with the values of ``token`` and ``ticket`` query parameters as ``***``."""
    if "token=" not in text.lower() and "ticket=" not in text.lower():
        return text
    return _SECRET_PARAM.sub(r"\1***", text)


class RedactSecrets(logging.Filter):
    """Rewrites a record's message and string arguments with :func:`redact`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


def install() -> None:
    """Attach the filter to the server's loggers (once per logger)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())

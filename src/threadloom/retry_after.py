"""How long an HTTP answer asks its client to wait: ``Retry-After`` as delay-seconds or an
HTTP date (RFC 9110 §10.2.3), and the ``retry-after-ms`` some model APIs send. Shared by
the providers (a model API's 429 and 503) and the client (Threadloom's own 429 and 503)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime


def seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait, never negative; ``None`` when absent or unreadable. Header names
    match case-insensitively (``httpx.Headers`` or any mapping)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())

"""Password hashing with ``hashlib.scrypt`` (spec 10 §10.12 rule 1).

Stored form: ``scrypt$16384$8$1$<salt base64>$<key base64>``. ``verify_password`` of a
missing hash still does one full KDF run against a dummy hash, so a login answers after the
same amount of work whether the user is unknown, has no password, or typed it wrong.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets

N, R, P = 16384, 8, 1
SALT_BYTES = 16
KEY_BYTES = 64
MIN_PASSWORD_LENGTH = 12
_MAXMEM = 64 * 1024 * 1024


def _kdf(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=length, maxmem=_MAXMEM
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str) -> str:
    """A new salted scrypt hash of ``password``."""
    salt = secrets.token_bytes(SALT_BYTES)
    key = _kdf(password, salt, N, R, P, KEY_BYTES)
    return f"scrypt${N}${R}${P}${_b64(salt)}${_b64(key)}"


_DUMMY_HASH = f"scrypt${N}${R}${P}${_b64(bytes(SALT_BYTES))}${_b64(bytes(KEY_BYTES))}"


def verify_password(password: str, stored: str | None) -> bool:
    """Whether ``password`` matches ``stored``; a missing or malformed hash costs the same
    work as a real one and never matches."""
    usable = stored is not None and stored.startswith("scrypt$")
    target = stored if usable and stored is not None else _DUMMY_HASH
    try:
        _, n, r, p, salt_b64, key_b64 = target.split("$")
        salt = base64.b64decode(salt_b64)
        key = base64.b64decode(key_b64)
        candidate = _kdf(password, salt, int(n), int(r), int(p), len(key))
    except (ValueError, TypeError):
        _kdf(password, bytes(SALT_BYTES), N, R, P, KEY_BYTES)
        return False
    return hmac.compare_digest(candidate, key) and usable


async def verify_password_async(password: str, stored: str | None) -> bool:
    """``verify_password`` off the event loop (the KDF takes tens of milliseconds)."""
    return await asyncio.to_thread(verify_password, password, stored)


async def hash_password_async(password: str) -> str:
    return await asyncio.to_thread(hash_password, password)

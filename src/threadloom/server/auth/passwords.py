"""Password hashing: argon2id through argon2-cffi (spec 10 §10.12 rule 1).

New hashes are argon2id PHC strings (``$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>``,
argon2-cffi's ``PasswordHasher`` defaults, RFC 9106's second recommended profile). Hashes
of the earlier scheme, ``scrypt$16384$8$1$<salt base64>$<key base64>`` (``hashlib.scrypt``),
still verify; ``needs_rehash`` says a stored hash should be replaced — an scrypt one, or an
argon2 one made with other parameters — and a login then stores a new hash of the password
it just checked (``Store.rehash_password``).

``verify_password`` of a missing or unusable hash still does one full argon2 run against a
dummy hash, so a login answers after the same amount of work whether the user is unknown,
has no password, or typed it wrong.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_HASHER = PasswordHasher()
_DUMMY_HASH = _HASHER.hash("threadloom: no user has this password")

# The earlier scheme (verified, never written).
_SCRYPT_MAXMEM = 64 * 1024 * 1024


def hash_password(password: str) -> str:
    """A new salted argon2id hash of ``password``."""
    return _HASHER.hash(password)


def _verify_scrypt(password: str, stored: str) -> bool:
    try:
        _, n, r, p, salt_b64, key_b64 = stored.split("$")
        salt = base64.b64decode(salt_b64, validate=True)
        key = base64.b64decode(key_b64, validate=True)
        candidate = hashlib.scrypt(
            password.encode("utf-8"),
            salt=salt,
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(key),
            maxmem=_SCRYPT_MAXMEM,
        )
    except (ValueError, TypeError):
        _dummy(password)
        return False
    return hmac.compare_digest(candidate, key)


def _dummy(password: str) -> None:
    """The work of one verification, for a hash that cannot match."""
    try:
        _HASHER.verify(_DUMMY_HASH, password)
    except VerificationError:
        pass


def verify_password(password: str, stored: str | None) -> bool:
    """Whether ``password`` matches ``stored`` (argon2 or the earlier scrypt); a missing
    or malformed hash costs the same work as a real one and never matches."""
    if stored is not None and stored.startswith("$argon2"):
        try:
            return _HASHER.verify(stored, password)
        except VerifyMismatchError:
            return False
        except (InvalidHashError, VerificationError):
            _dummy(password)
            return False
    if stored is not None and stored.startswith("scrypt$"):
        return _verify_scrypt(password, stored)
    _dummy(password)
    return False


def needs_rehash(stored: str) -> bool:
    """Whether a hash that just verified should be replaced by a new argon2id hash."""
    if not stored.startswith("$argon2"):
        return True
    try:
        return _HASHER.check_needs_rehash(stored)
    except InvalidHashError:
        return True


async def verify_password_async(password: str, stored: str | None) -> bool:
    """``verify_password`` off the event loop (the KDF takes tens of milliseconds)."""
    return await asyncio.to_thread(verify_password, password, stored)


async def hash_password_async(password: str) -> str:
    return await asyncio.to_thread(hash_password, password)

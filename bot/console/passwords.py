"""Operators' passwords: hashed and checked with argon2id (argon2-cffi), imported only when a
password is hashed or checked, so no other command pays for it."""

from __future__ import annotations

import hmac


def hash_password(password: str) -> str:
    """The argon2id hash of `password` with the library's recommended cost and a random salt."""
    from argon2 import PasswordHasher

    return PasswordHasher().hash(password)


def password_matches(stored_hash: str, password: str) -> bool:
    """Whether `password` is the one `stored_hash` was made from; a malformed hash never
    matches."""
    from argon2 import PasswordHasher
    from argon2.exceptions import Argon2Error, InvalidHashError

    try:
        return PasswordHasher().verify(stored_hash, password)
    except (Argon2Error, InvalidHashError):
        return False


def token_matches(expected: str | None, given: str) -> bool:
    """A login token against the one in the environment, in constant time; an unset one never
    matches."""
    if not expected:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())

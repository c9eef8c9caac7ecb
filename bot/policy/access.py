"""Pairing's rules (`[access]`, SPEC §19): the setting, and the one-time codes themselves.

A code is 8 characters from an alphabet without look-alikes (about 40 bits), shown grouped as
`ABCD-EFGH`, read back in any case and with or without the dash. Only its SHA-256 is stored: a
leaked database names no valid code. A person gets at most `CODES_PER_HOUR` codes an hour, so
writing again and again cannot flood the operator's listing or help guess.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Literal

from pydantic import BaseModel, ConfigDict

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I
CODE_LENGTH = 8
CODE_TTL_SECONDS = 3600.0  # a code is valid an hour
CODES_PER_HOUR = 3  # per person


class AccessSettings(BaseModel):
    """`[access]`: what happens when someone on no allowlist writes to the bot."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # "deny": nothing (as before); "pair": in private they get a code the operator can approve.
    unknown: Literal["deny", "pair"] = "deny"

    @property
    def pairing(self) -> bool:
        return self.unknown == "pair"


def new_code() -> str:
    """A fresh code as it is shown: `ABCD-EFGH`."""
    raw = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
    return f"{raw[:4]}-{raw[4:]}"


def code_digest(code: str) -> str | None:
    """The stored form of a code as someone typed it; None when it cannot be a code."""
    raw = "".join(code.split()).replace("-", "").upper()
    if len(raw) != CODE_LENGTH or any(c not in ALPHABET for c in raw):
        return None
    return hashlib.sha256(raw.encode()).hexdigest()

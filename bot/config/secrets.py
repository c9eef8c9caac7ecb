"""Credentials: read from the environment (and a `.env` file) only, never from the config file,
and never shown by `repr`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Secrets:
    """Credentials, from the environment only. `repr` never shows a value."""

    values: Mapping[str, str]

    def get(self, name: str) -> str | None:
        return self.values.get(name) or None

    def problem(self, name: str) -> str | None:
        """What is wrong with the shape of secret `name` (stray whitespace, characters no HTTP
        header can carry), as an operator message with the fix; None when it looks usable."""
        value = self.values.get(name) or ""
        if value != value.strip():
            return (
                f"{name} has stray whitespace around it (a trailing newline or space from "
                f"copying it). Fix: set {name} to the value alone, e.g. in .env without quotes "
                "or spaces."
            )
        if not (value.isascii() and value.isprintable() and " " not in value):
            return (
                f"{name} holds characters no credential has (spaces, line breaks or non-ASCII "
                f"letters). Fix: copy the {name} value again from where it was issued."
            )
        return None

    def __repr__(self) -> str:
        return f"Secrets(set={sorted(k for k, v in self.values.items() if v)})"

    @classmethod
    def from_env(cls, env: Mapping[str, str], names: tuple[str, ...]) -> Secrets:
        return cls({name: env[name] for name in names if env.get(name)})

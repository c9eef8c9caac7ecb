"""The `[console]` section: whether `bot run` serves the operator console, who may sign in, and
where a reverse proxy puts it. Plain data: no web framework, no hashing library."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.config.sections import Section
from bot.policy.surfaces import APPROVER

OPERATOR_NAME = r"^[a-z][a-z0-9_.-]{0,31}$"
ENV_NAME = r"^[A-Z_][A-Z0-9_]{0,63}$"


class Operator(BaseModel):
    """One person who may sign in: with a password (its argon2 hash, from `bot console passwd
    NAME`) or with a token read from the environment variable `token_env`. `approver` is the
    platform id (as in `[approvals] approvers`) the operator decides approvals as."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=OPERATOR_NAME)]
    password_hash: Annotated[str, Field(pattern=r"^\$argon2id?\$", max_length=512)] | None = None
    token_env: Annotated[str, Field(pattern=ENV_NAME)] | None = None
    approver: Annotated[str, Field(pattern=APPROVER)] | None = None

    @model_validator(mode="after")
    def _one_credential(self) -> Operator:
        if (self.password_hash is None) == (self.token_env is None):
            raise ValueError(
                f"operator {self.name!r} needs exactly one of password_hash (made by `bot "
                "console passwd NAME`) or token_env (the name of an environment variable "
                "holding a login token)"
            )
        return self


class ConsoleSettings(Section):
    enabled: bool = False
    operators: list[Operator] = Field(default_factory=list, max_length=100)
    # The path a reverse proxy serves the console under, before /console (e.g. "/ops" for
    # https://example.com/ops/console/); the proxy strips it before passing requests on.
    path_prefix: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)*$", max_length=200)] = ""
    session_hours: Annotated[float, Field(gt=0, le=720)] = 12.0
    # Refused logins per operator name within `lockout_minutes`; past that, logins for that name
    # are refused (right password or not) until the window has passed.
    login_attempts: Annotated[int, Field(ge=1, le=100)] = 5
    lockout_minutes: Annotated[int, Field(ge=1, le=1440)] = 15

    @model_validator(mode="after")
    def _unique_names(self) -> ConsoleSettings:
        names = [operator.name for operator in self.operators]
        doubled = sorted({name for name in names if names.count(name) > 1})
        if doubled:
            raise ValueError(f"operator names must be unique; {', '.join(doubled)} is given twice")
        return self

    @property
    def served(self) -> bool:
        """On only when enabled and someone can sign in."""
        return self.enabled and bool(self.operators)

    def secret_names(self) -> tuple[str, ...]:
        """The environment variables holding operators' login tokens."""
        return tuple(op.token_env for op in self.operators if op.token_env is not None)

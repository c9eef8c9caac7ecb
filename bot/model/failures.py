"""What a turn that gave up on a call says: the message for the log and record (what failed,
the fix) and the reply the person is shown."""

from __future__ import annotations

from bot import replies
from bot.config import ModelSettings
from bot.model.calls import _CallError
from bot.model.retry import Verdict


def failure_reply(error: _CallError) -> str:
    """A key or access problem is the operator's to fix; anything else may pass."""
    if error.verdict in {Verdict.AUTH, Verdict.DENIED}:
        return replies.MODEL_MISCONFIGURED
    return replies.MODEL_UNAVAILABLE


def failure_message(error: _CallError, settings: ModelSettings) -> str:
    verdict = error.verdict
    if verdict is Verdict.RETRY:
        return (
            f"the model API kept failing ({error}) after {error.attempts} attempts in "
            f"{error.spent:.1f}s; gave up (model.max_retries = {settings.max_retries}, "
            f"model.retry_budget = {settings.retry_budget:g}s)."
        )
    if verdict is Verdict.AUTH:
        return (
            f"the model API{_of(error)} refused the API key ({error}). Fix: set "
            f"{_key(error, settings)} to a valid API key for it (environment or .env) and restart."
        )
    if verdict is Verdict.DENIED:
        return (
            f"the model API{_of(error)} denied access ({error}). Fix: check that the key in "
            f"{_key(error, settings)} may use model {_model(error, settings)!r}."
        )
    if verdict is Verdict.OVERFLOW:
        return (
            f"the request is over the model's context window even after compacting ({error}). "
            "Fix: set model.context_window to the model's real window, or shrink the skills."
        )
    return f"the model API refused the request ({error}); not retried."


def _of(error: _CallError) -> str:
    return f" of {error.route.name}" if error.route is not None and error.route.name else ""


def _model(error: _CallError, settings: ModelSettings) -> str:
    model = error.body.get("model") if error.body else None
    return str(model or settings.name)


def _key(error: _CallError, settings: ModelSettings) -> str:
    route = error.route
    if route is not None and route.model is not None:  # a fallback's or a surface rule's model
        return route.key_env or "the provider's api_key_env"
    return settings.home.key_env or "the API key variable"

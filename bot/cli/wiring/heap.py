"""The heap a started process keeps: frozen out of the garbage collector's full passes.

Everything alive once the App has started (the imported SDKs, their models and validators, the
host's parts) lives as long as the process. Left in the collector's oldest generation, every full
pass walks it all again: with the model SDK and pydantic loaded that is a pause of about 150 ms
that hits one turn in a few dozen (the Slack one-conversation p99 of issue 42). Frozen, a full
pass walks only what the turns made since, which keeps it to a few milliseconds.
"""

from __future__ import annotations

import gc


def freeze_started() -> None:
    """Move every object tracked now to the permanent generation (never collected, never walked).
    Called once start-up is done; what later turns allocate is collected as usual."""
    gc.freeze()


def thaw() -> None:
    """Give the frozen objects back to the collector (the App is closing: what it held, and any
    garbage frozen with it, can go; a process that starts Apps one after another never leaks)."""
    gc.unfreeze()

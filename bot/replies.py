"""Every sentence the host itself says to people in a chat (not to the model), in one place.

Sentences take their numbers through `str.format` fields. The chat commands the platforms list
(Telegram's command menu) are here too, with the one-line description people see.
"""

from __future__ import annotations

# Chat commands the host answers itself, never the model: (command, description).
CHAT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("memory", "What I remember you said here"),
    ("forget", "Forget what you said: /forget N, or /forget all"),
)

# --- /memory and /forget ------------------------------------------------------------------------

MEMORY_OFF = "Memory is turned off, so I keep nothing to list or forget."
MEMORY_NOBODY = "I can't tell who you are here, so I can't show or forget anything of yours."
MEMORY_EMPTY = "I don't remember anything you said here."
MEMORY_LIST = "What I remember you said here ({total}), newest first:"
MEMORY_MORE = "…and {count} older."
MEMORY_HOW_TO_FORGET = "To forget one: /forget N. To forget all of them: /forget all."
FORGET_USAGE = "Say /forget N (a number from /memory) or /forget all."
FORGET_NO_SUCH = "There is no entry {number}: /memory lists {total}."
FORGOT_ONE = "Done: I forgot entry {number} ({said})."
FORGOT_ALL = "Done: I forgot all {count} of your entries here."
FORGOT_NOTHING = "There was nothing of yours to forget here."

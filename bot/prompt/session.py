"""The session block (section 5): facts about this conversation, never its route, never a clock.

It must be byte-identical for every turn of one conversation, so it is built only from values that
stay fixed for the conversation (kind, channel, surface, notify, the console id, memory on/off, and
the surface rule's instructions and skills). The facts become named slots of a template
(`bot.prompt.template`); the built-in one reproduces the historical bytes exactly.
"""

from __future__ import annotations

import re

from bot.prompt.fence import neutralize, one_line
from bot.prompt.template import DEFAULT_SESSION_TEMPLATE, Template
from bot.turns import ConversationKind, Surface, SurfaceKind, TurnRequest

# The exact answer that keeps a notifying request-driven run silent (nothing is posted).
SILENT_TOKEN = "NO_REPLY"
SURFACE_NAME_MAX_CHARS = 80
CONVERSATION_ID_MAX_CHARS = 200
# Surface ids are platform ids (`C0123ABCD`, `-1001234567890`); anything else is not shown.
_SURFACE_ID = re.compile(r"^-?[A-Za-z0-9_.:]{1,64}$")
# A console id is shown only when it can be quoted exactly inside backticks on one line.
_CONSOLE_ID = re.compile(r"^[\x21-\x5f\x61-\x7e]{1,200}$")

_TRIGGERS = {"cron": "a scheduled job", "webhook": "a webhook call"}


def session_block(
    request: TurnRequest,
    *,
    memory_enabled: bool,
    template: Template = DEFAULT_SESSION_TEMPLATE,
    instructions: str = "",
    skills: str = "",
) -> str:
    """The session block from `template`; `instructions` and `skills` come from the surface's
    rule (already rendered by `surface_texts`), the same for every turn of the conversation."""
    values = session_slots(request, memory_enabled=memory_enabled)
    return template.render({**values, "instructions": instructions, "skills": skills})


def session_slots(request: TurnRequest, *, memory_enabled: bool) -> dict[str, str]:
    """Every session slot's value for this conversation ("" where the fact does not apply)."""
    values = {"conversation_kind": request.kind.value, "secrecy": _SECRECY}
    values["memory"] = _MEMORY if memory_enabled else ""
    if request.kind is ConversationKind.PUSH:
        values.update(_push_slots(request))
    elif request.kind is ConversationKind.CONSOLE:
        values.update(_console_slots(request.conversation_key))
    else:
        values.update(_request_slots(request))
    return values


def _push_slots(request: TurnRequest) -> dict[str, str]:
    surface = request.surface
    platform = surface.platform if surface is not None and surface.platform else "a chat platform"
    values = {
        "platform": platform,
        "conversation": (
            f"This is a live conversation on {platform}: people write to you there and read "
            "your answers there. You can ask them questions, and they can answer."
        ),
    }
    if surface is not None:
        values["surface"] = surface_line(surface)
        values["surface_kind"] = surface.kind.value
        values["surface_name"] = _surface_name(surface)
        values["surface_id"] = surface.id if _SURFACE_ID.match(surface.id) else ""
        values["message_budget"] = _budget_line(surface)
        values["message_budget_chars"] = str(surface.message_budget)
    return values


def _surface_name(surface: Surface) -> str:
    return neutralize(one_line(surface.name or "", SURFACE_NAME_MAX_CHARS).replace('"', "'"))


def surface_line(surface: Surface) -> str:
    name = _surface_name(surface)
    where = surface.kind.value
    if name:
        where += f" with {name}" if surface.kind is SurfaceKind.DM else f' "{name}"'
    if _SURFACE_ID.match(surface.id):
        where += f", id {surface.id}"
    readers = (
        "It is shared: several people can read what you write here."
        if surface.shared
        else "Only the person you are talking with reads it."
    )
    return f"Surface: {where}. {readers}"


def _budget_line(surface: Surface) -> str:
    after = (
        "in the thread under it" if surface.continues_in_thread else "in messages right after it"
    )
    return (
        f"Your answer is posted in parts of at most {surface.message_budget} characters. A longer "
        "answer is split: "
        f"the first part is posted, and the rest follows {after}. Write to that budget when you "
        "can."
    )


def _console_slots(conversation_key: str) -> dict[str, str]:
    values = {
        "conversation": (
            "This is a console conversation: the person reads your reply right here, in the "
            "terminal, and can answer you."
        )
    }
    shown = one_line(neutralize(conversation_key), CONVERSATION_ID_MAX_CHARS)
    if shown == conversation_key and _CONSOLE_ID.match(conversation_key):
        values["console_id"] = (
            f"Conversation id: `{conversation_key}` (quote it exactly when a tool asks for it)."
        )
    return values


def _request_slots(request: TurnRequest) -> dict[str, str]:
    trigger = _TRIGGERS.get(request.channel, "an automated request")
    values = {
        "conversation": (
            f"This turn was started by {trigger}, not by a person typing. Nobody can answer back "
            "in this conversation, so do not ask questions: do the work with what you have."
        )
    }
    if request.notifies:
        values["delivery"] = (
            "Your final answer is posted verbatim to the job's destination, where people will "
            f"read it. If there is nothing worth posting this time, answer with exactly "
            f"{SILENT_TOKEN} and nothing else: then nothing is posted."
        )
    else:
        values["delivery"] = (
            "Your final answer is kept in this conversation's history and the run record; it is "
            "not posted anywhere."
        )
    return values


_SECRECY = (
    "Delivery is the host's job. Your reply goes back to where this message came from. Never ask "
    "for, guess, copy or pass on a thread id, a callback URL or a delivery token, and never use a "
    "surface id to send your answer somewhere else."
)
_MEMORY = (
    "Remembering is also the host's job: after each turn it stores what was said, and related "
    "memories may be added to a message as background. When someone asks you to remember "
    "something, acknowledge it; you do not need to save it yourself."
)

"""Sentences the host says to people on its own (not the model's words): command answers.

Every new person-facing sentence goes here, so the voice stays one and the wording is easy to
review. Operator-facing messages (config errors, CLI output) live with their commands.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.prompt import AgentTexts

# The agent's name, when its identity file introduces it the usual way ("You are Quill, ...").
_NAME = re.compile(r"\bYou are ([A-Z][\w'’-]{0,39})\b")

# Commands the host answers itself, with the line /help shows for each.
COMMAND_HELP: Sequence[tuple[str, str]] = (
    ("help", "list these commands"),
    ("compact", "summarize the older part of this conversation to make room"),
)


def greeting(agent: AgentTexts) -> str:
    """The answer to `/start`: a short hello built from the identity, and where to go next."""
    found = _NAME.search(agent.identity)
    hello = f"Hi, I'm {found.group(1)}." if found else "Hi!"
    return f"{hello} Ask me anything, or send /help to see the commands."


def help_text(agent: AgentTexts) -> str:
    """The answer to `/help`: the host's commands, then one line per skill."""
    lines = ["Commands:"]
    lines += [f"/{name} - {what}" for name, what in COMMAND_HELP]
    if agent.skills:
        lines += ["", "Skills (start a message with one to use it for that message):"]
        lines += [f"/{skill.name} - {skill.description}" for skill in agent.skills]
    return "\n".join(lines)

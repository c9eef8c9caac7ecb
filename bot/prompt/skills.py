"""Skills in the prompt: the agent's texts, the skill index, capped skill bodies, `/skill` commands.

Selected skills ride the system prompt whole (capped); every other skill is one line of the index,
which tells the model it can read a body with the read-only `load_skill` tool (`bot.tools.toolbox`).
A person can pull a skill into one message by starting it with `/skill-name`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot import replies
from bot.errors import UnknownSkill
from bot.prompt.fence import cut_utf8, one_line, utf8_len

INDEX_MAX_BYTES = 16 * 1024
DESCRIPTION_MAX_CHARS = 300
LOAD_SKILL_TOOL = "load_skill"
# `/name` or `/name rest`; a path like `/etc/hosts` is not one. (A platform's own command forms,
# such as Telegram's `/name@bot`, are the channel's to translate before the text gets here.)
_COMMAND = re.compile(r"^/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?=\s|$)")
# Commands the host handles itself, before skills are considered.
# Commands the host answers itself; a message starting with one (as a whole word) is not a skill.
HOST_COMMANDS = frozenset({"compact", "start", "help"})


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str


@dataclass(frozen=True)
class AgentTexts:
    """Everything the agent-wide part of the prompt is made of, as read from the agent's files."""

    guardrails: str
    identity: str
    skills: tuple[Skill, ...]  # every skill found, selected or not
    selected: tuple[str, ...]  # names of the skills whose bodies always ride the system prompt


def find_skill(skills: Sequence[Skill], name: str) -> Skill | None:
    """The skill called `name`: exact match first, then ignoring case."""
    for skill in skills:
        if skill.name == name:
            return skill
    lowered = name.lower()
    for skill in skills:
        if skill.name.lower() == lowered:
            return skill
    return None


def host_command(text: str) -> str | None:
    """The host command `text` starts with as a whole word (`/compact`, `/help`), else None:
    `/compactify the report` is not `/compact`."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name = match.group(1).lower()
    return name if name in HOST_COMMANDS else None


def split_skill_command(skills: Sequence[Skill], text: str) -> tuple[tuple[Skill, ...], str]:
    """`/name rest` -> ((skill,), "rest"); other text -> ((), text); unknown names raise."""
    match = _COMMAND.match(text)
    if match is None:
        return (), text
    name = match.group(1)
    if name.lower() in HOST_COMMANDS:
        return (), text
    skill = find_skill(skills, name)
    if skill is None:
        listed = sorted(s.name for s in skills)
        raise UnknownSkill(name, replies.unknown_skill(one_line(name, 64), listed))
    return (skill,), text[match.end() :].strip()


def capped_body(skill: Skill, max_bytes: int) -> str:
    """The skill's body, cut at `max_bytes` of UTF-8 with a visible note when it was longer."""
    body = skill.body.strip()
    size = utf8_len(body)
    if size <= max_bytes:
        return body
    kept = cut_utf8(body, max_bytes)
    return (
        f"{kept}\n\n[Skill {skill.name!r} is cut here: its instructions are {size} bytes and only "
        f"the first {max_bytes} are shown.]"
    )


def render_index(skills: Sequence[Skill], *, loadable: bool = True) -> str:
    """The skill index (section 3), or "" when there is nothing to list. Bounded at 16 KiB.
    `loadable`: whether the `load_skill` tool is offered, so the index may tell the model to
    call it (a surface whose rule leaves it out gets the index without that sentence)."""
    if not skills:
        return ""
    header = (
        (
            "# Skills you can load\n"
            f"Each line names a skill and what it is for. When one fits the task, call the "
            f"`{LOAD_SKILL_TOOL}` tool with its name to read its full instructions, then follow "
            "them."
        )
        if loadable
        else (
            "# Skills\n"
            "Each line names a skill and what it is for. Their instructions are not available "
            "to you here; a person can start a message with `/name` to use one."
        )
    )
    lines: list[str] = []
    used = utf8_len(header)
    for position, skill in enumerate(skills):
        line = f"- {one_line(skill.name, 64)}: {one_line(skill.description, DESCRIPTION_MAX_CHARS)}"
        left = len(skills) - position - 1
        reserve = utf8_len(_omitted_line(len(skills))) + 1 if left else 0
        if used + 1 + utf8_len(line) + reserve > INDEX_MAX_BYTES:
            lines.append(_omitted_line(len(skills) - position))
            break
        lines.append(line)
        used += 1 + utf8_len(line)
    return "\n".join([header, *lines])


def _omitted_line(count: int) -> str:
    noun = "skill is" if count == 1 else "skills are"
    return f"({count} more {noun} not listed: the index is full.)"


def render_selected(skills: Sequence[Skill], max_bytes: int) -> str:
    """The selected skills' instructions (section 4), or "" when none is selected."""
    parts = [f"# Skill: {one_line(s.name, 64)}\n\n{capped_body(s, max_bytes)}" for s in skills]
    return "\n\n".join(parts)

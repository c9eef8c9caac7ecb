"""Prompt templates with named slots: the session block (system part) and the turn context line.

A template is plain text with `{slot}` fields (`{{` and `}}` are literal braces). Rendering puts
each slot's value in place; a template line made only of slots that all came out empty is left
out, runs of blank template lines collapse to one, and blank lines at either end go. That is how
the built-in defaults reproduce the host's historical bytes exactly, whatever facts are absent.

Validation (`Template.parse`) is strict, so a bad template is a configuration error at start-up
rather than a prompt that silently lost a fact: an unknown slot, a per-turn fact in the session
template (the system part must stay byte-identical across one conversation's turns, or the cache
breaks), or a missing required fact each raise `TemplateError` naming the slot and the fix.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.errors import TemplateError


@dataclass(frozen=True)
class Fact:
    """A fact the prompt must state: present when any one of `slots` is in the template."""

    name: str
    slots: tuple[str, ...]


@dataclass(frozen=True)
class Slots:
    """What one kind of template may use."""

    part: str  # "session" or "turn context", for messages
    known: tuple[str, ...]
    required: tuple[Fact, ...]
    elsewhere: tuple[str, ...] = ()  # slots of the other part, named in the error for them
    elsewhere_why: str = ""


# --- the session block ---------------------------------------------------------------------------

SESSION_SLOTS = Slots(
    part="session",
    known=(
        "conversation",  # the paragraph(s) saying what kind of conversation this is
        "conversation_kind",  # push, console or request
        "platform",
        "surface",  # the whole surface sentence (kind, name, id, who reads it)
        "surface_kind",
        "surface_name",
        "surface_id",
        "message_budget",  # the sentence about the per-part limit and what happens to the rest
        "message_budget_chars",
        "console_id",  # console only: the conversation id line
        "delivery",  # request-driven only: where the answer goes, and the silent token
        "secrecy",
        "memory",
        "instructions",  # from the matching [[surfaces]] rule
        "skills",  # the rule's selected skill bodies that are not agent-wide
    ),
    required=(
        Fact("the conversation kind", ("conversation", "conversation_kind")),
        Fact("the surface", ("surface", "surface_id")),
        Fact("the message budget", ("message_budget", "message_budget_chars")),
        Fact("the console conversation id", ("console_id",)),
        Fact("where a request-driven answer goes", ("delivery",)),
        Fact("the secrecy rule", ("secrecy",)),
        Fact("the memory rule", ("memory",)),
        Fact("the surface's instructions", ("instructions",)),
        Fact("the surface's selected skills", ("skills",)),
    ),
    elsewhere=("local_time", "weekday", "timestamp", "timezone", "attachments", "viewing"),
    elsewhere_why=(
        "it changes every turn, and the session block is in the system part, which must stay "
        "byte-identical for every turn of a conversation (or the prompt cache misses every time)"
    ),
)

DEFAULT_SESSION = """\
# This conversation

{conversation}

{surface}

{message_budget}

{console_id}

{delivery}

{secrecy}

{memory}

{instructions}

{skills}
"""

# --- the turn context ----------------------------------------------------------------------------

TURN_SLOTS = Slots(
    part="turn context",
    known=("local_time", "weekday", "timestamp", "timezone", "attachments", "viewing"),
    required=(
        Fact("the local time", ("local_time", "timestamp")),
        Fact("the attachments note", ("attachments",)),
        Fact("what the person has open beside the conversation", ("viewing",)),
    ),
    elsewhere=tuple(s for s in SESSION_SLOTS.known),
    elsewhere_why=(
        "it is a fact of the whole conversation and belongs in the session template, where it "
        "is cached instead of being sent again with every message"
    ),
)

DEFAULT_TURN = """\
<turn_context>
Local time: {weekday} {timestamp} ({timezone})
{attachments}
{viewing}
</turn_context>
"""

_FORMATTER = string.Formatter()


@dataclass(frozen=True)
class _Line:
    text: str  # the line with `{{`/`}}` already turned into braces where no slot is involved
    pieces: tuple[tuple[str, str | None], ...]  # (literal, slot or None)

    @property
    def only_slots(self) -> bool:
        return any(s for _, s in self.pieces) and not any(lit.strip() for lit, _ in self.pieces)


@dataclass(frozen=True)
class Template:
    """A parsed, validated template. `render(values)` gives the text."""

    lines: tuple[_Line, ...]
    slots: frozenset[str]

    @classmethod
    def parse(
        cls, text: str, kind: Slots, *, where: str = "template", optional: Sequence[str] = ()
    ) -> Template:
        """Parse and check `text`. `optional` names required facts' slots that may be left out
        because nothing would fill them (e.g. `instructions` when no rule has any)."""
        lines = tuple(_parse_line(line, number, where) for number, line in _numbered(text))
        used = frozenset(s for line in lines for _, s in line.pieces if s)
        for slot in sorted(used):
            if slot in kind.known:
                continue
            if slot in kind.elsewhere:
                raise TemplateError(
                    f"{where}: the {kind.part} template uses {{{slot}}}, which cannot go there: "
                    f"{kind.elsewhere_why}. Fix: remove {{{slot}}} from it."
                )
            raise TemplateError(
                f"{where}: unknown slot {{{slot}}}. Fix: use only these slots in the {kind.part} "
                f"template: {', '.join('{' + s + '}' for s in kind.known)} (write {{{{ and }}}} "
                "for literal braces)."
            )
        for fact in kind.required:
            if used.isdisjoint(fact.slots) and not set(fact.slots) <= set(optional):
                shown = " or ".join("{" + s + "}" for s in fact.slots)
                raise TemplateError(
                    f"{where}: the {kind.part} template drops {fact.name}. Fix: put {shown} "
                    "in it (a slot that has nothing to say renders as nothing)."
                )
        return cls(lines, used)

    def render(self, values: Mapping[str, str]) -> str:
        out: list[str] = []
        for line in self.lines:
            filled = [(lit, values.get(slot, "") if slot else "") for lit, slot in line.pieces]
            if line.only_slots and not any(value for _, value in filled):
                continue
            text = "".join(lit + value for lit, value in filled)
            if text.strip() == "" and (not out or out[-1].strip() == ""):
                continue  # collapse blank runs (and drop leading blanks)
            out.append(text)
        while out and not out[-1].strip():
            out.pop()
        return "\n".join(out)


def _numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.replace("\r\n", "\n").split("\n"), start=1))


def _parse_line(line: str, number: int, where: str) -> _Line:
    try:
        parsed = list(_FORMATTER.parse(line))
    except ValueError as exc:
        raise TemplateError(
            f"{where}, line {number}: {exc}. Fix: write slots as {{name}}, and {{{{ or }}}} for "
            "a literal brace."
        ) from None
    pieces: list[tuple[str, str | None]] = []
    for literal, field, spec, conversion in parsed:
        if field is not None and (spec or conversion or not field.isidentifier()):
            raise TemplateError(
                f"{where}, line {number}: {{{field}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} is not a plain slot. Fix: write {{name}} with "
                "no format spec, conversion, index or attribute."
            )
        pieces.append((literal, field))
    return _Line(line, tuple(pieces))


DEFAULT_SESSION_TEMPLATE = Template.parse(DEFAULT_SESSION, SESSION_SLOTS, where="built-in")
DEFAULT_TURN_TEMPLATE = Template.parse(DEFAULT_TURN, TURN_SLOTS, where="built-in")

"""The turn model: the small frozen dataclasses every part of the host speaks.

Channels build a `TurnRequest` from a platform event; the core turns it into a model request and
publishes `HistoryEntry` values. Nothing here knows a platform or does I/O.

What the model may see and what it must never see is drawn here: `Speaker`, `Surface` and
`PrecedingMessage` carry only model-visible facts; everything that directs a delivery (channel,
thread, message to reply to, platform user ids, tokens) lives in the opaque `ReplyRoute`, which the
assembler never reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal


class ConversationKind(StrEnum):
    """How the person on the other side relates to this conversation."""

    PUSH = "push"  # Slack, Telegram: a person reads the answer on a chat platform
    CONSOLE = "console"  # `bot chat`: a person reads the answer in the terminal
    REQUEST = "request"  # cron, webhook: nobody can answer back


class Origin(StrEnum):
    """Where the words of a turn came from, stamped by the host (never by the model): what a
    memory of the turn carries, so recall can say whose words it holds (SPEC §6)."""

    PERSON = "person"  # a person the platform's allowlist names
    UNLISTED = "unlisted"  # a person no allowlist names (anyone there may write)
    BOT = "bot"  # another bot: nobody's words
    AGENT = "agent"  # an agent of this host: nobody's words
    OPERATOR = "operator"  # the operator (`bot chat`)
    SCHEDULED = "scheduled"  # a cron job's, a webhook's or a chat schedule's prompt


class Outcome(StrEnum):
    """How a turn ended: what its record stores (these exact strings) and what a caller waiting
    for it (console, cron, webhooks) sees."""

    OK = "ok"  # answered (a /memory command too); a /compact turn's caller sees this
    SILENT = "silent"  # a request-driven turn answered with the silent token: nothing posted
    COMMAND = "command"  # /start or /help, answered by the host
    COMPACTED = "compacted"  # /compact (its record; the caller sees OK)
    REFUSED = "refused"  # no model call: unknown skill, too large, busy or too fast (see error)
    OVER_BUDGET = "over_budget"  # no model call: a daily budget is reached
    FAILED = "failed"  # the model runtime gave up, or the turn could not be published
    STOPPED = "stopped"  # a cost breaker stopped it: a token cap, or a repeated tool call
    CRASHED = "crashed"  # the host failed, or the turn was interrupted too often
    # Cut short: by shutdown (it runs again after the next start), or by a person (Slack's stop
    # button, Ctrl-C in `bot chat`; error "stopped"), who keeps a continuity account.
    CANCELLED = "cancelled"
    UNDELIVERED = "undelivered"  # parts left from an earlier process were not all posted
    SUSPENDED = "suspended"  # answered, and waits for something (an approval) to continue
    # Not queued at all (a caller of `Host.run` only; the channels see `Admission`):
    BUSY = "busy"
    RATE_LIMITED = "rate_limited"
    CLOSED = "closed"


class SurfaceKind(StrEnum):
    DM = "dm"
    CHANNEL = "channel"
    GROUP = "group"


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who sent the current message. Model-visible: names only, never a platform user id."""

    name: str
    handle: str | None = None


@dataclass(frozen=True, slots=True)
class Surface:
    """Where the conversation happens. Model-visible.

    `message_budget` is the per-part character limit the channel's deliverer splits with: the
    channel passes its own splitting constant so the prompt never drifts from what is enforced.
    `platform` is the platform's name as people say it ("Slack"), and `continues_in_thread` says
    whether a longer answer continues in a thread under its first part: the channel knows both,
    so the core need not know any platform.
    """

    kind: SurfaceKind
    id: str
    name: str | None = None
    shared: bool = False
    message_budget: int = 4000
    platform: str = ""
    continues_in_thread: bool = False


@dataclass(frozen=True, slots=True)
class Viewing:
    """What the person has open beside this conversation, when the platform says (Slack's
    assistant pane: the channel they are looking at). Model-visible as a kind and a name only,
    never an id, and per turn: it changes while the conversation goes on."""

    kind: SurfaceKind
    name: str | None = None


@dataclass(frozen=True, slots=True)
class PrecedingMessage:
    """Something another person said in this conversation since the bot last answered."""

    at: datetime
    name: str
    text: str
    handle: str | None = None


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file the person shared, as the platform declares it: name, media type, size in bytes
    (0 when unknown) and, for voice and audio, the length in seconds.

    The bytes stay with the channel: where to fetch them (a file URL, a platform file id) is in
    the hidden route, and the host asks the channel's `FileSource` for attachment N of the route.
    """

    name: str
    media_type: str
    size: int
    seconds: int | None = None


@dataclass(frozen=True, slots=True)
class ReplyRoute:
    """Everything needed to deliver the answer. Opaque to the core and never shown to the model.

    `platform` picks the deliverer; `values` is the channel's own business (channel id, thread ts,
    message id to reply to, user id, ...).
    """

    platform: str
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Lookups:
    """The ids a stored request still has to name before its turn runs: who spoke, where, whom
    its text mentions and what was said before it. A channel that acknowledges an event before
    it may ask its platform for names (Slack wants the ack within 3 s) stores the request readable
    as it is plus these; when the turn starts, the host hands them to that channel's
    `bot.ports.intake.RequestCompleter` and applies the `Names` it answers (`TurnRequest.named`).

    Owned by the channel that wrote it, opaque to the core and never shown to the model: ids and
    the text as written (its mentions still ids), like the route.
    """

    speaker: str  # the person (or bot) who wrote the message
    surface: str  # the conversation it was written in
    text: str  # the message as written, its mentions still ids
    message: str  # the message's own id: what others said before it is read up to it
    thread: str | None = None  # the thread it was written in, if any
    surface_type: str | None = None  # the conversation's kind as the event named it
    speaker_name: str | None = None  # named by the event already (another bot): not looked up
    viewing: str | None = None  # the conversation the person has open beside this one
    bot_user: str | None = None  # the bot's own user id: a mention of it is an address
    bot_author: str | None = None  # the id the bot's own posts carry besides (Slack's bot_id)


@dataclass(frozen=True, slots=True)
class Names:
    """What a channel found for a request's `Lookups`: the model-visible facts its turn reads."""

    text: str
    speaker: Speaker
    surface: Surface
    preceding: tuple[PrecedingMessage, ...] = ()
    viewing: Viewing | None = None


@dataclass(frozen=True, slots=True)
class Continuation:
    """What a continuation turn carries on: the kind of suspension (e.g. "approval") and the
    durable key of its stored state (the approval id). Opaque to channels."""

    kind: str
    key: str


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """One turn to run: what the channel knows about the event, plus the hidden route."""

    conversation_key: str
    kind: ConversationKind
    channel: str  # "slack", "telegram", "console", "cron", "webhook"
    text: str
    received_at: datetime
    turn_id: str
    speaker: Speaker | None = None
    surface: Surface | None = None
    preceding: tuple[PrecedingMessage, ...] = ()
    attachments: tuple[Attachment, ...] = ()
    route: ReplyRoute | None = None
    # Request-driven turns only: whether the final answer is posted somewhere (cron/webhook notify).
    notifies: bool = False
    # Host-side identity of the person speaking (e.g. `slack:T1:U2`), used only to scope long-term
    # memory. It is a platform user id in disguise, so the assembler never renders it.
    person: str | None = None
    viewing: Viewing | None = None
    # What the channel left to look up when the turn runs (Slack's names); None once named.
    lookups: Lookups | None = None
    # The suspended turn this one carries on (an approval decided), set by the host only.
    continues: Continuation | None = None
    # Set by the host only: the tools (names the model sees) this turn may be offered, in place of
    # what its surface rule offers. A job set up with the `schedule` tool runs with the tools its
    # creator's place offered when it was made, never those of the `cron` rule.
    tools: tuple[str, ...] | None = None
    # Set by the channel: who wrote `text` as the platform says (a person its allowlist names, one
    # it does not, another bot). None: the host assumes the least (`Origin.UNLISTED`).
    origin: Origin | None = None
    # Set by the host only (SPEC §15): the agent this turn is for (a hand-off names it; None: the
    # one its text and place choose), and how many agent-to-agent hops led to it since a person
    # last spoke.
    agent: str | None = None
    hops: int = 0

    def named(self, names: Names) -> TurnRequest:
        """The request with the names its lookups found, nothing left to look up."""
        return replace(
            self,
            text=names.text,
            speaker=names.speaker,
            surface=names.surface,
            preceding=names.preceding,
            viewing=names.viewing,
            lookups=None,
        )


# History entries: the durable, model-neutral record of what was said. Blocks mirror the content
# kinds the Messages API replays (text, tool_use, tool_result) plus the attachments a person
# shared (by content id, never their bytes); thinking never enters.


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """A tool's result. `aged`, once set (the result is older than the newest turns), is the
    short reference replayed instead of `content`; `content` stays, to be fetched again."""

    tool_use_id: str
    content: str
    is_error: bool = False
    aged: str = ""


@dataclass(frozen=True, slots=True)
class AttachmentBlock:
    """An attachment as the conversation keeps it: its marker facts and the content id of the
    bytes in the attachment store (None when the file was not read; `problem` says why).

    `kind` is "image", "pdf", "text", "audio" or "file". `detail` holds what the marker shows
    besides name and size (pixels, pages, characters, seconds). Never the bytes themselves.
    """

    index: int
    name: str
    kind: str
    media_type: str
    size: int
    content_id: str | None = None
    detail: Mapping[str, int] = field(default_factory=dict)
    problem: str | None = None


Block = TextBlock | ToolUseBlock | ToolResultBlock | AttachmentBlock
Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Attached:
    """This turn's attachments after intake: their blocks (stored with the person's message), the
    bytes the request replays (by content id, this turn's and history's), and one short line for
    the person about each file that could not be read."""

    blocks: tuple[AttachmentBlock, ...] = ()
    contents: Mapping[str, bytes] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One stored message of a conversation.

    `speaker` is the label of the person who spoke a user entry (`Alice Chen (@alice)`), or None.
    `tokens` is the cached token estimate, so history is never re-tokenized on every turn.
    `summary` marks the compaction summary that replaces older history. `host_note` marks a
    user entry the host wrote (a continuation's note: an approved call's outcome), placed as it
    was written because every untrusted part of it was neutralized when it was made.
    """

    role: Role
    blocks: tuple[Block, ...]
    speaker: str | None = None
    tokens: int = 0
    summary: bool = False
    at: datetime | None = None
    host_note: bool = False

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks if isinstance(b, TextBlock))

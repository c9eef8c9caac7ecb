"""Every sentence the host itself says to a person in chat (refusals, notices, its own commands'
answers), in one place.

Short, plain and polite; each says what happened and what the person can do. None of them ever
names a platform id, a route or a secret. Sentences take their numbers through `str.format`
fields. The chat commands the platforms list (Telegram's command menu) are here too, with the
one-line description people see.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

# Chat commands the host answers itself, never the model: (command, description).
CHAT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("memory", "What I remember you said here"),
    ("forget", "Forget what you said: /forget N, or /forget all"),
    ("usage", "What you have used today, and your limits"),
)

# --- /memory and /forget ------------------------------------------------------------------------

MEMORY_OFF = "Memory is turned off, so I keep nothing to list or forget."
MEMORY_NOBODY = "I can't tell who you are here, so I can't show or forget anything of yours."
# `bot chat`: the terminal's words are kept with its conversation, not with a person.
MEMORY_CONSOLE = (
    "In the terminal I don't know who you are, so what is said here is remembered with this "
    "conversation, not as yours: /memory and /forget work in Slack and Telegram. Here, "
    "`bot memory search QUERY` shows what I remember and `bot memory forget ID` deletes an entry."
)
MEMORY_EMPTY = "I don't remember anything you said here."
MEMORY_LIST = "What I remember you said here ({total}), newest first:"
MEMORY_MORE = "…and {count} older."
# Where an entry's words came from, as `/memory` shows it (keys: `bot.turns.Origin` values).
MEMORY_ORIGINS = {
    "person": "yours",
    "unlisted": "yours, unverified",  # a platform without an allowlist: anyone could write
    "bot": "a bot's",
    "agent": "an agent's",
    "operator": "the operator's",
    "scheduled": "a scheduled run's",
}
MEMORY_HOW_TO_FORGET = "To forget one: /forget N. To forget all of them: /forget all."
FORGET_USAGE = "Say /forget N (a number from /memory) or /forget all."
FORGET_NO_SUCH = "There is no entry {number}: /memory lists {total}."
FORGOT_ONE = "Done: I forgot entry {number} ({said})."
FORGOT_ALL = "Done: I forgot all {count} of your entries here."
FORGOT_NOTHING = "There was nothing of yours to forget here."

# --- /usage -------------------------------------------------------------------------------------

USAGE_PRIVATE = "I only tell you your usage in a private chat with me (or privately, via /usage)."
USAGE_UNKNOWN = "I can't tell who you are here, so I can't show your usage."
COMMAND_UNKNOWN = (
    "I don't know that command. I answer /memory, /forget N, /usage and /schedules here."
)


def usage_report(
    tokens: int,
    cost_usd: float,
    token_limit: int | None,
    usd_limit: float | None,
    resets_at: datetime,
) -> str:
    """The answer to /usage: what the person used today and what is left of their own limits."""
    lines = [f"Today you have used {tokens:,} tokens (about ${cost_usd:.2f})."]
    if token_limit is not None:
        lines.append(
            f"Your daily limit is {token_limit:,} tokens; {max(token_limit - tokens, 0):,} left."
        )
    if usd_limit is not None:
        lines.append(
            f"Your daily limit is ${usd_limit:.2f}; ${max(usd_limit - cost_usd, 0):.2f} left."
        )
    if token_limit is None and usd_limit is None:
        lines.append("You have no daily limit of your own.")
    else:
        when = resets_at.strftime("%Y-%m-%d %H:%M")
        lines.append(f"The day resets at {when} {resets_at.tzname() or 'UTC'}.")
    return "\n".join(lines)


def console_usage(tokens: int, cost_usd: float) -> str:
    """The answer to /usage in `bot chat`, where nobody has limits of their own."""
    return (
        f"Today this conversation has used {tokens:,} tokens (about ${cost_usd:.2f}). The "
        "terminal has no daily limit of its own; `bot usage` reports usage by person, surface "
        "or day."
    )


# --- pairing (`[access] unknown = "pair"`) -------------------------------------------------------


def pairing_code(code: str) -> str:
    """What someone on no allowlist is sent in private: the one-time code for the operator."""
    return (
        "Hi! This bot answers only people its operator has let in. To ask for access, send "
        f"the operator this code (it works once, for an hour):\n\n{code}\n\n"
        f"They admit you with: bot access approve {code}"
    )


# --- a turn a person stopped (Slack's stop button) -----------------------------------------------

STOPPED_NOTE = "(Stopped. Ask again whenever you like.)"
INTERRUPTED_NOTE = "(Stopped to take your newer message.)"  # `busy = "interrupt"`


def stopped(partial: str, note: str = STOPPED_NOTE) -> str:
    """What a stopped turn's answer shows: what it had written, then that it was stopped."""
    return f"{partial.rstrip()}\n\n{note}" if partial.strip() else note


# --- the console (`bot chat`) -------------------------------------------------------------------

CONSOLE_THINKING = "(thinking…)"
CONSOLE_FINISHING = "(finishing this answer; press Ctrl-C again to cancel it)"
CONSOLE_CANCELLING = "(cancelling this answer; the conversation keeps a note of it)"


def chat_unanswered(
    unanswered: int, asked: int, reason: str, log: Path, *, turn_id: str, conversation: str
) -> str:
    """One line on stderr when a piped `bot chat` could not answer every message: the last
    unanswered turn's id, for `bot turns show`, and the conversation's key."""
    return (
        f"bot chat: {unanswered} of {asked} messages got no answer ({reason}) in conversation "
        f"{conversation}. Fix: see the turn with `bot turns show {turn_id}` and the log ({log}); "
        "check the model is reachable."
    )


# --- turns that end without an answer from the model --------------------------------------------

BUSY = (
    "I'm still working through earlier messages in this conversation. "
    "Please send this again in a minute."
)
TOO_FAST = "You're sending messages faster than I can answer. Please wait a moment."
TOO_LARGE = "That message is too large for me to read in one go. Please shorten it or split it up."
# The host itself failed (a bug, a store error) mid-turn.
TURN_FAILED = "Sorry, I couldn't answer that just now. Please try again in a little while."
# The model API kept failing, or refused the request, after the retries.
MODEL_UNAVAILABLE = (
    "Sorry, I couldn't answer right now: the language model isn't responding. "
    "Please try again in a few minutes."
)
MODEL_MISCONFIGURED = (
    "Sorry, I can't answer right now: my access to the language model is misconfigured. "
    "Whoever runs this bot needs to fix it."
)
# Streamed to a reader who saw part of an answer whose call is being retried.
ANSWER_RESTARTED = "\n\n(The answer was interrupted; starting it again.)\n\n"


def tool_round_limit(limit: int) -> str:
    """Appended to an answer cut short because the model asked for tools past the limit."""
    return f"(I stopped here: I reached the limit of {limit} tool rounds for one answer.)"


# --- /compact -----------------------------------------------------------------------------------

NOTHING_TO_COMPACT = "There is nothing to compact yet."
COMPACT_FAILED = (
    "I couldn't compact this conversation right now; its history is unchanged. "
    "Please try again in a few minutes."
)


def nothing_older_to_compact(kept: int) -> str:
    return f"Nothing to compact yet: the conversation has {kept} messages, all kept as is."


def compact_left_files(count: int) -> str:
    """What `/compact` says of files sent with it (compaction reads none)."""
    if count == 1:
        return "(The file sent with /compact was not read or kept: send it again with a message.)"
    return (
        f"(The {count} files sent with /compact were not read or kept: send them again with a "
        "message.)"
    )


def compacted(summarized: int, kept: int) -> str:
    return (
        f"Compacted: {summarized} earlier messages are now one summary; the last {kept} are "
        "kept as they were."
    )


# --- skills -------------------------------------------------------------------------------------


def unknown_skill(name: str, known: Sequence[str]) -> str:
    """The answer to `/name` when no skill has that name: the skills there are, if any."""
    if known:
        listed = ", ".join(f"/{k}" for k in known)
        return f'There is no skill called "{name}". Skills you can use: {listed}.'
    return f'There is no skill called "{name}", and no skills are set up here.'


# --- budgets ------------------------------------------------------------------------------------

# Which budget ran out, as the person should hear it.
_BUDGET_SCOPES = {
    "overall": "my usage budget for today",
    "surface": "today's usage budget for this chat",
    "person": "your usage budget for today",
}


def budget_reached(scope: str, resets_at: datetime) -> str:
    """The one notice a person gets when a daily budget is reached (no model call is made)."""
    what = _BUDGET_SCOPES.get(scope, "a usage budget")
    when = resets_at.strftime("%Y-%m-%d %H:%M")
    zone = resets_at.tzname() or "UTC"
    return (
        f"I've reached {what}, so I'll stay quiet here until it resets at {when} {zone}. "
        "Messages sent before then won't get an answer."
    )


# --- cost breakers (SPEC §17) -------------------------------------------------------------------


def turn_stopped(breaker: str, max_tokens: int | None) -> str:
    """What a person is told when a cost breaker stopped the answer to their message."""
    if breaker == "repeat":
        return (
            "I stopped working on this: I kept repeating the same step without getting "
            "anywhere. Please rephrase or narrow the request."
        )
    return (
        f"I stopped working on this: the answer would have used more than {max_tokens} tokens, "
        "the most one answer may use here. Please ask for something smaller."
    )


_BREAKER_WHY = {
    "repeat": "it kept making the same tool call",
    "run": "a run went over its token cap",
    "day": "it reached its daily token cap",
}


def job_paused(name: str, breaker: str) -> str:
    """The one line a scheduled job's destination gets when a breaker pauses the job."""
    why = _BREAKER_WHY.get(breaker, "a cost breaker tripped")
    return (
        f'The scheduled job "{name}" is paused: {why}. An operator can resume it with '
        f"`bot cron resume {name}`."
    )


# --- schedules set up in chat (SPEC §17) ---------------------------------------------------

SCHEDULE_NOT_ALLOWED = (
    "Sorry, you can't set up or change scheduled jobs here: only people the operator has "
    "allowed can. Ask whoever runs this bot if you need one."
)
SCHEDULE_NOWHERE = "Scheduled jobs can only be set up in a Slack or Telegram conversation."
SCHEDULE_NOT_YOURS = "Sorry, only the person who set up that job, or an operator, can remove it."
SCHEDULES_NONE = "There are no scheduled jobs here."
SCHEDULES_OFF = "Scheduled jobs from chat are turned off for this bot, so there are none here."
SCHEDULES_LIST = "Scheduled jobs here ({count}):"
SCHEDULES_HOW_TO_REMOVE = "To remove one: /schedules remove ID."
SCHEDULES_USAGE = "Say /schedules to list the jobs here, or /schedules remove ID to remove one."
SCHEDULE_REMOVED = "Done: I removed the scheduled job {id}."


def schedule_too_often(minutes: int) -> str:
    return (
        f"That would run more often than once every {minutes} minutes, the most often a job may "
        "run here. Please choose a wider schedule."
    )


def schedule_limit(bound: str, limit: int) -> str:
    """A new job over the bound of jobs per place ("place") or per person ("person")."""
    where = "here" if bound == "place" else "for you"
    return (
        f"There are already {limit} scheduled jobs {where}, the most allowed. Remove one first "
        "(/schedules lists them)."
    )


def schedule_unknown(schedule_id: str, known: Sequence[str]) -> str:
    listed = ", ".join(known) if known else "none"
    return f'There is no scheduled job "{schedule_id}" here (jobs here: {listed}).'


def schedule_line(schedule_id: str, expression: str, timezone: str, prompt: str, mine: bool) -> str:
    """One job in the /schedules list."""
    who = " (yours)" if mine else ""
    return f"{schedule_id}: {expression} ({timezone}){who}: {prompt}"


# The agent's name, when its identity file introduces it the usual way ("You are Quill, ...").
_NAME = re.compile(r"\bYou are ([A-Z][\w'’-]{0,39})\b")

# Commands the host answers itself, with the line /help shows for each.
COMMAND_HELP: Sequence[tuple[str, str]] = (
    ("help", "list these commands"),
    ("compact", "summarize the older part of this conversation to make room"),
)
# Every command the host answers itself, as /help lists them and a platform's command menu
# (Telegram's setMyCommands) offers them in private chats.
MENU_COMMANDS: Sequence[tuple[str, str]] = (*COMMAND_HELP, *CHAT_COMMANDS)
# Listed where schedules from chat are on (`[schedules] allowed` names someone).
SCHEDULES_HELP = ("schedules", "The jobs set up here: /schedules, or /schedules remove ID")
# Not in group menus: /usage is answered only in private, and /compact changes the whole group's
# conversation (both still work when typed).
_PRIVATE_ONLY = ("usage", "compact")


def command_menu(*, private: bool, schedules: bool) -> tuple[tuple[str, str], ...]:
    """The commands a platform's menu offers (Telegram's setMyCommands), in private chats or in
    groups; /schedules only where schedules from chat are on."""
    listed = (*MENU_COMMANDS, SCHEDULES_HELP) if schedules else tuple(MENU_COMMANDS)
    return listed if private else tuple(c for c in listed if c[0] not in _PRIVATE_ONLY)


def greeting(identity: str) -> str:
    """The answer to `/start`: a short hello built from the identity, and where to go next."""
    found = _NAME.search(identity)
    hello = f"Hi, I'm {found.group(1)}." if found else "Hi!"
    return f"{hello} Ask me anything, or send /help to see the commands."


def help_text(skills: Sequence[tuple[str, str]], *, schedules: bool = False) -> str:
    """The answer to `/help`: the host's commands (/schedules where schedules from chat are on),
    then one line per skill (name, description)."""
    lines = ["Commands:"]
    lines += [f"/{name} - {what}" for name, what in command_menu(private=True, schedules=schedules)]
    if skills:
        lines += ["", "Skills (start a message with one to use it for that message):"]
        lines += [f"/{name} - {description}" for name, description in skills]
    return "\n".join(lines)


# --- attachments: why a file was not read ------------------------------------------------------

IMAGE_DAMAGED = "the image could not be decoded (damaged or cut short)"
IMAGE_BOMB = "the image has too many pixels to decode safely"
PDF_DAMAGED = "the PDF could not be read (damaged or cut short)"
PDF_LOCKED = "the PDF is password-protected"
PDF_EMPTY = "the PDF has no pages"
TEXT_UNDECODABLE = (
    "it looks like a text file, but its encoding could not be recognised (saving it as UTF-8 "
    "will do)"
)
DOWNLOAD_REFUSED = "the platform refused the download"
DOWNLOAD_FAILED = "the download failed; please send it again"
NOT_FETCHABLE = "files from here cannot be downloaded"
ATTACHMENTS_OFF = "reading files is turned off here"
LEFT_OUT_FOR_SIZE = (
    "with the other files it would make the request larger than the model accepts (32 MB), so "
    "it was left out"
)
MODEL_REFUSED_FILE = "the model could not process it, so it is left out of this conversation"


def image_too_large(width: int, height: int) -> str:
    return f"the image is {width}×{height} pixels, too large to decode safely"


def pdf_too_large(limit_mb: int) -> str:
    return f"the PDF is over the model's {limit_mb} MB limit"


def pdf_too_long(pages: int, limit: int) -> str:
    return f"the PDF has {pages} pages; I can read at most {limit}"


def file_too_large(limit: str) -> str:
    return f"it is larger than the {limit} limit"


def unsupported_type(media_type: str) -> str:
    return (
        f"its type ({media_type}) is not one I can read; I read PNG, JPEG, GIF and WebP images, "
        "PDFs and text files"
    )


def too_many_files(limit: int) -> str:
    return f"I read at most {limit} files from one message"


# Voice notes and audio files (transcribed on this machine): why one was not.
VOICE_UNREADABLE = "it could not be played as audio (damaged, or not a sound recording)"
VOICE_FAILED = "transcription failed on my side; please send it again later"
VOICE_TIMED_OUT = "transcribing it took too long; a shorter recording will work better"
VOICE_SILENT = "I heard no speech in it"


def voice_too_long(length: str | None, limit: str) -> str:
    """`length` and `limit` as players show them (`20:00`, `5:00`); `length` None when unknown."""
    if length is not None:
        return f"it is {length} long, and I transcribe recordings of up to {limit}"
    return f"it is longer than the {limit} I transcribe"


def attachment_problem(name: str, reason: str) -> str:
    """One line for the person about one file that was not read."""
    return f"I couldn't read “{name}”: {reason}."


# Approvals (SPEC §14): the card, the answers to a press, and what the model reads of a decision.
APPROVE = "Approve"
DENY = "Deny"
APPROVAL_UNKNOWN = "I don't know this approval request (it may be from another bot)."
APPROVAL_NOT_YOURS = "This one is not yours to approve: only the listed approvers can decide it."
APPROVAL_OWN_REQUEST = "You asked for this action, so someone else has to approve it."
APPROVAL_TRY_AGAIN = "I could not record that just now; please press again in a moment."
APPROVAL_INTERRUPTED = (
    "[unknown: the host stopped while the approved call was under way; it was not run again, "
    "and whether it ran is not known]"
)
APPROVAL_LOST = (
    "[Host note, not from the person] The host found no decision for the approval this turn "
    "continues, so nothing ran. Tell the person the action was not done."
)
APPROVAL_TAMPERED = (
    "The host did not run the call: its stored arguments no longer match what the card showed."
)
_STATES = {"approved": "approved", "denied": "denied", "expired": "expired unanswered"}


def approval_card(tool: str, arguments: str, who: str, minutes: int) -> str:
    return (
        f"Approval needed: {who} asked me to run {tool} with these arguments:\n{arguments}\n"
        f"It runs only if an approver presses Approve within {minutes} minutes."
    )


def approval_asked_in(place: str) -> str:
    return f"Asked in: {place}"


def approval_notice(tool: str, minutes: int) -> str:
    return (
        f"⏳ {tool} is waiting for an approval from an approver: the card went to them privately "
        f"(they have {minutes} minutes)."
    )


def approval_card_hidden(tool: str, who: str, minutes: int) -> str:
    return (
        f"Approval needed: {who} asked me to run {tool}; its arguments are shown only to the "
        f"approvers (I could not reach one privately: start a private chat with me to see them). "
        f"It runs only if an approver presses Approve within {minutes} minutes."
    )


def approval_recorded(state: str) -> str:
    return f"Recorded: {_STATES.get(state, state)}."


def approval_already(state: str) -> str:
    return f"This request was already decided: {_STATES.get(state, state)}. Nothing changed."


def approval_closed(tool: str, state: str, by: str | None, at: datetime) -> str:
    when = at.strftime("%Y-%m-%d %H:%M UTC")
    who = f" by {by}" if by else ""
    return f"{tool}: {_STATES.get(state, state)}{who} at {when}."


# What the model reads (tool results and the continuation's note); the model tells the person.
def approval_waiting(tool: str, minutes: int) -> str:
    return (
        f"{tool} has NOT run: it needs a person's approval. An approval card with the exact "
        f"arguments is now in this conversation; an approver has {minutes} minutes to decide. "
        "Tell the person it waits for approval. The outcome will arrive in a later message."
    )


def approval_unavailable(tool: str) -> str:
    return (
        f"{tool} needs a person's approval, and this conversation cannot show an approval card; "
        "it did not run."
    )


def approval_no_approvers(tool: str) -> str:
    return (
        f"{tool} needs a person's approval, and no approver is configured for this platform "
        "(other than the person asking); it did not run."
    )


def approval_too_long(tool: str, limit: int) -> str:
    return (
        f"{tool} needs a person's approval, and its arguments are longer than the {limit} bytes "
        "an approval card shows; it did not run. Use shorter arguments."
    )


def approval_too_many(tool: str, limit: int, where: str) -> str:
    return (
        f"{tool} needs a person's approval, and {where} already has {limit} approval requests "
        "(the most it may have at once); it did not run and no card was posted. Tell the person, "
        "and ask again once the waiting requests are decided."
    )


def approval_tool_gone(tool: str) -> str:
    return f"{tool} was approved but is no longer available, so it did not run."


def approval_ran(tool: str, arguments: str, at: datetime, outcome: str) -> str:
    when = at.strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"[Host note, not from the person] The call to {tool} with arguments {arguments} was "
        f"approved by an approver at {when}. The host runs an approved call at most once; what "
        f"came of it:\n{outcome}\n"
        "Tell the person what happened."
    )


def approval_refused(tool: str, arguments: str, state: str, at: datetime) -> str:
    when = at.strftime("%Y-%m-%d %H:%M UTC")
    why = "denied by an approver" if state == "denied" else "not decided in time (expired)"
    return (
        f"[Host note, not from the person] The call to {tool} with arguments {arguments} was "
        f"{why} at {when}; it did NOT run. Tell the person it was not done, and why."
    )

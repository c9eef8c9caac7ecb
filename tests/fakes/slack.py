"""A fake Slack on 127.0.0.1: the Web API methods the host calls and a Socket Mode websocket.

It speaks the real wire protocol, so tests drive the real slack-bolt / slack-sdk against it.

    async with FakeSlack() as slack:
        slack.api_url                      # "http://127.0.0.1:PORT/api/" -> slack.api_url
        slack.bot_token, slack.app_token   # the tokens it accepts (SLACK_BOT_TOKEN / _APP_TOKEN)
        slack.add_user("U1", "alice", real_name="Alice Chen")
        slack.add_channel("C1", "general")             # kind: channel | private | im | mpim
        slack.say("C1", "U2", "earlier chatter")       # history only, no event
        body = slack.mention("C1", "U1", "hello")      # stores the message, returns the event
        envelope = await slack.push(body)              # Socket Mode delivery; records the ack
        await slack.wait_for(lambda: slack.posts)
        slack.posts      # the bot's messages as they show now, in the order they were created
                         # (chat.postMessage, chat.startStream): {channel, text, thread_ts, ts,
                         # metadata, at (monotonic time created), stream (True for a stream)};
                         # chat.update / appendStream / stopStream change `text` in place, and
                         # chat.delete removes the entry (slack.deleted keeps it)
        slack.reactions  # ("add" | "remove", channel, timestamp, name)
        slack.calls      # every Web API call: Call(method, params, status, at)
        slack.acks       # envelope id -> monotonic time of its ack

Injecting trouble:
    slack.fail("chat.postMessage", status=429, retry_after=1, after=1)  # 2nd post gets a 429
    slack.fail("conversations.info", "internal_error", times=2)
    slack.fail("chat.postMessage", "internal_error", lose_reply=True)  # posted, answer lost
    slack.hold("users.info")           # calls of a method wait (recorded) until release(...)
    slack.revoke("channels:read")      # conversations.info on a public channel -> missing_scope
    await slack.push(body, retry_attempt=1)   # a redelivery: same event, same event_id
    slack.ack_deadline = 0.0           # slow acks: an envelope not acked within the deadline is
                                       # delivered once more, the way Slack retries after 3 s
Files: `f = slack.add_file("shot.png", data, "image/png")` keeps a file and returns Slack's file
object; `slack.mention(..., files=[f])` / `slack.dm(..., files=[f])` share it (a `file_share`
message). `slack.files_url` goes in slack.files_url. A download of `url_private` needs
`Authorization: Bearer <bot token>` (else a redirect to the sign-in page, as Slack does) and the
`files:read` scope (else the sign-in page itself, as HTML); `slack.downloads` lists the file ids
served.

Streaming: chat.startStream (channel and thread_ts required; a stream outside a DM needs
recipient_user_id and recipient_team_id; markdown_text at most 12,000 characters),
chat.appendStream (only on a stream still running; markdown_text required), chat.stopStream,
chat.update and chat.delete (only the bot's own messages) behave as Slack documents them.
`slack.streaming_enabled = False` answers the stream methods `unknown_method` (an app without
the feature); `slack.limit("chat.appendStream", 1.0)` answers a second call on the same message
within a second with a 429 and its Retry-After.
Chunks (slack_sdk's shapes, `slack_sdk.models.messages.chunk`): startStream / appendStream /
stopStream take `chunks` beside or instead of markdown_text; `markdown_text` chunks add text,
`task_update` chunks (id, title of at most 256 characters (an assumed bound), status one of
pending, in_progress, complete, error) set that task on the message: `slack.tasks[ts]` holds
each task as it stands now, by id, in first-seen order, `slack.task_log` every update as
(ts, id, status); an unknown chunk type or a malformed chunk is `invalid_chunks` (an assumed
code). `task_display_mode` must be "timeline" or "plan".
Blocks on chat.postMessage / chat.update are checked where tables are concerned (`_good_blocks`:
one `table` a message, 1-100 rows of 1-20 cells, non-empty raw text; `section` text within
3,000 characters), else `invalid_blocks`; `post["blocks"]` keeps what was sent.
The assistant pane (Agents & AI apps), with the DM's channel added as kind "im":
    body = slack.assistant_thread_started(DM, "U1", viewing="C1")  # root message + the event
    thread = body["event"]["assistant_thread"]["thread_ts"]
    slack.assistant_context_changed(DM, thread, "U1", viewing="C2")
    slack.assistant_message(DM, "U1", "hi", thread_ts=thread)      # message.im in the thread
    slack.status_log   # accepted assistant.threads.setStatus: (channel, thread_ts, status)
    slack.suggested    # (channel, thread_ts) -> {"title", "prompts"}; slack.titles likewise
    slack.assistant_view = False       # the app without the assistant feature: every
                                       # assistant.threads.* call answers ASSISTANT_OFF
setStatus takes assistant:write or chat:write (as Slack does since 2026-03), setTitle and
setSuggestedPrompts need assistant:write; all three check their required arguments, want an IM
channel and an existing thread, at most 4 prompts and 10 loading messages; a post in the thread
clears its status, as Slack does.

HTTP mode: `slack.signed(body, secret)` gives the raw body and the signed headers to POST to
the host's /slack/events (pass `timestamp=` to make a stale one).

Agent messaging (the app's Messages tab, `agent_view`):
    slack.home_opened(DM, "U1")        # app_home_opened with tab "messages"
    agents.sessions.setStatus / .rename (chat:write; channel_id required, thread_ts an existing
    message, status one of active / processing / suspended / closed, title 1-200 characters):
    slack.session_log  # accepted setStatus calls: (channel, thread_ts, status)
    slack.sessions     # (channel, thread_ts) -> {"status", "title"}
    slack.stop_subscribed = False      # setStatus answers Slack's warning about the missing
                                       # agent_session_stopped subscription
    body = slack.stop_button(DM, thread, "U1")   # the person presses stop: like Slack, the bot's
                                       # running streams in that thread are stopped first and
                                       # named in streaming_message_ts; push(body) delivers it
    setSuggestedPrompts without thread_ts: the prompts at the top of the Messages tab,
    kept in slack.suggested[(channel, "")].
Slash commands (the `commands` scope):
    payload = slack.slash_command("/memory", "", channel=DM, user="U1")   # what Slack sends;
                                       # its response_url is the fake's (under slack.hooks_url)
    await slack.push_command(payload)  # a Socket Mode `slash_commands` envelope
    raw, headers = slack.signed_form(payload, secret)   # HTTP mode: a signed form POST
    slack.responses    # what was POSTed to response URLs: (command id, JSON body)
    slack.responses_expired = True     # response URLs answer 404 expired_url
    slack.ephemeral    # accepted chat.postEphemeral calls: {channel, user, text}
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import urlencode

from aiohttp import WSMsgType, web

# The scopes the fake enforces, method by method; deploy/slack-app-manifest.yaml asks for exactly
# these (tests/channels/slack/test_manifest.py keeps the two equal).
TEAM = "T0FAKE"
BOT_USER = "UBOT0001"
BOT_ID = "BBOT0001"
APP_ID = "A0FAKE01"
ALL_SCOPES = frozenset(
    {
        "app_mentions:read",
        "assistant:write",
        "channels:history",
        "channels:read",
        "chat:write",
        "commands",
        "files:read",
        "groups:history",
        "groups:read",
        "im:history",
        "im:read",
        "im:write",
        "mpim:history",
        "mpim:read",
        "reactions:write",
        "users:read",
    }
)
_READ_SCOPE = {"channel": "channels", "private": "groups", "im": "im", "mpim": "mpim"}
MAX_TEXT = 40_000
MAX_MARKDOWN = 12_000  # chat.startStream / appendStream / stopStream markdown_text
MAX_TASK_TITLE = 256  # a task_update chunk's title (assumed)
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
CHUNK_TYPES = frozenset({"markdown_text", "task_update", "plan_update", "blocks"})
# Message metadata (chat.postMessage `metadata`): Slack requires an event type of letters,
# digits and underscores and an object payload, and returns it only when asked for.
_EVENT_TYPE = re.compile(r"^[A-Za-z0-9_]{1,255}$")
# Slack documents no error for an app without the assistant feature; the fake names it so.
ASSISTANT_OFF = "feature_not_enabled"
MAX_PROMPTS = 4
MAX_LOADING_MESSAGES = 10
MAX_THREAD_TITLE = 255  # an assumption: Slack documents no limit
MAX_SESSION_TITLE = 200  # agents.sessions.rename: 1-200 characters


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    status: int
    at: float


@dataclass
class _Failure:
    method: str
    error: str
    status: int
    retry_after: float | None
    after: int
    times: int
    seen: int = 0
    lose_reply: bool = False  # do the call, then answer with the error (as if the reply was lost)


@dataclass
class _Envelope:
    envelope_id: str
    body: dict[str, Any]
    retry_attempt: int
    sent_at: float = 0.0


@dataclass
class FakeSlack:
    bot_token: str = "xoxb-fake-bot-token"
    app_token: str = "xapp-fake-app-token"
    ack_deadline: float | None = None
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    posts: list[dict[str, Any]] = field(default_factory=list)
    reactions: list[tuple[str, str, str, str]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    acks: dict[str, float] = field(default_factory=dict)
    envelopes: list[_Envelope] = field(default_factory=list)
    scopes: set[str] = field(default_factory=lambda: set(ALL_SCOPES))
    files: dict[str, tuple[dict[str, Any], bytes]] = field(default_factory=dict)
    downloads: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # methods of calls that waited on hold()
    deleted: list[dict[str, Any]] = field(default_factory=list)  # posts removed by chat.delete
    tasks: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # ts -> id -> task
    task_log: list[tuple[str, str, str]] = field(default_factory=list)  # (ts, id, status)
    streaming_enabled: bool = True
    assistant_view: bool = True
    status_log: list[tuple[str, str, str]] = field(default_factory=list)
    thread_status: dict[tuple[str, str], str] = field(default_factory=dict)
    suggested: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    titles: dict[tuple[str, str], str] = field(default_factory=dict)
    session_log: list[tuple[str, str, str]] = field(default_factory=list)
    sessions: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    stop_subscribed: bool = True
    responses: list[tuple[str, Any]] = field(default_factory=list)
    ephemeral: list[dict[str, Any]] = field(default_factory=list)
    responses_expired: bool = False
    dms: dict[str, str] = field(default_factory=dict)  # user -> the DM conversations.open gave
    im_opened: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._failures: list[_Failure] = []
        self._clock = itertools.count(1)
        self._events = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self._connected = asyncio.Event()
        self._changed = asyncio.Event()
        self._timers: set[asyncio.Task[None]] = set()
        self._holds: dict[str, asyncio.Event] = {}
        self._limits: dict[str, float] = {}  # method -> seconds between calls on one message
        self._last: dict[tuple[str, str], float] = {}  # (method, ts) -> time of the last call
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.add_user(BOT_USER, "bot", real_name="The Bot", is_bot=True)

    # --- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeSlack:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link/", self._socket)
        app.router.add_get("/files-pri/{team_file}/{name}", self._file)
        app.router.add_get("/signin", self._signin)
        app.router.add_post("/commands/{command_id}", self._response_url)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for method in list(self._holds):
            self.release(method)
        for timer in list(self._timers):
            timer.cancel()
        await self.drop_connections()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def hooks_url(self) -> str:
        """Where the fake's response URLs live (what slack.hooks_url must be set to)."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def files_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def add_file(self, name: str, data: bytes, mimetype: str) -> dict[str, Any]:
        """Keep an uploaded file; returns the file object events carry (with `url_private`)."""
        file_id = f"F{len(self.files) + 1:09d}"
        url = f"{self.files_url}files-pri/{TEAM}-{file_id}/{name}"
        info = {
            "id": file_id,
            "created": 1_700_000_000,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1] if "." in name else "binary",
            "user": BOT_USER,
            "size": len(data),
            "mode": "hosted",
            "is_external": False,
            "url_private": url,
            "url_private_download": url + "?download=1",
            "permalink": f"https://fake.slack.com/files/{file_id}/{name}",
        }
        self.files[file_id] = (info, data)
        return info

    # --- world ----------------------------------------------------------------------------------

    def add_user(
        self,
        user_id: str,
        name: str,
        *,
        real_name: str | None = None,
        display_name: str | None = None,
        is_bot: bool = False,
    ) -> None:
        real = real_name or name
        self.users[user_id] = {
            "id": user_id,
            "team_id": TEAM,
            "name": name,
            "deleted": False,
            "real_name": real,
            "tz": "Europe/Berlin",
            "is_bot": is_bot,
            "profile": {
                "real_name": real,
                "real_name_normalized": real,
                "display_name": display_name if display_name is not None else name,
                "display_name_normalized": display_name if display_name is not None else name,
                "team": TEAM,
            },
        }

    def add_channel(self, channel_id: str, name: str = "", kind: str = "channel") -> None:
        """kind: "channel" (public), "private", "im" (name is ignored) or "mpim"."""
        info: dict[str, Any] = {
            "id": channel_id,
            "created": 1_600_000_000,
            "is_channel": kind in ("channel", "private"),
            "is_group": False,
            "is_im": kind == "im",
            "is_mpim": kind == "mpim",
            "is_private": kind != "channel",
            "is_archived": False,
            "is_member": True,
            "kind": kind,
        }
        if kind != "im":
            info["name"] = name
            info["name_normalized"] = name
        self.channels[channel_id] = info
        self.messages.setdefault(channel_id, [])

    def revoke(self, scope: str) -> None:
        self.scopes.discard(scope)

    def next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._clock)}.000100"

    def say(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """Store a message a person wrote, without delivering an event for it."""
        ts = self.next_ts()
        message: dict[str, Any] = {"type": "message", "user": user, "text": text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
        message.update(extra)
        self.messages.setdefault(channel, []).append(message)
        return message

    # --- events ---------------------------------------------------------------------------------

    def mention(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        thread_ts: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A person mentions the bot in a channel: stores the message, returns its app_mention."""
        text = text if f"<@{BOT_USER}>" in text else f"<@{BOT_USER}> {text}"
        message = self.say(channel, user, text, thread_ts=thread_ts, **_shared(files))
        return self.event_body(channel, message, "app_mention")

    def dm(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        thread_ts: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A person writes in a DM with the bot: stores the message, returns its message.im."""
        message = self.say(channel, user, text, thread_ts=thread_ts, **_shared(files))
        return self.event_body(channel, message, "message", channel_type="im")

    # --- the assistant pane -----------------------------------------------------------------------

    def assistant_thread_started(
        self, channel: str, user: str, *, viewing: str | None = None
    ) -> dict[str, Any]:
        """A person opens a new assistant thread in their DM with the app: stores the thread's
        root message (as Slack does) and returns the `assistant_thread_started` event."""
        ts = self.next_ts()
        root = {
            "type": "message",
            "subtype": "assistant_app_thread",
            "user": BOT_USER,
            "text": "New chat",
            "ts": ts,
            "thread_ts": ts,
            "assistant_app_thread": {"title": "New chat", "title_blocks": [], "artifacts": []},
        }
        self.messages.setdefault(channel, []).append(root)
        return self._assistant_event("assistant_thread_started", channel, ts, user, viewing)

    def assistant_context_changed(
        self, channel: str, thread_ts: str, user: str, *, viewing: str | None
    ) -> dict[str, Any]:
        """The person opened another channel while the assistant thread was visible."""
        return self._assistant_event(
            "assistant_thread_context_changed", channel, thread_ts, user, viewing
        )

    def assistant_message(
        self, channel: str, user: str, text: str, *, thread_ts: str
    ) -> dict[str, Any]:
        """A person writes in an assistant thread: a message.im in the thread, carrying the
        `assistant_thread` object Slack adds to those."""
        message = self.say(channel, user, text, thread_ts=thread_ts)
        marked = {**message, "assistant_thread": {"action_token": f"{uuid.uuid4().hex}"}}
        return self.event_body(channel, marked, "message", channel_type="im")

    def _assistant_event(
        self, kind: str, channel: str, thread_ts: str, user: str, viewing: str | None
    ) -> dict[str, Any]:
        context: dict[str, Any] = {"team_id": TEAM, "enterprise_id": None}
        if viewing is not None:
            context["channel_id"] = viewing
        body = self.event_body(channel, {"ts": self.next_ts()}, kind)
        thread = {
            "user_id": user,
            "context": context,
            "channel_id": channel,
            "thread_ts": thread_ts,
        }
        event = {"type": kind, "assistant_thread": thread, "event_ts": body["event"]["event_ts"]}
        return {**body, "event": event}

    # --- agent messaging and slash commands -----------------------------------------------------

    def home_opened(self, channel: str, user: str, *, tab: str = "messages") -> dict[str, Any]:
        """A person opens the app's Messages tab (or its Home tab): `app_home_opened`."""
        body = self.event_body(channel, {"ts": self.next_ts()}, "app_home_opened")
        event = {"type": "app_home_opened", "user": user, "channel": channel, "tab": tab}
        return {**body, "event": {**event, "event_ts": body["event"]["event_ts"]}}

    def stop_button(self, channel: str, thread_ts: str, user: str) -> dict[str, Any]:
        """The person presses the stop button of the session in this thread. As Slack does, the
        bot's streams running in the thread are stopped at once and named in the event."""
        stopped = []
        for message in self.messages.get(channel, []):
            if message.get("thread_ts") == thread_ts and message.get("streaming"):
                message["streaming"] = False
                stopped.append(message["ts"])
        body = self.event_body(channel, {"ts": self.next_ts()}, "agent_session_stopped")
        event = {
            "type": "agent_session_stopped",
            "channel": channel,
            "thread_ts": thread_ts,
            "user": user,
            "streaming_message_ts": stopped,
            "event_ts": body["event"]["event_ts"],
        }
        return {**body, "event": event}

    def slash_command(
        self, command: str, text: str, *, channel: str, user: str, channel_name: str | None = None
    ) -> dict[str, Any]:
        """The payload Slack sends when `user` types `command text` in `channel`."""
        kind = self.channels.get(channel, {}).get("kind")
        name = channel_name or ("directmessage" if kind == "im" else channel.lower())
        command_id = uuid.uuid4().hex
        return {
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "team_domain": "fake",
            "channel_id": channel,
            "channel_name": name,
            "user_id": user,
            "user_name": self.users.get(user, {}).get("name", "someone"),
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": f"{self.hooks_url}commands/{command_id}",
            "trigger_id": f"{next(self._events)}.{command_id}",
        }

    async def push_command(self, payload: dict[str, Any]) -> str:
        """Deliver a slash command over the websocket (a `slash_commands` envelope)."""
        return await self._push_envelope("slash_commands", payload, accepts_response=True)

    def block_action(
        self, post: Mapping[str, Any], user: str, action_id: str, value: str
    ) -> dict[str, Any]:
        """The `block_actions` payload Slack sends when `user` presses a button of `post`."""
        channel, ts = str(post["channel"]), str(post["ts"])
        trigger = f"{next(self._events)}.{uuid.uuid4().hex}"
        return {
            "type": "block_actions",
            "team": {"id": TEAM, "domain": "fake"},
            "user": {
                "id": user,
                "username": self.users.get(user, {}).get("name", "someone"),
                "team_id": TEAM,
            },
            "api_app_id": APP_ID,
            "token": "legacy-verification-token",
            "container": {
                "type": "message",
                "message_ts": ts,
                "channel_id": channel,
                "is_ephemeral": False,
            },
            "trigger_id": trigger,
            "channel": {"id": channel, "name": channel.lower()},
            "message": {
                "type": "message",
                "ts": ts,
                "text": post.get("text", ""),
                "blocks": post.get("blocks", []),
            },
            "response_url": f"{self.hooks_url}actions/{uuid.uuid4().hex}",
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": "approval",
                    "type": "button",
                    "value": value,
                    "action_ts": self.next_ts(),
                }
            ],
        }

    async def push_interactive(self, payload: dict[str, Any]) -> str:
        """Deliver a button press over the websocket (an `interactive` envelope)."""
        return await self._push_envelope("interactive", payload, accepts_response=False)

    async def _push_envelope(
        self, kind: str, payload: dict[str, Any], *, accepts_response: bool
    ) -> str:
        envelope = _Envelope(str(uuid.uuid4()), payload, 0)
        self.envelopes.append(envelope)
        frame = {
            "envelope_id": envelope.envelope_id,
            "payload": payload,
            "type": kind,
            "accepts_response_payload": accepts_response,
        }
        await self._deliver(envelope, frame)
        return envelope.envelope_id

    @staticmethod
    def signed_form(
        payload: Mapping[str, Any], secret: str, *, timestamp: int | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """A slash command as Slack POSTs it in HTTP mode: a form body, signed."""
        raw = urlencode({k: str(v) for k, v in payload.items()})
        stamp = str(timestamp if timestamp is not None else int(time.time()))
        digest = hmac.new(secret.encode(), f"v0:{stamp}:{raw}".encode(), hashlib.sha256)
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": "v0=" + digest.hexdigest(),
        }
        return raw.encode(), headers

    async def _response_url(self, request: web.Request) -> web.Response:
        if self.responses_expired:  # Slack's answer to a response URL used too late
            return web.Response(status=404, text="expired_url")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.Response(status=400, text="invalid_payload")
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            return web.Response(status=400, text="no_text")
        self.responses.append((request.match_info["command_id"], body))
        self._changed.set()
        return web.Response(text="ok")

    def _api_agents_sessions_setStatus(self, params: dict[str, Any]) -> web.Response:
        found = self._session_thread(params)
        if isinstance(found, web.Response):
            return found
        status = params.get("status")
        if status not in ("active", "processing", "suspended", "closed"):
            return _error("invalid_arguments")
        session = self.sessions.setdefault(found, {"status": status, "title": None})
        title = params.get("title")
        if session["title"] is None and isinstance(title, str):  # a title only on creation
            session["title"] = title
        session["status"] = status
        self.session_log.append((*found, str(status)))
        if not self.stop_subscribed:
            return _ok(warning="missing_agent_session_stopped_event_subscription")
        return _ok()

    def _api_agents_sessions_rename(self, params: dict[str, Any]) -> web.Response:
        found = self._session_thread(params)
        if isinstance(found, web.Response):
            return found
        title = params.get("title")
        if not isinstance(title, str) or not 1 <= len(title) <= MAX_SESSION_TITLE:
            return _error("invalid_arguments")
        session = self.sessions.get(found)
        if session is None:
            return _error("session_not_found")
        session["title"] = title
        return _ok()

    def _session_thread(self, params: dict[str, Any]) -> tuple[str, str] | web.Response:
        if "chat:write" not in self.scopes:
            return _missing_scope("chat:write")
        if not self.assistant_view:  # the app is not declared an agent
            return _error(ASSISTANT_OFF)
        channel, thread = params.get("channel_id"), params.get("thread_ts")
        if not (isinstance(channel, str) and channel in self.channels):
            return _error("channel_not_found")
        if not (isinstance(thread, str) and self._message_of(channel, thread) is not None):
            return _error("invalid_thread_ts")
        return channel, thread

    def _api_chat_postEphemeral(self, params: dict[str, Any]) -> web.Response:
        if "chat:write" not in self.scopes:
            return _missing_scope("chat:write")
        channel, user, text = params.get("channel"), params.get("user"), params.get("text")
        if channel not in self.channels:
            return _error("channel_not_found")
        if not text:
            return _error("no_text")
        if user not in self.users:
            return _error("user_not_found")
        self.ephemeral.append({"channel": channel, "user": user, "text": str(text)})
        return _ok(message_ts=self.next_ts())

    # --- files ----------------------------------------------------------------------------------

    async def _file(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["team_file"].removeprefix(f"{TEAM}-")
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if token != self.bot_token:
            raise web.HTTPFound(f"{self.files_url}signin")
        if "files:read" not in self.scopes:
            return web.Response(text="<html>Sign in to Slack</html>", content_type="text/html")
        found = self.files.get(file_id)
        if found is None or found[0]["name"] != request.match_info["name"]:
            return web.Response(status=404, text="file not found")
        info, data = found
        self.downloads.append(file_id)
        return web.Response(body=data, content_type=str(info["mimetype"]))

    async def _signin(self, request: web.Request) -> web.Response:
        return web.Response(text="<html>Sign in to Slack</html>", content_type="text/html")

    def channel_message(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """A message in a channel the bot is in (what message.channels would deliver)."""
        message = self.say(channel, user, text, thread_ts=thread_ts, **extra)
        return self.event_body(channel, message, "message", channel_type="channel")

    def member_left(self, channel: str, user: str) -> dict[str, Any]:
        """A `member_left_channel` event: `user` left `channel` (Slack sends no message)."""
        event = {"type": "member_left_channel", "user": user, "channel": channel}
        body = self.event_body(channel, {"ts": self.next_ts()}, "member_left_channel")
        return {**body, "event": {**event, "channel_type": "C", "team": TEAM}}

    def event_body(
        self,
        channel: str,
        message: Mapping[str, Any],
        event_type: str,
        *,
        channel_type: str | None = None,
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "client_msg_id": str(uuid.uuid4()),
            **message,
            "type": event_type,
            "team": TEAM,
            "channel": channel,
            "event_ts": message["ts"],
            "blocks": [],
        }
        if channel_type:
            event["channel_type"] = channel_type
        return {
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "context_team_id": TEAM,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{next(self._events):08d}FAKE",
            "event_time": int(float(message["ts"])),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": TEAM,
                    "user_id": BOT_USER,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-{uuid.uuid4().hex}",
        }

    # --- Socket Mode ----------------------------------------------------------------------------

    async def push(self, body: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Deliver an event over the websocket (waiting for the app to connect); its envelope id."""
        envelope = _Envelope(str(uuid.uuid4()), body, retry_attempt)
        await self._send(envelope)
        return envelope.envelope_id

    async def _send(self, envelope: _Envelope) -> None:
        self.envelopes.append(envelope)
        frame = {
            "envelope_id": envelope.envelope_id,
            "payload": envelope.body,
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": envelope.retry_attempt,
            "retry_reason": "timeout" if envelope.retry_attempt else "",
        }
        await self._deliver(envelope, frame)
        if self.ack_deadline is not None and envelope.retry_attempt == 0:
            timer = asyncio.create_task(self._redeliver_if_late(envelope, self.ack_deadline))
            self._timers.add(timer)
            timer.add_done_callback(self._timers.discard)

    async def _deliver(
        self, envelope: _Envelope, frame: dict[str, Any], within: float = 10.0
    ) -> None:
        """Write `frame` to the newest open connection. As Slack does, an envelope goes only to a
        connected app: with none open (the app is restarting) it waits for the next connection
        (up to `within` seconds, then TimeoutError), and one that closed under the write is
        forgotten and the frame written to the next."""
        text = json.dumps(frame)
        async with asyncio.timeout(within):
            while True:
                await self._connected.wait()
                socket = next((s for s in reversed(self._sockets) if not s.closed), None)
                if socket is not None:
                    envelope.sent_at = time.monotonic()
                    try:
                        await socket.send_str(text)
                        return
                    except ConnectionResetError:
                        pass  # it broke as the frame was written: the next connection gets it
                self._sockets = [s for s in self._sockets if s is not socket and not s.closed]
                if not self._sockets:
                    self._connected.clear()

    async def _redeliver_if_late(self, envelope: _Envelope, deadline: float) -> None:
        await asyncio.sleep(deadline)
        acked = self.acks.get(envelope.envelope_id)
        if acked is None or acked - envelope.sent_at > deadline:
            again = _Envelope(str(uuid.uuid4()), envelope.body, envelope.retry_attempt + 1)
            await self._send(again)

    async def connection(self, within: float = 10.0) -> None:
        """Wait until an app holds a Socket Mode connection."""
        await asyncio.wait_for(self._connected.wait(), timeout=within)

    async def acked(self, envelope_id: str, within: float = 10.0) -> float:
        await self.wait_for(lambda: envelope_id in self.acks, within)
        return self.acks[envelope_id]

    async def drop_connections(self) -> None:
        self._connected.clear()
        sockets, self._sockets = self._sockets, []
        for socket in sockets:
            await socket.close()

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": len(self._sockets),
                    "debug_info": {"host": "fake-slack", "approximate_connection_time": 18060},
                    "connection_info": {"app_id": APP_ID},
                }
            )
        )
        self._connected.set()
        async for frame in socket:
            if frame.type == WSMsgType.TEXT:
                self._on_frame(frame.data)
        if socket in self._sockets:
            self._sockets.remove(socket)
        if not self._sockets:
            self._connected.clear()
        return socket

    def _on_frame(self, data: str) -> None:
        try:
            message = json.loads(data)
        except json.JSONDecodeError:
            return
        if isinstance(message, dict) and "envelope_id" in message:
            self.acks.setdefault(str(message["envelope_id"]), time.monotonic())
            self._changed.set()

    # --- HTTP mode ------------------------------------------------------------------------------

    @staticmethod
    def signed(
        body: Mapping[str, Any], secret: str, *, timestamp: int | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """The raw body and the X-Slack-Signature headers Slack would send with it."""
        raw = json.dumps(body)
        stamp = str(timestamp if timestamp is not None else int(time.time()))
        digest = hmac.new(secret.encode(), f"v0:{stamp}:{raw}".encode(), hashlib.sha256)
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": "v0=" + digest.hexdigest(),
        }
        return raw.encode(), headers

    # --- waiting --------------------------------------------------------------------------------

    async def wait_for(self, condition: Callable[[], object], within: float = 10.0) -> None:
        """Return once `condition()` is true; fail the test after `within` seconds."""

        async def watch() -> None:
            while True:
                self._changed.clear()
                if condition():
                    return
                await self._changed.wait()

        try:
            await asyncio.wait_for(watch(), within)
        except TimeoutError:
            raise AssertionError(f"fake Slack: condition not met within {within} s") from None

    def posts_in(self, channel: str) -> list[dict[str, Any]]:
        return [post for post in self.posts if post["channel"] == channel]

    # --- Web API --------------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        error: str = "internal_error",
        *,
        status: int = 200,
        retry_after: float | None = None,
        after: int = 0,
        times: int = 1,
        lose_reply: bool = False,
    ) -> None:
        """Answer the next `times` calls of `method` (after the first `after`) with an error;
        with `lose_reply`, carry the call out first (a post that went through unconfirmed)."""
        if status == 429 and error == "internal_error":
            error = "ratelimited"
        self._failures.append(
            _Failure(method, error, status, retry_after, after, times, lose_reply=lose_reply)
        )

    def hold(self, method: str) -> None:
        """Calls of `method` wait until `release(method)` (each is in `held` meanwhile)."""
        self._holds.setdefault(method, asyncio.Event())

    def release(self, method: str) -> None:
        held = self._holds.pop(method, None)
        if held is not None:
            held.set()

    def limit(self, method: str, seconds: float) -> None:
        """Rate-limit `method` per message: a call on the same ts within `seconds` of the last
        accepted one gets a 429 with Retry-After."""
        self._limits[method] = seconds

    def bot_messages(self, channel: str) -> list[dict[str, Any]]:
        """The bot's messages in a channel as they show now (after updates and streams)."""
        return [post for post in self.posts if post["channel"] == channel]

    def reset_failures(self) -> None:
        """Forget every failure injected with `fail` and not used up yet."""
        self._failures.clear()

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        held = self._holds.get(method)
        if held is not None:
            self.held.append(method)
            self._changed.set()
            await held.wait()
        response = self._respond(method, params, request.headers.get("Authorization", ""))
        self.calls.append(Call(method, params, response.status, time.monotonic()))
        self._changed.set()
        return response

    def _respond(self, method: str, params: dict[str, Any], authorization: str) -> web.Response:
        token = authorization.removeprefix("Bearer ").strip() or str(params.get("token", ""))
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            return _error("invalid_auth")
        failure = self._failure_for(method)
        if failure is not None:
            if failure.lose_reply:
                handler = getattr(self, "_api_" + method.replace(".", "_"))
                handler(params)
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = f"{failure.retry_after:g}"
            return _error(failure.error, status=failure.status, headers=headers)
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None or (method in _STREAM_METHODS and not self.streaming_enabled):
            return _error("unknown_method")
        limited = self._rate_limited(method, params)
        if limited is not None:
            return limited
        result: web.Response = handler(params)
        # Like Slack, every Web API answer names the token's granted scopes.
        result.headers["x-oauth-scopes"] = ",".join(sorted(self.scopes))
        return result

    def _rate_limited(self, method: str, params: dict[str, Any]) -> web.Response | None:
        seconds = self._limits.get(method)
        if seconds is None:
            return None
        key = (method, str(params.get("ts", "")))
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < seconds:
            wait = max(1, int(seconds - (now - last) + 0.999))
            return _error("ratelimited", status=429, headers={"Retry-After": str(wait)})
        self._last[key] = now
        return None

    def _failure_for(self, method: str) -> _Failure | None:
        for failure in self._failures:
            if failure.method != method or failure.times <= 0:
                continue
            failure.seen += 1
            if failure.seen > failure.after:
                failure.times -= 1
                return failure
        return None

    def _api_auth_test(self, params: dict[str, Any]) -> web.Response:
        return _ok(
            url="https://fake.slack.com/",
            team="Fake Team",
            user="bot",
            team_id=TEAM,
            user_id=BOT_USER,
            bot_id=BOT_ID,
            is_enterprise_install=False,
        )

    def _api_apps_connections_open(self, params: dict[str, Any]) -> web.Response:
        return _ok(url=f"ws://127.0.0.1:{self.port}/link/?ticket={uuid.uuid4()}")

    def _api_users_info(self, params: dict[str, Any]) -> web.Response:
        if "users:read" not in self.scopes:
            return _missing_scope("users:read")
        user = self.users.get(str(params.get("user")))
        return _ok(user=user) if user else _error("user_not_found")

    def _api_conversations_open(self, params: dict[str, Any]) -> web.Response:
        """The DM with one user (made the first time, as Slack does); `im_opened` records them."""
        if "im:write" not in self.scopes:
            return _missing_scope("im:write")
        user = str(params.get("users", ""))
        if user not in self.users or "," in user:
            return _error("user_not_found")
        channel = self.dms.setdefault(user, f"D{user[1:]}"[:11])
        if channel not in self.channels:
            self.add_channel(channel, kind="im")
        self.im_opened.append(user)
        return _ok(channel={"id": channel})

    def _api_conversations_info(self, params: dict[str, Any]) -> web.Response:
        info = self.channels.get(str(params.get("channel")))
        if info is None:
            return _error("channel_not_found")
        scope = f"{_READ_SCOPE[info['kind']]}:read"
        if scope not in self.scopes:
            return _missing_scope(scope)
        return _ok(channel={k: v for k, v in info.items() if k != "kind"})

    def _api_conversations_history(self, params: dict[str, Any]) -> web.Response:
        found = self._readable(params, "history")
        if isinstance(found, web.Response):
            return found
        top = [m for m in found if m.get("thread_ts", m["ts"]) == m["ts"]]
        chosen = _window(top, params)[::-1]
        return _page(_with_metadata(chosen, params), params)

    def _api_conversations_replies(self, params: dict[str, Any]) -> web.Response:
        found = self._readable(params, "history")
        if isinstance(found, web.Response):
            return found
        root = str(params.get("ts"))
        thread = [m for m in found if m["ts"] == root or m.get("thread_ts") == root]
        if not thread:
            return _error("thread_not_found")
        return _page(_with_metadata(_window(thread, params), params), params)

    def _readable(self, params: dict[str, Any], what: str) -> list[dict[str, Any]] | web.Response:
        channel = str(params.get("channel"))
        info = self.channels.get(channel)
        if info is None:
            return _error("channel_not_found")
        scope = f"{_READ_SCOPE[info['kind']]}:{what}"
        if scope not in self.scopes:
            return _missing_scope(scope)
        return sorted(self.messages.get(channel, []), key=lambda m: float(m["ts"]))

    def _api_chat_postMessage(self, params: dict[str, Any]) -> web.Response:
        if "chat:write" not in self.scopes:
            return _missing_scope("chat:write")
        channel = str(params.get("channel", ""))
        text = params.get("text")
        if channel not in self.channels:
            return _error("channel_not_found")
        if not text:
            return _error("no_text")
        if len(str(text)) > MAX_TEXT:
            return _error("msg_too_long")
        metadata = _metadata(params.get("metadata"))
        if isinstance(metadata, web.Response):
            return metadata
        if not _good_blocks(params.get("blocks")):
            return _error("invalid_blocks")
        thread_ts = params.get("thread_ts") or None
        if thread_ts:  # Slack takes the status down once the app replies in the thread
            self.thread_status.pop((channel, str(thread_ts)), None)
        extra = {"metadata": metadata} if metadata else {}
        message = self.say(
            channel, BOT_USER, str(text), thread_ts=thread_ts, bot_id=BOT_ID, **extra
        )
        self.posts.append(
            {
                "channel": channel,
                "text": str(text),
                "thread_ts": thread_ts,
                "ts": message["ts"],
                "metadata": metadata,
                "at": time.monotonic(),
                "blocks": _json_value(params.get("blocks")) or [],
            }
        )
        return _ok(channel=channel, ts=message["ts"], message=message)

    # --- streaming and edits -------------------------------------------------------------------

    def _post_of(self, channel: str, ts: str) -> dict[str, Any] | None:
        return next((p for p in self.posts if p["channel"] == channel and p["ts"] == ts), None)

    def _message_of(self, channel: str, ts: str) -> dict[str, Any] | None:
        found = (m for m in self.messages.get(channel, []) if m["ts"] == ts)
        return next(found, None)

    def _set_text(self, channel: str, ts: str, text: str) -> None:
        post, message = self._post_of(channel, ts), self._message_of(channel, ts)
        if post is not None:
            post["text"] = text
        if message is not None:
            message["text"] = text

    def _api_chat_startStream(self, params: dict[str, Any]) -> web.Response:
        if "chat:write" not in self.scopes:
            return _missing_scope("chat:write")
        channel, thread_ts = str(params.get("channel", "")), params.get("thread_ts")
        if channel not in self.channels:
            return _error("channel_not_found")
        if not thread_ts:
            return _error("invalid_arguments")  # Slack streams only into a thread
        if self._message_of(channel, str(thread_ts)) is None:
            return _error("message_not_found")
        dm = self.channels[channel]["kind"] == "im"
        if not dm and not (params.get("recipient_user_id") and params.get("recipient_team_id")):
            return _error("invalid_arguments")
        chunked = self._chunk_text(params)
        if isinstance(chunked, web.Response):
            return chunked
        if params.get("task_display_mode") not in (None, "timeline", "plan"):
            return _error("invalid_arguments")
        text = str(params.get("markdown_text") or "") + chunked
        if len(text) > MAX_MARKDOWN:
            return _error("msg_too_long")
        message = self.say(channel, BOT_USER, text, thread_ts=str(thread_ts), bot_id=BOT_ID)
        message["streaming"] = True
        self.thread_status.pop((channel, str(thread_ts)), None)  # a reply clears the status
        self.posts.append(
            {
                "channel": channel,
                "text": text,
                "thread_ts": str(thread_ts),
                "ts": message["ts"],
                "metadata": None,
                "at": time.monotonic(),
                "stream": True,
            }
        )
        self._take_tasks(message["ts"], params)
        return _ok(channel=channel, ts=message["ts"])

    def _chunk_text(self, params: dict[str, Any]) -> str | web.Response:
        """The text a call's `chunks` add (checked, tasks not yet applied)."""
        chunks = params.get("chunks")
        if chunks is None:
            return ""
        if not isinstance(chunks, list):
            return _error("invalid_chunks")
        text = ""
        for chunk in chunks:
            kind = chunk.get("type") if isinstance(chunk, dict) else None
            if kind not in CHUNK_TYPES:
                return _error("invalid_chunks")
            if kind == "markdown_text":
                if not isinstance(chunk.get("text"), str):
                    return _error("invalid_chunks")
                text += chunk["text"]
            if kind == "task_update" and not _good_task(chunk):
                return _error("invalid_chunks")
        return text

    def _take_tasks(self, ts: str, params: dict[str, Any]) -> None:
        for chunk in params.get("chunks") or []:
            if chunk.get("type") == "task_update":
                task = {k: chunk[k] for k in ("id", "title", "status") if k in chunk}
                self.tasks.setdefault(ts, {})[str(chunk["id"])] = task
                self.task_log.append((ts, str(chunk["id"]), str(chunk["status"])))

    def _streaming(self, params: dict[str, Any]) -> dict[str, Any] | web.Response:
        message = self._own(params, "cant_update_message")
        if isinstance(message, web.Response):
            return message
        if not message.get("streaming"):
            return _error("message_not_in_streaming_state")
        return message

    def _api_chat_appendStream(self, params: dict[str, Any]) -> web.Response:
        message = self._streaming(params)
        if isinstance(message, web.Response):
            return message
        chunked = self._chunk_text(params)
        if isinstance(chunked, web.Response):
            return chunked
        text = str(params.get("markdown_text") or "") + chunked
        if not text and not params.get("chunks"):
            return _error("invalid_arguments")
        if len(text) > MAX_MARKDOWN:
            return _error("msg_too_long")
        self._set_text(str(params["channel"]), message["ts"], message["text"] + text)
        self._take_tasks(message["ts"], params)
        return _ok(channel=params["channel"], ts=message["ts"])

    def _api_chat_stopStream(self, params: dict[str, Any]) -> web.Response:
        message = self._streaming(params)
        if isinstance(message, web.Response):
            return message
        text = str(params.get("markdown_text") or "")
        if len(text) > MAX_MARKDOWN:
            return _error("msg_too_long")
        metadata = _metadata(params.get("metadata"))
        if isinstance(metadata, web.Response):
            return metadata
        channel = str(params["channel"])
        self._set_text(channel, message["ts"], message["text"] + text)
        message["streaming"] = False
        if metadata:
            message["metadata"] = metadata
            post = self._post_of(channel, message["ts"])
            if post is not None:
                post["metadata"] = metadata
        return _ok(channel=channel, ts=message["ts"], message=message)

    def _own(self, params: dict[str, Any], refusal: str) -> dict[str, Any] | web.Response:
        if "chat:write" not in self.scopes:
            return _missing_scope("chat:write")
        channel, ts = str(params.get("channel", "")), str(params.get("ts", ""))
        if channel not in self.channels:
            return _error("channel_not_found")
        message = self._message_of(channel, ts)
        if message is None:
            return _error("message_not_found")
        if message.get("user") != BOT_USER:
            return _error(refusal)
        return message

    def _api_chat_update(self, params: dict[str, Any]) -> web.Response:
        message = self._own(params, "cant_update_message")
        if isinstance(message, web.Response):
            return message
        if not _good_blocks(params.get("blocks")):
            return _error("invalid_blocks")
        text = params.get("text")
        if not text:
            return _error("no_text")
        if len(str(text)) > MAX_TEXT:
            return _error("msg_too_long")
        metadata = _metadata(params.get("metadata"))
        if isinstance(metadata, web.Response):
            return metadata
        channel = str(params["channel"])
        self._set_text(channel, message["ts"], str(text))
        post = self._post_of(channel, message["ts"])
        if post is not None:  # the blocks sent replace the message's blocks
            post["blocks"] = _json_value(params.get("blocks")) or []
        if metadata:
            message["metadata"] = metadata
            post = self._post_of(channel, message["ts"])
            if post is not None:
                post["metadata"] = metadata
        return _ok(channel=channel, ts=message["ts"], text=str(text))

    def _api_chat_delete(self, params: dict[str, Any]) -> web.Response:
        message = self._own(params, "cant_delete_message")
        if isinstance(message, web.Response):
            return message
        channel = str(params["channel"])
        self.messages[channel].remove(message)
        post = self._post_of(channel, message["ts"])
        if post is not None:
            self.posts.remove(post)
            self.deleted.append(post)
        return _ok(channel=channel, ts=message["ts"])

    def _api_reactions_add(self, params: dict[str, Any]) -> web.Response:
        if "reactions:write" not in self.scopes:
            return _missing_scope("reactions:write")
        key = ("add", str(params.get("channel")), str(params.get("timestamp")))
        name = str(params.get("name"))
        if self._reacted(key[1], key[2], name):
            return _error("already_reacted")
        self.reactions.append((*key, name))
        return _ok()

    def _api_reactions_remove(self, params: dict[str, Any]) -> web.Response:
        if "reactions:write" not in self.scopes:
            return _missing_scope("reactions:write")
        channel, ts, name = (str(params.get(k)) for k in ("channel", "timestamp", "name"))
        if not self._reacted(channel, ts, name):
            return _error("no_reaction")
        self.reactions.append(("remove", channel, ts, name))
        return _ok()

    def _api_assistant_threads_setStatus(self, params: dict[str, Any]) -> web.Response:
        found = self._assistant_thread(params, ("assistant:write", "chat:write"))
        if isinstance(found, web.Response):
            return found
        status = params.get("status")
        loading = _json_value(params.get("loading_messages"))
        if not isinstance(status, str):
            return _error("invalid_arguments")
        if loading is not None and not (
            isinstance(loading, list)
            and len(loading) <= MAX_LOADING_MESSAGES
            and all(isinstance(m, str) for m in loading)
        ):
            return _error("invalid_arguments")
        self.status_log.append((*found, status))
        if status:
            self.thread_status[found] = status
        else:
            self.thread_status.pop(found, None)
        return _ok()

    def _api_assistant_threads_setSuggestedPrompts(self, params: dict[str, Any]) -> web.Response:
        top = not params.get("thread_ts")  # agent messaging: the top of the Messages tab
        found = self._assistant_thread(params, ("assistant:write",), thread_optional=top)
        if isinstance(found, web.Response):
            return found
        prompts = _json_value(params.get("prompts"))
        title = params.get("title")
        if not (
            isinstance(prompts, list)
            and 1 <= len(prompts) <= MAX_PROMPTS
            and all(_is_prompt(p) for p in prompts)
            and (title is None or isinstance(title, str))
        ):
            return _error("invalid_arguments")
        self.suggested[found] = {"title": title, "prompts": prompts}
        return _ok()

    def _api_assistant_threads_setTitle(self, params: dict[str, Any]) -> web.Response:
        found = self._assistant_thread(params, ("assistant:write",))
        if isinstance(found, web.Response):
            return found
        title = params.get("title")
        if not isinstance(title, str) or not title.strip() or len(title) > MAX_THREAD_TITLE:
            return _error("invalid_arguments")
        self.titles[found] = title
        return _ok()

    def _assistant_thread(
        self, params: dict[str, Any], scopes: tuple[str, ...], *, thread_optional: bool = False
    ) -> tuple[str, str] | web.Response:
        """The (channel, thread) an assistant.threads.* call names, or Slack's refusal."""
        if not any(scope in self.scopes for scope in scopes):
            return _missing_scope(scopes[0])
        if not self.assistant_view:
            return _error(ASSISTANT_OFF)
        channel, thread = params.get("channel_id"), params.get("thread_ts")
        if thread_optional and isinstance(channel, str):
            info = self.channels.get(channel)
            return (
                (channel, "")
                if info is not None and info["kind"] == "im"
                else _error("channel_not_found")
            )
        if not (isinstance(channel, str) and channel and isinstance(thread, str) and thread):
            return _error("invalid_arguments")
        info = self.channels.get(channel)
        if info is None or info["kind"] != "im":
            return _error("channel_not_found")
        if not any(m["ts"] == thread for m in self.messages.get(channel, [])):
            return _error("invalid_thread_ts")
        return channel, thread

    def _reacted(self, channel: str, ts: str, name: str) -> bool:
        state = 0
        for action, c, t, n in self.reactions:
            if (c, t, n) == (channel, ts, name):
                state = 1 if action == "add" else 0
        return state == 1


_STREAM_METHODS = frozenset({"chat.startStream", "chat.appendStream", "chat.stopStream"})


async def _params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.method == "POST" and request.can_read_body:
        if request.content_type == "application/json":
            body = await request.json()
            if isinstance(body, dict):
                params.update(body)
        else:
            params.update(dict(await request.post()))
    return params


def _json_value(value: Any) -> Any:
    """An array or object argument: as sent in a JSON body, or a JSON string in a form."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _is_prompt(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {"title", "message"}
        and all(isinstance(value[k], str) and value[k].strip() for k in ("title", "message"))
    )


def _metadata(value: Any) -> dict[str, Any] | web.Response | None:
    """chat.postMessage's `metadata`: an object (a JSON string when form-encoded) with an
    `event_type` and an object `event_payload`, as Slack checks it."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return _error("invalid_metadata_format")
    if not isinstance(value, dict) or set(value) - {"event_type", "event_payload"}:
        return _error("invalid_metadata_format")
    event_type, payload = value.get("event_type"), value.get("event_payload")
    if not isinstance(event_type, str) or not _EVENT_TYPE.match(event_type):
        return _error("invalid_metadata_format")
    if not isinstance(payload, dict):
        return _error("invalid_metadata_format")
    return {"event_type": event_type, "event_payload": payload}


def _with_metadata(messages: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
    """Like Slack: a message's metadata is returned only with `include_all_metadata`."""
    if str(params.get("include_all_metadata", "")).lower() in ("1", "true"):
        return messages
    return [{k: v for k, v in m.items() if k != "metadata"} for m in messages]


def _window(messages: list[dict[str, Any]], params: dict[str, Any]) -> list[dict[str, Any]]:
    """Messages between `oldest` and `latest` (exclusive unless `inclusive`), oldest first."""
    inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
    latest = float(params.get("latest") or "inf")
    oldest = float(params.get("oldest") or 0)

    def inside(ts: float) -> bool:
        if inclusive:
            return oldest <= ts <= latest
        return oldest < ts < latest

    return [m for m in messages if inside(float(m["ts"]))]


def _page(messages: list[dict[str, Any]], params: dict[str, Any]) -> web.Response:
    start = int(params.get("cursor") or 0)
    limit = max(1, min(1000, int(params.get("limit") or 100)))
    chunk = messages[start : start + limit]
    more = start + limit < len(messages)
    metadata = {"next_cursor": str(start + limit) if more else ""}
    return _ok(messages=chunk, has_more=more, response_metadata=metadata)


def _shared(files: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The fields a message with files carries (Slack marks it a `file_share`)."""
    if not files:
        return {}
    return {"files": files, "upload": True, "subtype": "file_share", "display_as_bot": False}


def _ok(**fields: Any) -> web.Response:
    return web.json_response({"ok": True, **fields})


def _error(
    error: str, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response({"ok": False, "error": error}, status=status, headers=headers)


def _missing_scope(needed: str) -> web.Response:
    return web.json_response(
        {"ok": False, "error": "missing_scope", "needed": needed, "provided": "chat:write"}
    )


def _good_task(chunk: dict[str, Any]) -> bool:
    """A task_update chunk as slack_sdk's TaskUpdateChunk builds it, within the (assumed) bounds."""
    title = chunk.get("title")
    return (
        isinstance(chunk.get("id"), str)
        and bool(chunk["id"])
        and isinstance(title, str)
        and 0 < len(title) <= MAX_TASK_TITLE
        and chunk.get("status") in TASK_STATUSES
    )


MAX_TABLE_ROWS, MAX_TABLE_CELLS, MAX_SECTION_TEXT = 100, 20, 3000


def _good_blocks(value: Any) -> bool:
    """The blocks a message may carry, as far as the fake checks them: `section` text within
    3,000 characters, and at most one `table` (Slack shows one per message; an assumption of
    the fake) of 1-100 rows of 1-20 `raw_text` / `raw_number` / `rich_text` cells, raw text
    non-empty (slack_sdk's RawTextObject asks for one character at least)."""
    blocks = _json_value(value)
    if blocks is None:
        return True
    if not isinstance(blocks, list):
        return False
    tables = [b for b in blocks if isinstance(b, dict) and b.get("type") == "table"]
    sections = [b for b in blocks if isinstance(b, dict) and b.get("type") == "section"]
    if len(tables) > 1 or not all(_good_table(t) for t in tables):
        return False
    return all(
        len(str((s.get("text") or {}).get("text", ""))) <= MAX_SECTION_TEXT for s in sections
    )


def _good_table(table: dict[str, Any]) -> bool:
    rows = table.get("rows")
    if not isinstance(rows, list) or not 0 < len(rows) <= MAX_TABLE_ROWS:
        return False
    for row in rows:
        if not isinstance(row, list) or not 0 < len(row) <= MAX_TABLE_CELLS:
            return False
        for cell in row:
            kind = cell.get("type") if isinstance(cell, dict) else None
            if kind not in ("raw_text", "raw_number", "rich_text"):
                return False
            if kind == "raw_text" and not str(cell.get("text") or ""):
                return False
    return True

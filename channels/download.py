"""Downloading a shared file from its platform, bounded and only from the platform itself.

Shared by the Slack and Telegram channels (each passes its own origin and credentials). The URL
must start with the platform's file prefix once normalized (a `../` or an encoded `%2e%2e` in a
file path reported by the platform cannot climb out of it) and is fetched exactly as checked;
redirects are never followed (a file URL that points
elsewhere is refused, so a token is never sent to another host); the declared length is checked
before reading and the bytes are counted while reading, stopping at the cap. Errors never carry the
URL, which holds a token on Telegram and a private link on Slack.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
from yarl import URL

from bot.errors import FileRefused

CHUNK = 64 * 1024
TIMEOUT = aiohttp.ClientTimeout(total=120, sock_connect=15, sock_read=30)


async def download(
    session: aiohttp.ClientSession,
    url: str,
    *,
    prefix: str,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The body at `url` (which must start with `prefix`), at most `max_bytes` long."""
    target = within(url, prefix)
    if target is None:
        raise FileRefused("refused", "the file URL is not on the platform's own file host")
    try:
        async with session.get(
            target, headers=dict(headers or {}), allow_redirects=False, timeout=TIMEOUT
        ) as response:
            _check(response, max_bytes)
            return await _read(response, max_bytes)
    except aiohttp.ClientError as exc:
        raise FileRefused("failed", f"download failed: {type(exc).__name__}") from None
    except TimeoutError:
        raise FileRefused("failed", "download timed out") from None


def within(url: str, prefix: str) -> URL | None:
    """`url` normalized, when it is still under `prefix`; None when it climbs out (or is not a
    URL at all)."""
    try:
        target = URL(url)
        base = str(URL(prefix))
    except (ValueError, TypeError):
        return None
    if not target.absolute or not str(target).startswith(base):
        return None
    # `..%2f` stays inside as written, but a server that decodes it would climb: refused too.
    if any(part in (".", "..") for part in target.path.split("/")):
        return None
    return target


def _check(response: aiohttp.ClientResponse, max_bytes: int) -> None:
    if 300 <= response.status < 400:
        raise FileRefused("refused", f"the platform redirected the download ({response.status})")
    if response.status in (401, 403, 404, 410):
        raise FileRefused("refused", f"the platform refused the download ({response.status})")
    if response.status != 200:
        raise FileRefused("failed", f"the platform answered {response.status}")
    if response.content_type == "text/html":
        # Slack answers a file URL it will not serve to this token with its sign-in page.
        raise FileRefused("refused", "the platform answered with a web page, not the file")
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise FileRefused("too_large", f"declared length {declared} is over {max_bytes}")


async def _read(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    received = bytearray()
    async for chunk in response.content.iter_chunked(CHUNK):
        received += chunk
        if len(received) > max_bytes:
            raise FileRefused("too_large", f"more than {max_bytes} bytes arrived; stopped")
    return bytes(received)

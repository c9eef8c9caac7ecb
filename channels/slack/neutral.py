"""The model's Markdown made inert for Slack's native streams (`chat.startStream`/`appendStream`).

Posts and edits carry mrkdwn from `channels.slack.mrkdwn`, which escapes every `<` and checks
every link. A native stream instead hands Slack the model's Markdown, which Slack renders itself,
so `<!channel>`, `<@U…>` or `<https://evil|https://good>` would be live there. `stream_text`
rewrites the Markdown so that nothing in it can ping or mislead, whatever Slack's parser makes
of it: a word joiner (U+2060, invisible) after every `<` and every `]` that does not close a link
we checked, and after every `@` (`@here`, `@channel`, a person's name). A link `[text](url)` stays
live only when its URL is http(s) and its text names no other address (`bot.linkcheck`); otherwise
its text is followed by the address, in parentheses. The stream shows this only while the answer
is written: finishing replaces the message's text with the checked mrkdwn.

The rewrite is of the text so far; a link still being written at its end is held back until it
is complete, so what was streamed stays a prefix of what is streamed next.
"""

from __future__ import annotations

import re

from bot.linkcheck import misleading

JOINER = "\u2060"
_LINK = re.compile(r"\[([^\[\]\n]{1,500})\]\((https?://[^\s()<>\[\]]{1,2000})\)")
_INERT = re.compile(r"[<\]@]")
_HELD = 2600  # the longest link the held-back tail may be: more is not a link we keep live


def stream_text(markdown: str) -> str:
    """The Markdown a native stream may show of `markdown` (the answer so far)."""
    return _inert(_settled(markdown))


def _settled(markdown: str) -> str:
    """`markdown` without a link still being written at its end."""
    start = markdown.rfind("[")
    if start < 0 or len(markdown) - start > _HELD or "\n" in markdown[start:]:
        return markdown
    return markdown if _LINK.match(markdown, start) else markdown[:start]


def _inert(markdown: str) -> str:
    pieces: list[str] = []
    done = 0
    for link in _LINK.finditer(markdown):
        pieces.append(_joined(markdown[done : link.start()]))
        label, url = link.group(1), link.group(2)
        if misleading(label, url):
            pieces.append(f"{_joined(label)} ({_joined(url)})")
        else:
            pieces.append(f"[{_joined(label)}]({_joined(url)})")
        done = link.end()
    pieces.append(_joined(markdown[done:]))
    return "".join(pieces)


def _joined(text: str) -> str:
    return _INERT.sub(lambda m: m.group() + JOINER, text)

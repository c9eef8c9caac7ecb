"""Whatever people, tools or models wrote is text on every console page: rendered with hostile
names, messages, tool arguments, surfaces and keys, a page has exactly the elements and attribute
names it has with plain text in their place (nothing anyone wrote becomes a tag or an attribute)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.console.charts import bar_chart
from bot.console.render import Renderer
from bot.usage import Line

HOSTILE = st.one_of(
    st.text(min_size=1, max_size=40),
    st.sampled_from(
        [
            "<script>alert(1)</script>",
            '<img src=x onerror="alert(1)">',
            '"><svg onload=alert(1)>',
            "'><b>x</b>",
            "</pre></textarea><b>",
            "<!-- x --><x y='z'>",
            "{{ 7*7 }}{% raw %}",
            "&lt;b&gt; &amp;",
            "javascript:alert(1)",
        ]
    ),
)
RENDERER = Renderer("/console", secrets=(), nav=[("", "Overview"), ("usage", "Usage")])


class Shape(HTMLParser):
    """The elements of a page and their attribute names, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(name for name, _ in attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(("/" + tag, ()))


def shape(html: str) -> list[tuple[str, tuple[str, ...]]]:
    parser = Shape()
    parser.feed(html)
    parser.close()
    return parser.tags


def pages(text: str) -> dict[str, dict[str, Any]]:
    """Every page that shows what someone wrote, with `text` in each such place."""
    message = {
        "role": "user",
        "speaker": text,
        "at": "t",
        "summary": False,
        "parts": [{"kind": "text", "text": text}, {"kind": "tool", "text": text}],
    }
    line = Line(text, turns=1)
    return {
        "conversation.html": {
            "title": text,
            "key": text,
            "messages": [message],
            "turns": [
                {"id": text, "at": "t", "outcome": text, "latency": 1.0, "input": 1, "output": 1}
            ],
        },
        "conversations.html": {
            "title": "c",
            "lines": [
                {
                    "key": text,
                    "channel": text,
                    "agent": "default",
                    "surfaces": [text],
                    "people": [text],
                    "last": "t",
                    "messages": 1,
                }
            ],
            "surfaces": [text],
            "people": [text],
            "surface": text,
            "person": text,
            "notice": text,
        },
        "turn.html": {
            "title": "t",
            "turn": {
                "turn_id": text,
                "conversation_key": text,
                "channel": text,
                "started_at": text,
                "finished_at": text,
                "outcome": text,
                "error": text,
            },
            "usage": {},
            "trace_id": text,
            "tool_calls": [{"tool": text, "arguments": text, "outcome": text}],
            "request_json": text,
            "details_json": text,
        },
        "approvals.html": {
            "title": "a",
            "notice": text,
            "approver": text,
            "decided": [],
            "pending": [
                {
                    "id": text,
                    "tool": text,
                    "arguments": text,
                    "requester": text,
                    "approvers": text,
                    "asked": "t",
                    "expires": "t",
                    "conversation": text,
                }
            ],
        },
        "memory.html": {
            "title": "m",
            "query": text,
            "notice": text,
            "count": 1,
            "hits": [
                {
                    "id": text,
                    "text": text,
                    "conversation": text,
                    "surface": text,
                    "person": text,
                    "at": "t",
                    "origin": text,
                }
            ],
        },
        "usage.html": {
            "title": "u",
            "tables": {"surface": [line, Line("total")]},
            "window": {"day": "", "days": 30},
            "total": Line("total"),
            "cost_chart": bar_chart([(text, 1.0)]),
            "tokens_chart": bar_chart([(text, 1.0)]),
            "surface_chart": bar_chart([(text, 2.0)]),
        },
        "audit.html": {
            "title": "a",
            "entries": [
                {"at": "t", "operator": text, "action": text, "target": text, "outcome": text}
            ],
        },
        "error.html": {"title": text, "message": text},
        "access.html": {
            "title": "a",
            "notice": text,
            "people": [{"person": text, "label": text, "at": "t"}],
            "asking": [{"person": text, "label": text, "expires": "t"}],
        },
    }


@settings(max_examples=25, deadline=None)
@given(HOSTILE)
@example('<img src=x onerror="alert(1)">')
@example("</pre><script>alert(1)</script>")
def test_hostile_text_never_becomes_an_element_or_an_attribute(text: str) -> None:
    plain = pages("plain")
    for template, context in pages(text).items():
        hostile = RENDERER.html(template, None, **context)
        assert shape(hostile) == shape(RENDERER.html(template, None, **plain[template])), template

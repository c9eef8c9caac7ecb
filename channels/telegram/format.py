"""Markdown to Telegram HTML: the subset of tags Telegram accepts, every special character escaped.

The model writes CommonMark (with strikethrough and tables). Telegram's HTML mode knows a handful
of tags and three named entities, and it rejects a message whose markup breaks its nesting rules
("can't parse entities"). This module renders conservatively so that never happens:

- text is escaped (`&`, `<`, `>`), attribute values also (`"`);
- headings become bold, lists become bullet or numbered lines, tables and code blocks become
  `<pre>` blocks, a horizontal rule becomes a line of dashes;
- `code` and `pre` never sit inside another entity (Telegram forbids it), so inline code inside
  bold, a link or a quote is rendered as its bare text;
- quotes are never nested, and a quote holds only bold, italic and strikethrough;
- links keep their tag only for http(s)/tg URLs of bounded length; otherwise the URL is written
  out after the link text, so a link never becomes a tag the splitter cannot carry across parts.

`plain_text` is the inverse used for the plain-text fallback: tags dropped, entities decoded.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from bot.linkcheck import misleading

# Tags carried across a split are re-opened in every part, so their length is bounded: a longer
# (escaped) URL is written out as text instead (text can be split anywhere).
MAX_HREF_LENGTH = 512
# Bold inside italic inside strikethrough is plenty; deeper nesting drops the extra tags.
MAX_INLINE_DEPTH = 3
_LINK_SCHEMES = ("http://", "https://")
# Telegram reads tg:// addresses as live even in plain text (a user mention, a join link); a word
# joiner after the colon keeps the text readable and dead.
_TG_ADDRESS = re.compile(r"(?i)(tg:)(//)")
_LANGUAGE = re.compile(r"^[A-Za-z0-9_+#.-]{1,32}$")
_RULE = "——————"

_markdown = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])

_INLINE_TAGS = {"strong": "b", "em": "i", "s": "s"}


def escape(text: str) -> str:
    """Escape text for Telegram HTML: exactly the three characters it requires."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attribute(value: str) -> str:
    return escape(value).replace('"', "&quot;")


_TAG = re.compile(r"<[^>]*>")


def plain_text(formatted: str) -> str:
    """The text a reader sees in `formatted` HTML: tags removed, entities decoded."""
    return html.unescape(_TAG.sub("", formatted))


def to_telegram_html(markdown: str) -> str:
    """Render Markdown as Telegram HTML whose every tag and entity Telegram accepts."""
    root = SyntaxTreeNode(_markdown.parse(markdown))
    return _TG_ADDRESS.sub("\\1\u2060\\2", _blocks(root.children, _Context()).strip("\n"))


@dataclass(frozen=True, slots=True)
class _Context:
    in_quote: bool = False
    in_link: bool = False
    depth: int = 0  # open inline formatting tags (b, i, s)

    @property
    def allows_code(self) -> bool:
        return not (self.in_quote or self.in_link or self.depth)


# --- blocks -------------------------------------------------------------------------------------


def _blocks(nodes: list[SyntaxTreeNode], ctx: _Context, separator: str = "\n\n") -> str:
    rendered = (_block(node, ctx) for node in nodes)
    return separator.join(part for part in rendered if part)


def _block(node: SyntaxTreeNode, ctx: _Context) -> str:
    kind = node.type
    if kind == "paragraph":
        return _inline_children(node, ctx)
    if kind == "heading":
        return _wrap("b", _inline_children(node, replace(ctx, depth=ctx.depth + 1)), ctx)
    if kind == "blockquote":
        return _quote(node, ctx)
    if kind in ("bullet_list", "ordered_list"):
        return _list(node, ctx, indent="")
    if kind in ("fence", "code_block"):
        return _code_block(node.content, node.info if kind == "fence" else "", ctx)
    if kind == "table":
        return _code_block(_table_text(node), "", ctx)
    if kind == "hr":
        return _RULE
    # Anything else (html is disabled, so this is rare) keeps its text, escaped.
    return escape(node.content)


def _quote(node: SyntaxTreeNode, ctx: _Context) -> str:
    if ctx.in_quote:  # Telegram quotes cannot nest: the inner one is folded into the outer.
        return _blocks(node.children, ctx, "\n")
    inner = _blocks(node.children, replace(ctx, in_quote=True), "\n")
    return f"<blockquote>{inner}</blockquote>" if inner else ""


def _list(node: SyntaxTreeNode, ctx: _Context, indent: str) -> str:
    ordered = node.type == "ordered_list"
    number = int(str(node.attrs.get("start", 1))) if ordered else 0
    lines: list[str] = []
    for item in node.children:
        marker = f"{number}. " if ordered else "• "
        number += 1
        lines.append(indent + marker + _list_item(item, ctx, indent + "   "))
    return "\n".join(lines)


def _list_item(item: SyntaxTreeNode, ctx: _Context, indent: str) -> str:
    pieces: list[str] = []
    for child in item.children:
        if child.type in ("bullet_list", "ordered_list"):
            pieces.append(_list(child, ctx, indent))
        else:
            pieces.append(_block(child, ctx).replace("\n", "\n" + indent))
    return "\n".join(piece for piece in pieces if piece)


def _code_block(content: str, info: str, ctx: _Context) -> str:
    body = escape(content.removesuffix("\n"))
    if not body:
        return ""
    if ctx.in_quote:
        return body
    language = info.split(maxsplit=1)[0] if info.strip() else ""
    if _LANGUAGE.match(language):
        return f'<pre><code class="language-{language}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _table_text(table: SyntaxTreeNode) -> str:
    rows: list[list[str]] = []
    for section in table.children:
        for row in section.children:
            rows.append([_plain_inline(cell) for cell in row.children])
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    lines = [
        " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    if len(lines) > 1:
        lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines) + "\n"


def _plain_inline(node: SyntaxTreeNode) -> str:
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain_inline(child) for child in node.children)


# --- inline -------------------------------------------------------------------------------------


def _inline_children(node: SyntaxTreeNode, ctx: _Context) -> str:
    return "".join(_inline(child, ctx) for child in _inline_nodes(node))


def _inline_nodes(node: SyntaxTreeNode) -> list[SyntaxTreeNode]:
    children = node.children
    if len(children) == 1 and children[0].type == "inline":
        return children[0].children
    return children


def _inline(node: SyntaxTreeNode, ctx: _Context) -> str:
    kind = node.type
    if kind == "text":
        return escape(node.content)
    if kind in ("softbreak", "hardbreak"):
        return "\n"
    if kind == "code_inline":
        code = escape(node.content)
        return f"<code>{code}</code>" if ctx.allows_code else code
    if kind in _INLINE_TAGS:
        inner = "".join(
            _inline(child, replace(ctx, depth=ctx.depth + 1)) for child in node.children
        )
        return _wrap(_INLINE_TAGS[kind], inner, ctx)
    if kind in ("link", "image"):
        return _link(node, ctx)
    return escape(node.content)


def _wrap(tag: str, inner: str, ctx: _Context) -> str:
    if not inner.strip() or ctx.depth >= MAX_INLINE_DEPTH:
        return inner
    return f"<{tag}>{inner}</{tag}>"


def _link(node: SyntaxTreeNode, ctx: _Context) -> str:
    url = str(node.attrs.get("href") or node.attrs.get("src") or "")
    inner_ctx = replace(ctx, in_link=True)
    label = "".join(_inline(child, inner_ctx) for child in node.children)
    href = escape_attribute(url)
    linkable = (
        url.startswith(_LINK_SCHEMES)
        and len(href) <= MAX_HREF_LENGTH
        and not ctx.in_quote
        and not ctx.in_link
        and label.strip()
        and not misleading(plain_text(label), url)
    )
    if linkable:
        return f'<a href="{href}">{label}</a>'
    if not url or plain_text(label) == url:
        return label or escape(url)
    return f"{label} ({escape(url)})" if label.strip() else escape(url)

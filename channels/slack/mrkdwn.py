"""Markdown (what the model writes) to Slack mrkdwn (what Slack renders).

Slack's format is not Markdown: bold is `*x*`, italics `_x_`, strikethrough `~x~`, links are
`<url|label>`, and there are no headings, tables or nested code. `&`, `<` and `>` must be escaped
everywhere, including inside code, because Slack reads `<...>` as its own markup (a stray
`<!channel>` in an answer would notify everyone). Headings become bold lines, lists get bullet or
number prefixes, tables become an aligned code block.

Code fences are only ever emitted as whole lines of three backticks, which is what
`channels.slack.split` counts on when it closes and reopens a block across parts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from bot.linkcheck import misleading
from channels.slack.split import FENCE

# Raw HTML in an answer is shown as text, never interpreted.
_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
_BULLETS = ("•", "◦", "▪")
_INDENT = "    "
_RULE = "───────"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def escape(text: str) -> str:
    """Escape the three characters Slack reserves for its own markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def to_mrkdwn(markdown: str) -> str:
    """Render Markdown as Slack mrkdwn."""
    root = SyntaxTreeNode(_PARSER.parse(markdown))
    return _blocks(root.children, depth=0).strip("\n")


def _blocks(nodes: Iterable[SyntaxTreeNode], depth: int) -> str:
    return "\n\n".join(text for node in nodes if (text := _block(node, depth)))


def _block(node: SyntaxTreeNode, depth: int) -> str:
    kind = node.type
    if kind == "paragraph":
        return _inline_of(node)
    if kind == "heading":
        title = _inline_of(node, plain=True)
        return f"*{title}*" if title.strip() else ""
    if kind in ("bullet_list", "ordered_list"):
        return _list(node, depth)
    if kind == "blockquote":
        inner = _blocks(node.children, depth)
        return "\n".join(f"> {_demote_quote(line)}" if line else ">" for line in inner.split("\n"))
    if kind in ("fence", "code_block"):
        return _code(node.content)
    if kind == "hr":
        return _RULE
    if kind == "table":
        return _table(node)
    return escape(node.content)


def _demote_quote(line: str) -> str:
    """Slack quotes only a `>` that starts a line and cannot nest them: a quote marker that
    would end up inside a line (a quote in a list or in a quote) is shown as text."""
    return "&gt;" + line[1:] if line.startswith(">") else line


def _code(content: str) -> str:
    body = escape(content.rstrip("\n"))
    # A line of backticks inside the code would end Slack's block early; a zero-width space
    # after the first backtick keeps it visible and inert.
    body = "\n".join(
        line.replace(FENCE, "`\u200b``") if FENCE in line else line for line in body.split("\n")
    )
    return f"{FENCE}\n{body}\n{FENCE}"


def _list(node: SyntaxTreeNode, depth: int) -> str:
    ordered = node.type == "ordered_list"
    number = int(str(node.attrs.get("start", 1))) if ordered else 0
    bullet = _BULLETS[depth % len(_BULLETS)]
    items: list[str] = []
    separator = "\n" if _is_tight(node) else "\n\n"
    for offset, item in enumerate(node.children):
        marker = f"{number + offset}." if ordered else bullet
        items.append(_item(item, marker, depth, separator))
    return separator.join(items)


def _is_tight(node: SyntaxTreeNode) -> bool:
    # markdown-it hides the paragraphs of a tight list; a loose list shows them.
    return all(
        child.hidden
        for item in node.children
        for child in item.children
        if child.type == "paragraph"
    )


def _item(item: SyntaxTreeNode, marker: str, depth: int, separator: str) -> str:
    pad = _INDENT * depth
    body = separator.join(
        text
        for child in item.children
        if (text := _block(child, depth + 1 if child.type.endswith("_list") else depth))
    )
    lines = [_demote_quote(line) for line in body.split("\n")] if body else [""]
    first = f"{pad}{marker} {lines[0].lstrip()}".rstrip()
    rest = [_continuation(line, pad) for line in lines[1:]]
    return "\n".join([first, *rest])


def _continuation(line: str, pad: str) -> str:
    if not line or line.startswith((pad + _INDENT, FENCE)) or line.lstrip().startswith(_BULLETS):
        return line
    return f"{pad}  {line}"


def _table(node: SyntaxTreeNode) -> str:
    rows = [
        [_inline_of(cell, plain=True) for cell in row.children]
        for section in node.children
        for row in section.children
    ]
    widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(len(rows[0]))]
    lines = [
        " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    if len(lines) > 1:
        lines.insert(1, "-+-".join("-" * width for width in widths))
    return f"{FENCE}\n" + "\n".join(lines) + f"\n{FENCE}"


def _inline_of(node: SyntaxTreeNode, *, plain: bool = False) -> str:
    return "".join(_inline(child, plain) for child in node.children)


def _inline(node: SyntaxTreeNode, plain: bool) -> str:
    if node.type == "inline":
        return "".join(_inline(child, plain) for child in node.children)
    kind = node.type
    if kind == "text":
        return escape(node.content)
    if kind in ("softbreak", "hardbreak"):
        return "\n"
    if kind == "code_inline":
        # Slack cannot escape a backtick inside inline code; a look-alike keeps it readable.
        return "`" + escape(node.content.replace("`", "ˋ")) + "`" if node.content else ""
    inner = "".join(_inline(child, plain) for child in node.children)
    if kind in ("strong", "em", "s"):
        mark = {"strong": "*", "em": "_", "s": "~"}[kind]
        return inner if plain or not inner.strip() else f"{mark}{inner}{mark}"
    if kind == "link":
        return _link(str(node.attrs.get("href", "")), inner)
    if kind == "image":
        return _link(str(node.attrs.get("src", "")), inner or escape(node.content))
    return escape(node.content) or inner


def _link(url: str, label: str) -> str:
    target = escape(url.replace("|", "%7C"))
    if not _SCHEME.match(url):
        # Slack links only absolute URLs; anything else is shown as text.
        return f"{label} ({target})" if label and url else label or target
    if not label or label == target:
        return f"<{target}>"
    if misleading(unescape(label), url):  # the text names another address: show both
        return f"{label} ({target})"
    # Slack's link syntax cannot hold a line break in the label.
    return f"<{target}|{label.replace(chr(10), ' ')}>"

"""A table in an answer as a Slack `table` block (Block Kit), where it fits.

A part's text keeps each table as the aligned code block `channels.slack.mrkdwn` writes (header
row, a `-+-` rule, the rows): it is the message's notification text and what shows wherever
blocks do not. When a part holds exactly one such table within the block's limits (100 rows, 20
cells a row; Slack shows one table per message), the message's blocks show it as a real table,
with the text before and after it in `section` blocks (3,000 characters each at most); anything
else (no table, two, too large, a rule that does not match its rows) is the text alone.

The table is read back from the part by the rule's column widths, not by splitting on `|`, so a
cell holding ` | ` stays one cell.
"""

from __future__ import annotations

import re
from typing import Any

from channels.slack.mrkdwn import unescape
from channels.slack.split import FENCE

MAX_ROWS = 100
MAX_CELLS = 20
SECTION_LIMIT = 3000
_RULE = re.compile(r"^-+(?:-\+-+)+$")  # two columns at least: a lone `---` is no table
_SEPARATOR = " | "


def table_blocks(text: str) -> list[dict[str, Any]] | None:
    """The blocks showing `text` with its one table as a table block; None: the text alone."""
    lines = text.split("\n")
    found = [(start, end) for start, end in _fences(lines) if _is_table(lines[start + 1 : end])]
    if len(found) != 1:
        return None
    start, end = found[0]
    rows = _rows(lines[start + 1 : end])
    if rows is None:
        return None
    before, after = "\n".join(lines[:start]).strip(), "\n".join(lines[end + 1 :]).strip()
    if len(before) > SECTION_LIMIT or len(after) > SECTION_LIMIT:
        return None
    table = {"type": "table", "rows": [[_cell(cell) for cell in row] for row in rows]}
    return [*_section(before), table, *_section(after)]


def _fences(lines: list[str]) -> list[tuple[int, int]]:
    """Each code block's opening and closing line numbers."""
    blocks, opened = [], None
    for number, line in enumerate(lines):
        if line != FENCE:
            continue
        if opened is None:
            opened = number
        else:
            blocks.append((opened, number))
            opened = None
    return blocks


def _is_table(body: list[str]) -> bool:
    return len(body) >= 2 and bool(_RULE.match(body[1]))


def _rows(body: list[str]) -> list[list[str]] | None:
    """The cells of each row (the rule left out), read by the rule's column widths; None when
    a row does not fit them or the table is over the block's limits."""
    widths = [len(segment) for segment in body[1].split("-+-")]
    rows = [body[0], *body[2:]]
    if len(rows) > MAX_ROWS or len(widths) > MAX_CELLS:
        return None
    read = [_cells(row, widths) for row in rows]
    return None if any(cells is None for cells in read) else [c for c in read if c is not None]


def _cells(row: str, widths: list[int]) -> list[str] | None:
    cells, at = [], 0
    for index, width in enumerate(widths):
        if index:
            if row[at : at + len(_SEPARATOR)].rstrip() not in (_SEPARATOR.rstrip(), ""):
                return None
            at += len(_SEPARATOR)
        cells.append(row[at : at + width].strip())
        at += width
    return cells if not row[at:].strip() else None


def _cell(text: str) -> dict[str, str]:
    # A raw_text cell shows its text as it is (no markup), and cannot be empty.
    return {"type": "raw_text", "text": unescape(text) or " "}


def _section(text: str) -> list[dict[str, Any]]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}] if text else []

"""Tables in Slack answers: shown as a Block Kit `table` block where one fits (100 rows, 20
cells, one table a message), the aligned code block as the text either way."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from bot.cli.compose import App
from channels.slack.mrkdwn import to_mrkdwn
from channels.slack.tables import MAX_CELLS, MAX_ROWS, table_blocks
from tests.channels.slack.conftest import ALICE, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack, _good_blocks


def markdown_table(rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    rule = "|" + "|".join("---" for _ in rows[0]) + "|"
    return "\n".join([line(rows[0]), rule, *(line(row) for row in rows[1:])])


def cells_of(blocks: list[dict[str, object]]) -> list[list[str]]:
    [table] = [b for b in blocks if b["type"] == "table"]
    rows = table["rows"]
    assert isinstance(rows, list)
    return [[cell["text"] for cell in row] for row in rows]


async def test_an_answer_with_a_table_is_posted_with_a_table_block_and_the_text(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    table = markdown_table([["service", "state"], ["api", "up <ok>"], ["jobs", "down"]])
    claude.script(f"Here is the status:\n\n{table}\n\nOne is *down*.")
    async with App(make_config()) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "status?"))
    [post] = slack.posts
    blocks = post["blocks"]
    assert [b["type"] for b in blocks] == ["section", "table", "section"]
    assert cells_of(blocks) == [["service", "state"], ["api", "up <ok>"], ["jobs", "down"]]
    assert blocks[0]["text"]["text"] == "Here is the status:"
    assert blocks[2]["text"]["text"] == "One is _down_."
    assert "api     | up &lt;ok&gt;" in post["text"]  # the text keeps the aligned table


def test_a_table_over_the_blocks_limits_or_two_tables_stay_text() -> None:
    tall = [["n", "square"]] + [[str(n), str(n * n)] for n in range(MAX_ROWS)]
    wide = [[f"c{n}" for n in range(MAX_CELLS + 1)], ["x"] * (MAX_CELLS + 1)]
    small = markdown_table([["a", "b"], ["1", "2"]])
    assert table_blocks(to_mrkdwn(markdown_table(tall))) is None
    assert table_blocks(to_mrkdwn(markdown_table(wide))) is None
    assert table_blocks(to_mrkdwn(f"{small}\n\nand\n\n{small}")) is None
    assert table_blocks(to_mrkdwn("no table, just `code`\n\n```\nkey: 1\n---\nb\n```")) is None


_CELL = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)


@given(st.lists(st.lists(_CELL, min_size=2, max_size=4), min_size=1, max_size=6))
@example([["a | b", "c"], ["", "|"]])
def test_any_markdown_table_comes_back_cell_for_cell_or_as_text(rows: list[list[str]]) -> None:
    width = len(rows[0])
    rows = [(row + [""] * width)[:width] for row in rows]
    text = to_mrkdwn(markdown_table(rows))
    blocks = table_blocks(text)
    if blocks is None:  # the renderer did not make it one table (cells that are Markdown)
        return
    assert _good_blocks(blocks)
    read = cells_of(blocks)
    assert len(read) == len(rows)
    assert all(len(row) == width for row in read)


@given(st.text(max_size=400))
@example("```\na | b\n--+--\n1 | 2 | 3\n```")
@example("```\n--+--\n```")
def test_any_text_gives_valid_blocks_or_none_and_never_raises(text: str) -> None:
    blocks = table_blocks(text)
    if blocks is not None:
        assert _good_blocks(blocks)

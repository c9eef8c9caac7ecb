"""Surface rules: which rule applies (most specific first), how they load from the config, and the
start-up errors for rules and templates that cannot work."""

from __future__ import annotations

import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.agentfiles import load_agent
from bot.cli.settings import Settings, load_config
from bot.errors import ConfigError
from bot.policy.files import load_policy
from bot.policy.surfaces import Policies, SurfaceRule
from bot.turns import ConversationKind, Surface, SurfaceKind, TurnRequest
from tests.conftest import write_config

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def turn(channel: str, kind: SurfaceKind | None = None, surface_id: str = "X") -> TurnRequest:
    surface = Surface(kind, surface_id) if kind is not None else None
    conversation = ConversationKind.PUSH if surface else ConversationKind.CONSOLE
    return TurnRequest(f"{channel}:k", conversation, channel, "hi", NOW, "t", surface=surface)


RULES = [
    SurfaceRule(platform="*", instructions="any"),
    SurfaceRule(platform="telegram", kind="group", instructions="telegram groups"),
    SurfaceRule(platform="slack", instructions="slack"),
    SurfaceRule(platform="slack", kind="dm", instructions="slack dms"),
    SurfaceRule(platform="slack", id="C1", instructions="C1 exactly"),
    SurfaceRule(platform="slack", kind="dm", instructions="a later dm rule"),
]


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (turn("slack", SurfaceKind.CHANNEL, "C1"), 4),  # exact id beats the platform rule
        (turn("slack", SurfaceKind.CHANNEL, "C2"), 2),  # platform beats "*"
        (turn("slack", SurfaceKind.DM, "D1"), 3),  # kind beats platform; first of equals wins
        (turn("telegram", SurfaceKind.GROUP, "-100"), 1),
        (turn("telegram", SurfaceKind.DM, "dm_1"), 0),  # only "*" is left
        (turn("console"), 0),
    ],
)
def test_the_most_specific_matching_rule_applies(request_: TurnRequest, expected: int) -> None:
    policy = Policies(RULES, [r.instructions or "" for r in RULES]).for_request(request_)
    assert policy.index == expected
    assert policy.instructions == RULES[expected].instructions


def test_no_rule_means_no_policy() -> None:
    policy = Policies(RULES[1:2], ["x"]).for_request(turn("slack", SurfaceKind.CHANNEL))
    assert (policy.rule, policy.instructions) == (None, "")
    assert "no [[surfaces]] rule" in policy.label


def test_an_id_rule_does_not_match_a_surfaceless_turn_or_another_kind() -> None:
    rule = SurfaceRule(platform="slack", kind="dm", id="C1")
    assert not rule.matches(turn("slack", SurfaceKind.CHANNEL, "C1"))
    assert not SurfaceRule(platform="console", id="x").matches(turn("console"))


RULE_TOML = """
[[surfaces]]
platform = "slack"
id = "C1"
instructions_path = "support.md"
model = "claude-opus-4-1"
max_tokens = 1024
skills = ["summarize"]
budget = { daily_tokens = 5000, person_daily_usd = 0.5 }
"""


def _settings(agent_dir: Path, extra: str) -> Settings:
    write_config(agent_dir, extra)
    return load_config(agent_dir / "bot.toml", env={}).settings


def test_rules_load_with_instruction_files_relative_to_the_config(agent_dir: Path) -> None:
    (agent_dir / "support.md").write_text("Answer support questions.\n", encoding="utf-8")
    settings = _settings(agent_dir, RULE_TOML)
    [rule] = settings.surfaces
    assert rule.instructions_path == agent_dir / "support.md"
    assert rule.budget is not None
    assert rule.budget.daily_tokens == 5000
    policy = load_policy(settings, load_agent(settings.agent))
    matched = policy.policies.for_request(turn("slack", SurfaceKind.CHANNEL, "C1"))
    assert matched.instructions == "Answer support questions."
    assert matched.label == "surfaces[0] (platform slack, id C1)"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[[surfaces]]\nplatform = 'Slack!'\n", "surfaces[0].platform"),
        ("[[surfaces]]\nplatform = 'slack'\nkind = 'room'\n", "surfaces[0].kind"),
        ("[[surfaces]]\nplatform = 'slack'\nbusy = 'later'\n", "surfaces[0].busy"),
        ("[[surfaces]]\nplatform = 'slack'\nmodle = 'x'\n", "surfaces[0].modle: unknown key"),
        (
            "[[surfaces]]\nplatform = 'slack'\ninstructions = 'a'\ninstructions_path = 'b'\n",
            "not both",
        ),
        ("[budget]\ntimezone = 'Mars/Base'\n", "budget.timezone"),
    ],
)
def test_bad_rules_are_config_errors(agent_dir: Path, extra: str, message: str) -> None:
    write_config(agent_dir, extra)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(agent_dir / "bot.toml", env={})


@pytest.mark.parametrize(
    ("extra", "files", "message"),
    [
        (RULE_TOML, {}, r"surfaces\[0\].instructions_path.*cannot be read"),
        (
            "[[surfaces]]\nplatform = 'slack'\nskills = ['nope']\n",
            {},
            r"surfaces\[0\].skills: skill 'nope' not found",
        ),
        (
            "[[surfaces]]\nplatform = 'slack'\nmax_tokens = 128000\n"
            "[model]\ncontext_window = 100000\n",
            {},
            r"surfaces\[0\].max_tokens = 128000",
        ),
        (
            "[budget]\ndaily_usd = 5.0\n[model]\nname = 'my-local-model'\n",
            {},
            r"model 'my-local-model' has no price",
        ),
        ("[prompt]\nsession_template = 'session.txt'\n", {}, r"prompt.session_template.*cannot"),
        (
            "[prompt]\nsession_template = 'session.txt'\n",
            {"session.txt": "# Hi\n{conversation}\n{surface}\n{local_time}\n"},
            r"\{local_time\}, which cannot go there",
        ),
        (
            "[prompt]\nturn_template = 'turn.txt'\n",
            {"turn.txt": "Time: {timestamp}\n"},
            r"drops the attachments note",
        ),
    ],
)
def test_rules_and_templates_that_cannot_work_stop_start_up(
    agent_dir: Path, extra: str, files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (agent_dir / name).write_text(text, encoding="utf-8")
    settings = _settings(agent_dir, extra)
    with pytest.raises(ConfigError, match=message):
        load_policy(settings, load_agent(settings.agent))


def test_a_priced_money_budget_and_an_operator_template_load(agent_dir: Path) -> None:
    session = (
        "# Where you are\n{conversation}\n{surface}\n{message_budget}\n{console_id}\n"
        "{delivery}\n{secrecy}\n{memory}\n"
    )
    (agent_dir / "session.txt").write_text(session, encoding="utf-8")
    settings = _settings(
        agent_dir,
        "[prompt]\nsession_template = 'session.txt'\n[budget]\ndaily_usd = 5.0\n"
        "[budget.prices.my-local-model]\ninput = 1.0\noutput = 2.0\n"
        "[model]\nname = 'my-local-model'\n",
    )
    policy = load_policy(settings, load_agent(settings.agent))
    assert policy.session_template.render({"conversation": "C"}) == "# Where you are\nC"


def test_a_turn_template_written_before_viewing_existed_still_loads(agent_dir: Path) -> None:
    (agent_dir / "turn.txt").write_text("Time: {timestamp}\n{attachments}\n", encoding="utf-8")
    settings = _settings(agent_dir, "[prompt]\nturn_template = 'turn.txt'\n")
    policy = load_policy(settings, load_agent(settings.agent))
    assert policy.turn_template.render({"timestamp": "T"}) == "Time: T"


def test_the_readme_shows_the_label_preview_prints_for_its_own_example() -> None:
    """The README's surface-rule example and the `bot preview` line it quotes agree."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Surface rules", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    rules = [SurfaceRule(**table) for table in tomllib.loads(example)["surfaces"]]
    quoted = re.search(r"`surface rule: (surfaces\[\d+\] \([^)]*\))`", section)
    assert quoted is not None
    assert quoted.group(1) == rules[0].describe(0)

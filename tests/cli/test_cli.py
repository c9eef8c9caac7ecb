"""The `bot` command as a person runs it: real subprocesses, exit codes, what gets printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import COMMANDS, main
from tests.cli.conftest import RunBot, run_command
from tests.conftest import subprocess_env, write_config

HERE = Path(__file__).parent
REPO = HERE.parents[1]


def test_help_lists_every_command() -> None:
    # A fresh interpreter, as the console script starts: `python -m bot.cli` works on its own.
    result = run_command([sys.executable, "-m", "bot.cli"], "--help")
    assert result.returncode == 0
    for command in (
        "chat",
        "run",
        "preview",
        "history",
        "memory",
        "turns",
        "cron",
        "init",
        "doctor",
    ):
        assert command in result.stdout


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("[model]\nmax_turn = 3\n", "model.max_turn"),
        ("[model]\nmax_turns = 'lots'\n", "model.max_turns"),
    ],
)
def test_broken_config_exits_non_zero_with_one_clear_message(
    bot: RunBot, agent_dir: Path, extra: str, key: str
) -> None:
    write_config(agent_dir, extra)
    result = bot("--config", str(agent_dir / "bot.toml"), "chat")
    assert result.returncode == 2
    assert key in result.stderr
    assert "Fix:" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_missing_identity_exits_with_the_key_and_the_fix(bot: RunBot, agent_dir: Path) -> None:
    (agent_dir / "IDENTITY.md").unlink()
    result = bot(
        "--config", str(agent_dir / "bot.toml"), "preview", str(HERE / "slack-group-event.json")
    )
    assert result.returncode == 2
    assert "agent.identity_path" in result.stderr
    assert "Traceback" not in result.stderr


def test_chat_without_an_api_key_says_which_variable(bot: RunBot, agent_dir: Path) -> None:
    result = bot("--config", str(agent_dir / "bot.toml"), "chat", stdin="hi\n")
    assert result.returncode == 2
    assert "ANTHROPIC_API_KEY" in result.stderr


def test_preview_of_a_slack_group_event_shows_what_the_model_sees(
    bot: RunBot, agent_dir: Path
) -> None:
    event = HERE / "slack-group-event.json"
    result = bot("--config", str(agent_dir / "bot.toml"), "preview", str(event))
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    system = [block["text"] for block in body["system"]]
    # Guardrails, identity, then (skills) and the session block, in that order.
    identity_at = next(i for i, text in enumerate(system) if "You are Testbot" in text)
    session_at = next(i for i, text in enumerate(system) if "C0PLATFORM" in text)
    assert 0 < identity_at < session_at == len(system) - 1
    assert "3800" in system[session_at] or "3,800" in system[session_at]
    assert "team-platform" in system[session_at]
    last = body["messages"][-1]
    assert last["role"] == "user"
    current = "\n".join(block["text"] for block in last["content"])
    assert "Alice Chen (@alice)" in current
    assert "Bob Stone (@bob): can we ship the slack thing today" in current
    assert "Ship it then." in current
    # The person's own text cannot close or open a fence: the host's tags in it are neutralized.
    own = current.split("Ship it then.")[1]
    assert "</speaker>" not in own
    assert "<preceding_messages>" not in own
    assert "&lt;/speaker>" in own
    serialized = result.stdout
    route = json.loads(event.read_text())["route"]
    # The channel id is also the surface id, which the model may see; every other route value,
    # and every user id, must not appear.
    hidden = [value for key, value in route.items() if key != "channel"]
    for value in [*hidden, "U0ALICE7777", "U0BOB8888", "U0CHANDRA99"]:
        assert value not in serialized, value
    assert "1722247000.000100" not in serialized
    assert "xoxb-" not in serialized


def test_preview_shows_the_request_on_the_openai_wire(bot: RunBot, agent_dir: Path) -> None:
    event = HERE / "slack-group-event.json"
    config = ("--config", str(agent_dir / "bot.toml"), "preview", str(event))
    anthropic = json.loads(bot(*config).stdout)
    result = bot(*config, "--wire", "openai")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    systems = [m["content"] for m in body["messages"] if m["role"] == "system"]
    # The same sections, as the first messages, in the same order and bytes.
    assert systems == [block["text"] for block in anthropic["system"]]
    assert body["messages"][: len(systems)] == [{"role": "system", "content": s} for s in systems]
    assert body["messages"][-1]["role"] == "user"
    assert "Ship it then." in body["messages"][-1]["content"]
    assert body["stream"] is True
    assert "U0ALICE7777" not in result.stdout


def test_preview_rejects_a_malformed_event_clearly(
    bot: RunBot, agent_dir: Path, tmp_path: Path
) -> None:
    event = tmp_path / "bad.json"
    event.write_text(
        json.dumps({"channel": "slack", "surface": {"kind": "room", "id": "C1"}, "text": "x"})
    )
    result = bot("--config", str(agent_dir / "bot.toml"), "preview", str(event))
    assert result.returncode == 2
    assert "surface.kind" in result.stderr
    assert "Traceback" not in result.stderr


def test_init_writes_a_working_starter_and_never_overwrites(bot: RunBot, tmp_path: Path) -> None:
    first = bot("init", "demo", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    for name in ("bot.toml", "IDENTITY.md", ".env.example", "skills/summarize/SKILL.md"):
        assert (tmp_path / "demo" / name).is_file()
    (tmp_path / "demo" / "IDENTITY.md").write_text("mine")
    again = bot("init", "demo", cwd=tmp_path)
    assert again.returncode == 1
    assert "--force" in again.stderr
    assert (tmp_path / "demo" / "IDENTITY.md").read_text() == "mine"
    forced = bot("init", "demo", "--force", cwd=tmp_path)
    assert forced.returncode == 0
    assert (tmp_path / "demo" / "IDENTITY.md").read_text() != "mine"


def test_init_into_a_path_it_cannot_write_says_why_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "taken").write_text("a file, not a folder")
    assert main(["init", str(tmp_path / "taken")]) == 1
    err = capsys.readouterr().err
    assert str(tmp_path / "taken") in err
    assert "Fix:" in err
    assert "Traceback" not in err


def test_doctor_on_a_fresh_starter_names_the_missing_token(bot: RunBot, tmp_path: Path) -> None:
    assert bot("init", "demo", cwd=tmp_path).returncode == 0
    result = bot("doctor", "--config", "demo/bot.toml", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("ok") and "config" in line for line in lines)
    assert any(line.startswith("ok") and "agent files" in line for line in lines)
    missing = [line for line in lines if line.startswith("FAIL")]
    assert len(missing) == 1
    assert "ANTHROPIC_API_KEY" in missing[0]
    assert "export ANTHROPIC_API_KEY" in missing[0]


def test_doctor_names_every_token_an_enabled_channel_needs(bot: RunBot, tmp_path: Path) -> None:
    assert bot("init", "demo", cwd=tmp_path).returncode == 0
    env = {"BOT_SLACK__ENABLED": "true", "BOT_TELEGRAM__ENABLED": "true"}
    result = bot("doctor", "--offline", "--config", "demo/bot.toml", cwd=tmp_path, env=env)
    failed = "\n".join(line for line in result.stdout.splitlines() if line.startswith("FAIL"))
    for name in ("ANTHROPIC_API_KEY", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "TELEGRAM_BOT_TOKEN"):
        assert name in failed
    assert result.returncode == 1


def test_doctor_fails_a_surface_rule_for_a_platform_that_does_not_exist(
    bot: RunBot, tmp_path: Path
) -> None:
    assert bot("init", "demo", cwd=tmp_path).returncode == 0
    with (tmp_path / "demo" / "bot.toml").open("a", encoding="utf-8") as config:
        config.write('\n[[surfaces]]\nplatform = "slak"\ninstructions = "be brief"\n')
    result = bot("doctor", "--offline", "--config", "demo/bot.toml", cwd=tmp_path)
    assert result.returncode != 0
    said = result.stdout + result.stderr
    assert "surfaces[0].platform = 'slak'" in said
    assert 'Fix: use one of "slack"' in said
    assert "Traceback" not in said


def test_doctor_fails_a_job_that_bot_run_would_refuse(bot: RunBot, tmp_path: Path) -> None:
    # SPEC §9: doctor checks the config and prints what is wrong and how to fix it; a job whose
    # schedule or destination `bot run` refuses must not pass as "ok".
    assert bot("init", "demo", cwd=tmp_path).returncode == 0
    with (tmp_path / "demo" / "bot.toml").open("a") as config:
        config.write(
            '\n[[cron.jobs]]\nname = "digest"\nschedule = "0 9 * * 1-5"\n'
            'prompt = "Write the digest."\nnotify = "slack:C0123456789"\n'
        )
    env = {"ANTHROPIC_API_KEY": "sk-ant-doctor-0123456789"}
    result = bot("doctor", "--offline", "--config", "demo/bot.toml", cwd=tmp_path, env=env)
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1, result.stdout
    assert "cron.jobs[0]" in failed[0]
    assert "[slack] enabled = true" in failed[0]  # the fix
    assert result.returncode == 1
    run = bot("run", "--config", "demo/bot.toml", cwd=tmp_path, env=env)
    assert run.returncode == 2
    assert "cron.jobs[0]" in run.stderr


# Every credential `bot doctor --offline` may ask for, well formed (offline: never checked).
DOCTOR_TOKENS = {
    "ANTHROPIC_API_KEY": "sk-ant-doctor-0123456789",
    "SLACK_BOT_TOKEN": "xoxb-doctor",
    "SLACK_SIGNING_SECRET": "signing-secret",
    "TELEGRAM_BOT_TOKEN": "123456:AAE-doctor-token",
    "TELEGRAM_WEBHOOK_SECRET": "webhook-secret",
}


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"BOT_SLACK__ENABLED": "true", "BOT_SLACK__MODE": "http"}, "slack.mode = 'http'"),
        (
            {"BOT_TELEGRAM__ENABLED": "true", "BOT_TELEGRAM__MODE": "webhook"},
            "telegram.mode = 'webhook'",
        ),
    ],
    ids=["slack-http", "telegram-webhook"],
)
def test_doctor_fails_an_intake_that_needs_the_http_port_when_it_is_off(
    bot: RunBot, tmp_path: Path, env: dict[str, str], names: str
) -> None:
    # SPEC §9: doctor prints what is wrong and the fix; `bot run` refuses this config at start.
    assert bot("init", "demo", cwd=tmp_path).returncode == 0
    env = {**DOCTOR_TOKENS, **env, "BOT_HTTP__ENABLED": "false"}
    result = bot("doctor", "--offline", "--config", "demo/bot.toml", cwd=tmp_path, env=env)
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1, result.stdout
    assert names in failed[0]
    assert "http.enabled = true" in failed[0]
    assert result.returncode == 1


def test_doctor_says_who_registers_the_telegram_webhook(bot: RunBot, tmp_path: Path) -> None:
    # Webhook mode without webhook_url is allowed (the operator may call setWebhook), but the
    # host then never registers it: doctor says so, and how to have the host do it.
    assert bot("init", "demo", cwd=tmp_path).returncode == 0
    env = {**DOCTOR_TOKENS, "BOT_TELEGRAM__ENABLED": "true", "BOT_TELEGRAM__MODE": "webhook"}
    args = ("doctor", "--offline", "--config", "demo/bot.toml")
    unset = bot(*args, cwd=tmp_path, env=env).stdout
    [line] = [line for line in unset.splitlines() if "telegram webhook" in line]
    assert "does not call setWebhook" in line
    assert "/telegram/webhook" in line
    assert "Fix: set telegram.webhook_url" in line
    env["BOT_TELEGRAM__WEBHOOK_URL"] = "https://bot.example.com/telegram/webhook"
    shown = bot(*args, cwd=tmp_path, env=env).stdout
    [line] = [line for line in shown.splitlines() if "telegram webhook" in line]
    assert "https://bot.example.com/telegram/webhook (set at start-up)" in line


def test_a_reader_that_goes_away_ends_the_command_quietly(agent_dir: Path) -> None:
    # `bot history show --list | head`: the reader closed the pipe; no traceback, no "critical".
    # A process of its own (the warm server's forks keep their streams differently).
    read, write = os.pipe()
    os.close(read)  # nobody reads: every write fails with EPIPE
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "bot.cli",
                "--config",
                str(agent_dir / "bot.toml"),
                "cron",
                "list",
            ],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
            timeout=60,
        )
    finally:
        os.close(write)
    assert result.stderr == ""
    assert result.returncode == 141  # as a program killed by SIGPIPE would exit


# --config after any command, at any depth, and in every --help ---------------------------------

_NESTED = [
    ["cron", "list"],
    ["history", "show", "--list"],
    ["turns", "list"],
    ["memory", "search", "deploy"],
]


@pytest.mark.parametrize("command", _NESTED, ids=" ".join)
@pytest.mark.parametrize("form", ["after", "equals", "before"])
def test_config_is_taken_after_any_subcommand(
    agent_dir: Path, capsys: pytest.CaptureFixture[str], command: list[str], form: str
) -> None:
    path = str(agent_dir / "bot.toml")
    argv = {
        "after": [*command, "--config", path],
        "equals": [*command, f"--config={path}"],
        "before": ["--config", path, *command],
    }[form]
    code = main(argv)
    err = capsys.readouterr().err
    assert "usage:" not in err
    # Either it ran, or it said what is missing under the agent folder the config names.
    assert code == 0 or str(agent_dir) in err, err


def _help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_every_help_shows_config(capsys: pytest.CaptureFixture[str]) -> None:
    commands = [[], *([name] for name in COMMANDS), *_NESTED]
    commands += [["history", "reset"], ["turns", "show"], ["memory", "forget"], ["cron", "run"]]
    for argv in commands:
        assert "--config PATH" in _help_of([a for a in argv if not a.startswith("-")], capsys), argv


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("bot ")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"channel": "slack", "text": "caf\xe9"}'.encode("latin-1"), "is not UTF-8 text"),
        (b"\xff\xfe{\x00}\x00", "is not UTF-8 text"),
        (b'{"text": ' + b"9" * 5000 + b"}", "is not usable JSON"),
        (b"[" * 100_000, "is not usable JSON"),
    ],
)
def test_preview_of_an_unreadable_file_says_so_in_one_line(
    agent_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, says: str
) -> None:
    event = tmp_path / "event.json"
    event.write_bytes(content)
    assert main(["preview", str(event), "--config", str(agent_dir / "bot.toml")]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert len(err.strip().splitlines()) == 1


def test_preview_of_an_unknown_skill_says_so_in_one_line(
    agent_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"channel": "console", "text": "/nosuchskill do it"}))
    assert main(["preview", str(event), "--config", str(agent_dir / "bot.toml")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert 'There is no skill called "nosuchskill"' in err
    assert "/summarize" in err  # the skills there are
    assert "Traceback" not in err


@pytest.mark.parametrize("text", ["/memory", "/forget 2", "/usage", "/help", "/compact", "/start"])
def test_preview_of_a_host_command_says_the_host_answers_it_not_the_model(
    agent_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """SPEC §6: these commands never reach the model, so there is no model request to show (and
    no skill of that name to look for)."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"channel": "console", "text": text}))
    assert main(["preview", str(event), "--config", str(agent_dir / "bot.toml")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"{text.split()[0]} is a command the host answers itself" in err
    assert "skill" not in err


@pytest.mark.parametrize("channel", ["slak", "Slack", "", "discord"])
def test_preview_of_an_unknown_channel_names_it_and_the_valid_ones(
    agent_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], channel: str
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"channel": channel, "text": "hello"}))
    assert main(["preview", str(event), "--config", str(agent_dir / "bot.toml")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"channel = {channel!r}" in err
    assert "slack, telegram, console, cron, webhook" in err
    assert "JSON" not in err  # the file is good JSON: its content is what is wrong
    assert "Traceback" not in err


def test_preview_builds_the_person_id_the_live_channel_does() -> None:
    from bot.cli.preview import parse_event
    from channels.slack.events import person_id as slack_person
    from channels.telegram.mapping import person_id as telegram_person

    slack = parse_event(
        {"channel": "slack", "conversation": "slack:T1:C1:1.0", "text": "x",
         "speaker": {"name": "Alice", "id": "U1"}}
    )  # fmt: skip
    telegram = parse_event(
        {"channel": "telegram", "conversation": "telegram:42", "text": "x",
         "speaker": {"name": "Bob", "id": "42"}}
    )  # fmt: skip
    assert slack.person == slack_person("T1", "U1") == "slack:T1:U1"
    assert telegram.person == telegram_person("42")


@pytest.mark.parametrize("name", ["two\nlines", "tab\there", "x" * 201])
def test_chat_refuses_a_conversation_name_that_would_break_its_key(
    bot: RunBot, agent_dir: Path, name: str
) -> None:
    """The name becomes the key `console:NAME` that `bot history` lists and resumes: a line break
    or control character in it would break those listings, so it is refused before any turn."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789"}
    config = str(agent_dir / "bot.toml")
    result = bot("chat", "--conversation", name, "--config", config, env=env)
    assert result.returncode == 2
    assert "--conversation" in result.stderr
    assert "Fix:" in result.stderr
    assert "Traceback" not in result.stderr


def test_preview_of_schedules_is_a_host_command_only_where_schedules_are_on() -> None:
    from bot.cli.preview import host_command

    assert host_command("/schedules remove abc", schedules=True) == "/schedules"
    assert host_command("/schedules", schedules=False) is None  # then it names no skill
    assert host_command("/memoryless thoughts", schedules=True) is None
    assert host_command("please /help", schedules=True) is None

"""Without the voice extra (faster-whisper made unimportable for the test, as on a machine that
never installed it): no transcriber is built, so voice notes keep their marker, and `bot doctor`
says how to install it instead of failing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.cli.doctor import diagnose
from bot.voice.local import build_transcriber
from bot.voice.model import extra_installed
from bot.voice.settings import VoiceSettings
from tests.conftest import write_config


@pytest.fixture
def no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faster_whisper", None)
    assert not extra_installed()


@pytest.mark.usefixtures("no_extra")
def test_without_the_extra_there_is_no_transcriber() -> None:
    assert build_transcriber(VoiceSettings()) is None


@pytest.mark.usefixtures("no_extra")
async def test_doctor_says_how_to_install_the_extra(agent_dir: Path) -> None:
    write_config(agent_dir, "")
    checks = await diagnose(agent_dir / "bot.toml", offline=True)
    [voice] = [check for check in checks if check.name == "voice"]
    assert voice.ok
    assert voice.detail == (
        "not installed: voice notes get a marker saying they were not transcribed. "
        'Fix: pip install -e ".[voice]" to transcribe them on this machine.'
    )

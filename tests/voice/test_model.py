"""The voice model's files: the bundled one found without importing its package and checked
against the digests pinned in bot/voice/model.py; an operator's folder checked against its
SHA256SUMS; every refusal names the file and the fix. A folder that passes loads and
transcribes the real clip."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.voice.model import BUNDLED_DIGESTS, MANIFEST, ModelFiles, locate, read_manifest, verify
from bot.voice.settings import VoiceSettings
from tests.voice.clips import clip, require_voice


def _copy_of_bundled(target: Path) -> Path:
    """The bundled model's files in `target`: model.bin linked (75 MB), the rest copied."""
    bundled = locate("bundled").folder
    target.mkdir()
    for name in BUNDLED_DIGESTS:
        if name == "model.bin":
            (target / name).symlink_to(bundled / name)
        else:
            (target / name).write_bytes((bundled / name).read_bytes())
    return target


def _manifest(folder: Path) -> None:
    lines = [
        f"{hashlib.sha256((folder / name).read_bytes()).hexdigest()}  {name}"
        for name in sorted(BUNDLED_DIGESTS)
    ]
    (folder / MANIFEST).write_text("\n".join(lines) + "\n")


def test_the_bundled_model_is_found_and_matches_its_pinned_digests() -> None:
    require_voice()
    files = locate("bundled")
    assert files.verified
    assert "tiny.en" in files.name
    assert sorted(p.name for p in files.folder.iterdir() if p.is_file()) == sorted(BUNDLED_DIGESTS)
    verify(files)  # raises on any mismatch


def test_a_changed_file_is_refused_before_loading(tmp_path: Path) -> None:
    require_voice()
    folder = _copy_of_bundled(tmp_path / "model")
    (folder / "config.json").write_text('{"suppress_ids": []}')
    with pytest.raises(ConfigError) as caught:
        verify(ModelFiles("copy", folder, BUNDLED_DIGESTS))
    message = str(caught.value)
    assert f"{folder / 'config.json'} does not match its sha256" in message
    assert "Fix:" in message


def test_an_operator_folder_with_a_manifest_is_verified_and_transcribes(tmp_path: Path) -> None:
    require_voice()
    from bot.voice.whisper import WhisperEngine

    folder = _copy_of_bundled(tmp_path / "model")
    _manifest(folder)
    files = locate(str(folder))
    assert files.verified
    assert set(files.digests) == set(BUNDLED_DIGESTS)
    engine = WhisperEngine(files, workers=1)
    said = engine.run(clip("budget.m4a"), 60, threading.Event()).text.lower()
    assert "friday" in said


def test_an_operator_folder_without_a_manifest_is_used_unverified(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.json"):
        (folder / name).write_bytes(b"{}")
    files = locate(str(folder))
    assert not files.verified
    verify(files)  # nothing to check


def test_a_folder_without_the_tokenizer_is_refused_so_nothing_is_fetched(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"x")
    (folder / "config.json").write_bytes(b"{}")
    with pytest.raises(ConfigError, match=r"has no tokenizer\.json\. Fix: point voice\.model"):
        locate(str(folder))


def test_a_manifest_must_list_every_file_the_model_needs(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("model.bin", "config.json", "tokenizer.json"):
        (folder / name).write_bytes(name.encode())
    (folder / MANIFEST).write_text(f"{hashlib.sha256(b'config.json').hexdigest()}  config.json\n")
    with pytest.raises(ConfigError, match=r"does not list model\.bin, tokenizer\.json"):
        locate(str(folder))


@pytest.mark.parametrize(
    "line", ["not a digest  model.bin", "abc  model.bin", f"{'g' * 64}  model.bin", "0" * 64]
)
def test_a_malformed_manifest_line_is_named(tmp_path: Path, line: str) -> None:
    path = tmp_path / MANIFEST
    path.write_text(f"\n{line}\n")
    with pytest.raises(ConfigError, match=rf"{MANIFEST} line 2 is not"):
        read_manifest(path)


def test_a_manifest_reads_sha256sum_output_including_binary_marks(tmp_path: Path) -> None:
    path = tmp_path / MANIFEST
    digest = "a" * 64
    path.write_text(f"{digest}  model.bin\n{digest} *config.json\n\n")
    assert read_manifest(path) == {"model.bin": digest, "config.json": digest}


def test_an_unreadable_model_file_is_named(tmp_path: Path) -> None:
    files = ModelFiles("gone", tmp_path, {"model.bin": "0" * 64})
    with pytest.raises(ConfigError, match=r"model\.bin cannot be read"):
        verify(files)


def test_a_model_setting_that_is_not_a_folder_fails_the_config_check(tmp_path: Path) -> None:
    settings = VoiceSettings(model=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"is not a folder\. Fix: point voice\.model"):
        settings.check()
    VoiceSettings(model=str(tmp_path / "nowhere"), enabled=False).check()  # off: not checked
    VoiceSettings().check()  # bundled: found at start-up, not here


@pytest.mark.parametrize("code", ["english", "EN", "e", "e1", "en-US"])
def test_a_language_that_is_not_a_code_is_refused_with_the_fix(code: str) -> None:
    with pytest.raises(ValueError, match=r"not a language code: write one Whisper knows"):
        VoiceSettings(language=code)
    assert VoiceSettings(language="de").language == "de"
    assert VoiceSettings(language="haw").language == "haw"

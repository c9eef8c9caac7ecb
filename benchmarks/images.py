"""Image decoding (issue 25): peak memory and decode-to-block time for the largest images the host
accepts, one at a time and eight at once.

    .venv/bin/python -m benchmarks.images [--scale 1.0] [--at-once 8] [--code PATH ...]

Each case runs in a fresh child process, so its peak resident memory (`VmHWM`) is its own: the
child imports the host, reads the image file made by the parent, notes its resident memory, then
hands the image to the real `AttachmentIntake` (the path a turn takes: read off the event loop,
within the decode limit) once, or `--at-once` times concurrently, as that many turns would. Printed
per case: the child's resident memory before decoding, its peak, and the time from the file's
bytes to the image block (p50 over the decodes; for concurrent decodes, the whole batch). `--code
PATH` runs the same cases against another checkout (e.g. `git worktree add /tmp/base a51faae`),
so before and after are compared in one run. Target: every peak under 200 MB. Figures are
printed, never asserted. Each child's address space is capped (`--cap-mb`, 4096 by default) so a
checkout without bounded decoding fails with MemoryError instead of starving a shared machine.

The cases: the issue's 12000x5333 PNG (a quarter of a megabyte that decodes to 64 megapixels),
the largest PNG accepted now (16 megapixels of RGBA: PNG has no reduced decode), and a
48-megapixel JPEG (decoded at a reduced scale).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TARGET_MB = 200


# --- the images (made by the parent) ------------------------------------------------------------


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def banded_png(width: int, height: int) -> bytes:
    """An RGBA PNG of colour bands, compressed row by row (never held as a bitmap here): a small
    file that decodes to width*height*4 bytes."""
    packer = zlib.compressobj(9)
    parts: list[bytes] = []
    for y in range(height):
        shade = bytes((y * 7 % 256, y * 3 % 256, 200, 255))
        parts.append(packer.compress(b"\x00" + shade * width))
    parts.append(packer.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", b"".join(parts))
        + _chunk(b"IEND", b"")
    )


def gradient_jpeg(width: int, height: int) -> bytes:
    from PIL import Image

    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=85)
    return out.getvalue()


def cases(scale: float) -> list[tuple[str, bytes]]:
    def size(width: int, height: int) -> tuple[int, int]:
        return max(8, int(width * scale)), max(8, int(height * scale))

    return [
        ("issue PNG 12000x5333", banded_png(*size(12_000, 5_333))),
        ("largest PNG accepted now 4000x4000 RGBA", banded_png(*size(4_000, 4_000))),
        ("JPEG 8000x6000", gradient_jpeg(*size(8_000, 6_000))),
    ]


# --- one case, in a child process ---------------------------------------------------------------


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _rss_mb() -> float:
    return _status_mb("VmRSS")


def _peak_mb() -> float:
    # VmHWM, not ru_maxrss: getrusage keeps the parent's peak across fork and exec.
    return _status_mb("VmHWM")


class _Store:
    """The attachment store's part a decode needs: nothing is kept."""

    async def put(self, key: str, content_id: str, media_type: str, data: bytes) -> None:
        return None

    async def load(self, key: str, content_ids: Sequence[str]) -> dict[str, bytes]:
        return {}

    async def find(self, key: str, prefix: str) -> None:
        return None

    async def forget(self, key: str, content_ids: Sequence[str]) -> None:
        return None


class _Source:
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def fetch(self, route: Any, index: int, max_bytes: int) -> bytes:
        return self.data


async def _decode(path: Path, at_once: int) -> dict[str, Any]:
    import bot
    from bot.attachments.intake import AttachmentIntake
    from bot.config import AttachmentSettings
    from bot.turns import Attachment, ConversationKind, ReplyRoute, TurnRequest

    data = await asyncio.to_thread(path.read_bytes)
    intake = AttachmentIntake(_Store(), AttachmentSettings(), {"bench": _Source(data)})  # type: ignore[arg-type]

    def request(n: int) -> TurnRequest:
        return TurnRequest(
            conversation_key=f"bench:{n}",
            kind=ConversationKind.PUSH,
            channel="bench",
            text="what is this?",
            received_at=datetime(2026, 12, 1, tzinfo=UTC),
            turn_id=f"bench-{n}",
            attachments=(Attachment("image", "", len(data)),),
            route=ReplyRoute("bench", {}),
        )

    spans: list[float] = []

    async def one(n: int) -> str:
        began = time.perf_counter()
        attached = await intake.take(request(n), [])
        spans.append(time.perf_counter() - began)
        [block] = attached.blocks
        return block.problem or f"{block.media_type} {block.detail}"

    before = _rss_mb()
    began = time.perf_counter()
    outcomes = await asyncio.gather(*(one(n) for n in range(at_once)))
    batch = time.perf_counter() - began
    return {
        "code": str(Path(bot.__file__).parent.parent),
        "rss_before": before,
        "peak": _peak_mb(),
        "p50_ms": statistics.median(spans) * 1000,
        "batch_ms": batch * 1000,
        "outcome": outcomes[0],
    }


def _child(path: Path, at_once: int, cap_mb: int) -> None:
    import structlog

    resource.setrlimit(resource.RLIMIT_AS, (cap_mb * 1024 * 1024, cap_mb * 1024 * 1024))

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    print(json.dumps(asyncio.run(_decode(path, at_once))))


# --- the parent ---------------------------------------------------------------------------------


def _run_child(code: Path, path: Path, at_once: int, cap_mb: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [
            sys.executable,
            str(HERE),
            *("--child", str(path), "--at-once", str(at_once), "--cap-mb", str(cap_mb)),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=code,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(scale: float, at_once: int, codes: Sequence[Path], cap_mb: int) -> None:
    made = cases(scale)
    with tempfile.TemporaryDirectory() as folder:
        for name, data in made:
            path = Path(folder) / "image"
            path.write_bytes(data)
            print(f"{name}: {len(data) / 1024:.0f} KB file")
            for code in codes:
                for count in sorted({1, at_once}):
                    result = _run_child(code, path, count, cap_mb)
                    label = f"  {code.name or code} x{count}:"
                    if "error" in result:
                        print(f"{label} failed: {result['error']}")
                        continue
                    timing = (
                        f"decode-to-block {result['p50_ms']:.0f} ms"
                        if count == 1
                        else f"all {count} in {result['batch_ms']:.0f} ms"
                    )
                    print(
                        f"{label} RSS {result['rss_before']:.0f} MB before, peak "
                        f"{result['peak']:.0f} MB (target < {TARGET_MB} MB); {timing}; "
                        f"{result['outcome'][:70]}"
                    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks.images", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="shrink every image's sides")
    parser.add_argument("--at-once", type=int, default=8)
    parser.add_argument(
        "--code",
        type=Path,
        action="append",
        help="a checkout to run against (repeatable); default: this one",
    )
    parser.add_argument("--cap-mb", type=int, default=4096, help="each child's address space")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(args.child, args.at_once, args.cap_mb)
        return
    codes = [path.resolve() for path in args.code] if args.code else [HERE.parent.parent]
    run(args.scale, args.at_once, codes, args.cap_mb)


if __name__ == "__main__":
    main()

"""Real small files made in the tests: PNG, JPEG with an EXIF rotation, a 3-page PDF, a CSV, a
truncated image, a large file. Built with Pillow and pypdf, so they are what those libraries (and
the provider) accept, never hand-written bytes that merely look right."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image
from pypdf import PdfWriter

EXIF_ORIENTATION = 0x0112


def png(width: int = 64, height: int = 48, *, alpha: bool = False) -> bytes:
    image = Image.new(
        "RGBA" if alpha else "RGB", (width, height), (200, 30, 30, 128)[: 4 if alpha else 3]
    )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def jpeg(
    width: int = 64, height: int = 48, *, orientation: int | None = None, quality: int = 90
) -> bytes:
    """A JPEG whose left half is red and right half blue; `orientation` sets its EXIF tag."""
    image = Image.new("RGB", (width, height), (220, 20, 20))
    image.paste((20, 20, 220), (width // 2, 0, width, height))
    out = io.BytesIO()
    exif = Image.Exif()
    if orientation is not None:
        exif[EXIF_ORIENTATION] = orientation
    image.save(out, format="JPEG", quality=quality, exif=exif.tobytes())
    return out.getvalue()


def noisy_jpeg(width: int, height: int, *, quality: int = 95) -> bytes:
    """A photo-like JPEG (noise compresses badly, like a real photo)."""
    image = Image.effect_noise((width, height), 64).convert("RGB")
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def pdf(pages: int = 3) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def csv(rows: int = 20) -> bytes:
    lines = ["city,temperature"] + [f"city{i},{i % 30}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def truncated_png() -> bytes:
    data = png(300, 200)
    return data[: len(data) // 2]


def big_file(size: int = 30 * 1024 * 1024) -> bytes:
    return b"\x00\x01binary" * (size // 8)


def bomb_png(width: int = 30_000, height: int = 30_000) -> bytes:
    """A PNG header declaring a huge bitmap with almost no data (what a decompression bomb
    looks like before decoding)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 1024))
        + chunk(b"IEND", b"")
    )

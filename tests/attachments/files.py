"""Real small files made in the tests: PNG, JPEG with an EXIF rotation, a 3-page PDF, a CSV, a
truncated image, a large file. Built with Pillow and pypdf, so they are what those libraries (and
the provider) accept, never hand-written bytes that merely look right."""

from __future__ import annotations

import io
import random
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


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def png_with_private_chunk(padding: int, width: int = 64, height: int = 48) -> bytes:
    """A small PNG carrying a private ancillary chunk of `padding` random bytes (decoders skip
    it; the file stays that large)."""
    data = png(width, height)
    return data[:33] + _chunk(b"prIv", random.Random(7).randbytes(padding)) + data[33:]


def png16(width: int, height: int) -> bytes:
    """A 16-bit RGBA PNG of noise (8 bytes a pixel that do not compress): 1500x700 is 8.4 MB.
    Pillow writes no 16-bit colour PNG, so the chunks are assembled here and Pillow reads it."""
    rng = random.Random(16)
    rows = b"".join(b"\x00" + rng.randbytes(width * 8) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 16, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows, 1))
        + _chunk(b"IEND", b"")
    )


def animated_gif(min_bytes: int, width: int = 640, height: int = 480) -> bytes:
    """An animated GIF of noise frames, a little over `min_bytes` long."""
    rng = random.Random(8)
    palette = rng.randbytes(768)

    def frame() -> Image.Image:
        made = Image.frombytes("P", (width, height), rng.randbytes(width * height))
        made.putpalette(palette)
        return made

    one = io.BytesIO()
    frame().save(one, format="GIF")
    frames = [frame() for _ in range(max(2, -(-min_bytes // len(one.getvalue()))))]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=100)
    return out.getvalue()


def padded_pdf(size: int) -> bytes:
    """A one-page PDF of about `size` bytes: it carries an embedded file of random bytes (which
    readers list, never render), so the file is that large and still one valid page."""
    writer = PdfWriter()
    writer.add_blank_page(width=612, height=792)
    base = io.BytesIO()
    writer.write(base)
    padding = max(0, size - len(base.getvalue()) - 64)
    writer.add_attachment("padding.bin", random.Random(12).randbytes(padding))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()

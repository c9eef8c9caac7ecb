"""Images within the API's limits by construction: what the host sends of any image is at most
5 MB of base64 and 8,000 px a side, and decoding is bounded. The three files from issue 25 (an
8.6 MB animated GIF, a 64x48 PNG with an 8 MB private chunk, an 8.4 MB 16-bit PNG) are made here,
never committed."""

from __future__ import annotations

import base64
import contextlib
import io
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from bot.attachments.images import (
    API_MAX_BASE64,
    API_MAX_EDGE,
    MAX_DECODED_PIXELS,
    MAX_EDGE,
    MAX_PIXELS,
    base64_size,
    prepare_image,
)
from bot.attachments.read import read_file
from bot.errors import FileUnreadable

from . import files

MB = 1024 * 1024


def _within_limits(data: bytes, width: int, height: int) -> None:
    assert len(base64.b64encode(data)) <= API_MAX_BASE64
    assert max(width, height) <= API_MAX_EDGE
    with Image.open(io.BytesIO(data)) as shown:
        assert shown.size == (width, height)
        assert not getattr(shown, "is_animated", False)


def test_base64_size_is_what_the_api_counts() -> None:
    for size in (0, 1, 2, 3, 4, 3_932_160, 3_932_161):
        assert base64_size(size) == len(base64.b64encode(b"\x00" * size))
    # 3.75 MB of file is the most that fits 5 MB of base64.
    assert base64_size(3_932_160) == API_MAX_BASE64 < base64_size(3_932_161)


def test_an_animated_gif_of_8_6_mb_becomes_its_first_frame() -> None:
    data = files.animated_gif(int(8.6 * MB))
    assert len(data) > 8.6 * MB
    ready = read_file("cat.gif", "image/gif", data)
    _within_limits(ready.data, ready.detail["width"], ready.detail["height"])
    with Image.open(io.BytesIO(data)) as original:
        first = original.convert("RGB")
    with Image.open(io.BytesIO(ready.data)) as shown:
        assert shown.convert("RGB").tobytes() == first.tobytes()  # lossless: the first frame


def test_a_small_png_with_an_8_mb_private_chunk_is_encoded_again() -> None:
    data = files.png_with_private_chunk(8 * MB)
    ready = read_file("tiny.png", "image/png", data)
    assert ready.detail == {"width": 64, "height": 48}
    assert len(ready.data) < 64 * 1024
    _within_limits(ready.data, 64, 48)


def test_a_16_bit_png_of_8_4_mb_fits_the_limits() -> None:
    data = files.png16(1500, 700)
    assert len(data) > 8.4 * 1000 * 1000
    ready = read_file("scan.png", "image/png", data)
    assert ready.detail == {"width": 1500, "height": 700}
    _within_limits(ready.data, 1500, 700)


def test_a_file_just_over_3_75_mb_is_not_kept_as_is() -> None:
    data = files.png_with_private_chunk(3_932_161)  # the PNG itself adds a few hundred bytes
    ready = prepare_image(data)
    assert ready.data != data
    assert base64_size(len(ready.data)) <= API_MAX_BASE64


def test_16_bit_greyscale_keeps_its_tones() -> None:
    out = io.BytesIO()
    Image.new("I;16", (2000, 100), 40_000).save(out, format="PNG")  # over MAX_EDGE: re-encoded
    ready = prepare_image(out.getvalue())
    with Image.open(io.BytesIO(ready.data)) as shown:
        value = shown.convert("L").getpixel((5, 5))
    assert value == 40_000 // 256  # scaled to 8 bits, not clipped to white


def test_noise_too_big_for_png_falls_back_to_a_jpeg_within_the_limit() -> None:
    # Random RGBA pixels: even downscaled to the recommended size, a PNG is over 3.75 MB.
    noise = Image.frombytes("RGBA", (1200, 1200), random.Random(3).randbytes(1200 * 1200 * 4))
    out = io.BytesIO()
    noise.save(out, format="PNG")
    ready = prepare_image(out.getvalue())
    assert ready.media_type == "image/jpeg"
    _within_limits(ready.data, ready.width, ready.height)


def test_a_png_over_the_decoded_pixel_budget_is_refused_before_decoding() -> None:
    # 12000x5333 decodes to 64 MP (256 MB): refused from its header alone.
    out = io.BytesIO()
    Image.new("1", (12_000, 5_333)).save(out, format="PNG")
    with pytest.raises(FileUnreadable, match="12000×5333 pixels, too large to decode safely"):
        prepare_image(out.getvalue())


def test_a_large_jpeg_is_decoded_at_a_reduced_scale() -> None:
    # 48 MP: over the decoded budget as is, a quarter of it in draft mode.
    data = files.jpeg(8_000, 6_000, quality=30)
    assert MAX_DECODED_PIXELS < 8_000 * 6_000
    ready = prepare_image(data)
    assert max(ready.width, ready.height) <= MAX_EDGE
    assert ready.width * ready.height <= MAX_PIXELS


# --- any image: a block within the limits, or a one-line refusal --------------------------------


@st.composite
def images(draw: st.DrawFn) -> bytes:
    mode = draw(st.sampled_from(["1", "L", "LA", "P", "RGB", "RGBA", "I;16"]))
    fmt = draw(st.sampled_from(["PNG", "JPEG", "GIF", "WEBP"]))
    width = draw(st.integers(1, 2400))
    height = draw(st.integers(1, 2400 if width < 600 else 600))
    noise = draw(st.booleans())
    image = Image.effect_noise((width, height), 90) if noise else Image.new("L", (width, height))
    if mode == "I;16":  # 16-bit greyscale: PNG only
        fmt = "PNG"
        image = image.convert("I").point(lambda v: v * 250).convert("I;16")
    else:
        image = image.convert(mode)
    if fmt == "JPEG" and image.mode not in ("L", "RGB"):
        image = image.convert("RGB")
    if fmt == "GIF" and image.mode not in ("L", "P", "1"):
        image = image.convert("P")
    if fmt == "WEBP" and image.mode not in ("RGB", "RGBA"):
        image = image.convert("RGBA")
    out = io.BytesIO()
    frames = draw(st.integers(1, 3)) if fmt in ("GIF", "WEBP") else 1
    extra = [image.rotate(90 * n) for n in range(1, frames)]
    image.save(out, format=fmt, save_all=frames > 1, append_images=extra)
    data = out.getvalue()
    cut = draw(st.sampled_from([None, 0.5, 0.9]))
    junk = draw(st.binary(max_size=64))
    return data[: int(len(data) * cut)] + junk if cut else data + junk


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(images())
def test_any_image_gives_a_block_within_limits_or_a_one_line_refusal(data: bytes) -> None:
    try:
        ready = read_file("drawn", "", data)
    except FileUnreadable as refused:
        reason = str(refused)
        assert reason
        assert "\n" not in reason
        assert len(reason) < 200
        return
    if ready.kind != "image":  # junk appended to a cut file can read as text or be refused
        return
    _within_limits(ready.data, ready.detail["width"], ready.detail["height"])
    assert ready.detail["width"] * ready.detail["height"] <= MAX_PIXELS


def test_a_large_transparent_png_is_reduced_by_bands_with_its_alpha() -> None:
    image = Image.new("RGBA", (4000, 3000), (200, 30, 30, 255))
    image.paste((20, 20, 220, 0), (0, 1500, 4000, 3000))  # the lower half fully transparent
    out = io.BytesIO()
    image.save(out, format="PNG")
    ready = prepare_image(out.getvalue())
    assert (ready.media_type, ready.width, ready.height) == ("image/png", 1238, 928)
    with Image.open(io.BytesIO(ready.data)) as shown:
        assert shown.mode == "RGBA"
        upper = shown.crop((0, 0, 1238, 440))  # many band seams: none leaves a mark
        assert upper.getextrema() == ((200, 200), (30, 30), (30, 30), (255, 255))
        assert shown.crop((0, 490, 1238, 928)).getextrema()[3] == (0, 0)


def test_a_large_palette_image_is_resized_in_colour() -> None:
    image = Image.new("P", (3000, 2000))
    image.putpalette([0, 0, 0, 250, 120, 10] + [0] * 762)
    image.paste(1, (0, 0, 3000, 2000))
    out = io.BytesIO()
    image.save(out, format="GIF")
    ready = prepare_image(out.getvalue())
    assert max(ready.width, ready.height) <= MAX_EDGE
    with Image.open(io.BytesIO(ready.data)) as shown:
        assert shown.convert("RGB").getpixel((10, 10)) == (250, 120, 10)


def test_a_side_over_12000_px_is_refused_from_the_header() -> None:
    out = io.BytesIO()
    Image.new("1", (12_001, 2)).save(out, format="PNG")
    with pytest.raises(FileUnreadable, match="12001×2 pixels"):
        prepare_image(out.getvalue())


def test_an_animated_gif_cut_anywhere_is_read_or_refused_in_one_line() -> None:
    """Pillow's GIF parser fails on a cut palette with an IndexError, not an OSError: every way
    a file can be damaged must end as the one-line refusal, never an exception of the host's."""
    frames = [Image.new("P", (8, 8), colour) for colour in (1, 2, 3)]
    for frame in frames:
        frame.putpalette([i % 256 for i in range(3 * 7)])  # a short palette: 7 colours
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:], duration=50)
    data = buffer.getvalue()
    for cut in range(len(data) + 1):
        with contextlib.suppress(FileUnreadable):
            read_file("cut.gif", "image/gif", data[:cut])

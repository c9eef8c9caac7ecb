"""Images people share, made ready for the model: decoded within a memory bound, EXIF-rotated,
downscaled to the model's recommended size and re-encoded within the API's limits, with Pillow.
The only module that imports Pillow.

The provider recommends at most about 1.15 megapixels and 1,568 pixels on the long edge: a larger
image costs more tokens and is downscaled by the provider anyway. The API refuses an image whose
base64 text is over 5 MB (so a file over 3.75 MB is already too large) or with a side over
8,000 pixels; what this module returns is always within both. An image already within the size
bounds, upright, still (not animated) and small enough is kept byte for byte; any other is decoded
and encoded again (an animated one: its first frame). Decoding is bounded: the declared size is
checked before any pixel is decoded (decompression bombs), a JPEG is decoded straight at a reduced
scale (draft mode), and no decode may produce more than `MAX_DECODED_PIXELS`.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

from bot import replies
from bot.errors import FileUnreadable

MAX_EDGE = 1568
MAX_PIXELS = 1_150_000
# The API's per-image limits: 5 MB of base64 text and 8,000 px a side.
API_MAX_BASE64 = 5 * 1024 * 1024
API_MAX_EDGE = 8000
# FileUnreadable before decoding: what the file declares.
MAX_SOURCE_EDGE = 12_000
MAX_SOURCE_PIXELS = 64_000_000
# What one decode may produce (after a JPEG's draft reduction): 16 MP is 64 MB in memory, the
# largest bitmap any one file costs. A PNG cannot be decoded at a reduced size, so a PNG, GIF or
# WebP over it is refused; a JPEG of up to MAX_SOURCE_PIXELS is decoded at 1/2, 1/4 or 1/8.
MAX_DECODED_PIXELS = 16_000_000
JPEG_QUALITY = 85
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_EXIF_ORIENTATION = 0x0112
# Each step down when an encoding is still over the API's limit (never reached by a photo of the
# recommended size: only by noise-like pixels, where JPEG at this size is about 1 MB).
_SHRINK = 0.7
_ATTEMPTS = 6


@dataclass(frozen=True, slots=True)
class ReadyImage:
    data: bytes
    media_type: str
    width: int
    height: int


def base64_size(size: int) -> int:
    """The length of the base64 text of `size` bytes (what the API's 5 MB applies to)."""
    return 4 * math.ceil(size / 3)


def within_api_limits(size: int, width: int, height: int) -> bool:
    return base64_size(size) <= API_MAX_BASE64 and max(width, height) <= API_MAX_EDGE


def target_size(width: int, height: int) -> tuple[int, int]:
    """The largest size with the same aspect within MAX_EDGE and MAX_PIXELS (never upscaled)."""
    scale = min(1.0, MAX_EDGE / max(width, height), math.sqrt(MAX_PIXELS / (width * height)))
    if scale >= 1.0:
        return width, height
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def prepare_image(data: bytes) -> ReadyImage:
    """The image as the model should get it; FileUnreadable when it is damaged or too large."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return _prepare(data)
    except FileUnreadable:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise FileUnreadable(replies.IMAGE_BOMB) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError):
        raise FileUnreadable(replies.IMAGE_DAMAGED) from None


def _prepare(data: bytes) -> ReadyImage:
    with Image.open(io.BytesIO(data), formats=list(FORMATS)) as image:
        media_type = FORMATS[str(image.format)]
        width, height = image.size
        if max(width, height) > MAX_SOURCE_EDGE or width * height > MAX_SOURCE_PIXELS:
            raise FileUnreadable(replies.image_too_large(width, height))
        rotated = image.getexif().get(_EXIF_ORIENTATION, 1) not in (1, None)
        animated = bool(getattr(image, "is_animated", False))
        goal = target_size(width, height)
        if (
            goal == (width, height)
            and not rotated
            and not animated
            and within_api_limits(len(data), width, height)
        ):
            image.load()  # a truncated file fails here, not at the provider
            return ReadyImage(data, media_type, width, height)
        if image.format == "JPEG":
            # Decode at a reduced DCT scale straight away: far less memory and time.
            image.draft("RGB", _draft_size(goal, rotated))
        decoded = image.size[0] * image.size[1]
        if decoded > MAX_DECODED_PIXELS:
            raise FileUnreadable(replies.image_too_large(width, height))
        image.load()  # an animated image: its first frame only
        return _encode(_fit(image))


def _draft_size(goal: tuple[int, int], rotated: bool) -> tuple[int, int]:
    # Draft sizes are in stored orientation; a rotated photo's edges swap, so ask for the larger.
    edge = max(goal)
    return (edge, edge) if rotated else goal


def _fit(image: Image.Image) -> Image.Image:
    upright = ImageOps.exif_transpose(image)
    if upright is None:
        upright = image
    upright = _eight_bit(upright)
    size = target_size(*upright.size)
    if size != upright.size:
        upright = upright.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    return upright


def _eight_bit(image: Image.Image) -> Image.Image:
    """16-bit and 32-bit greyscale scaled down to 8 bits (a plain conversion would clip)."""
    if image.mode.startswith("I;16") or image.mode == "I":
        return image.convert("I").point(lambda value: value / 256).convert("L")
    if image.mode == "F":
        return image.convert("L")
    return image


def _encode(image: Image.Image) -> ReadyImage:
    """PNG when the image has transparency or few colours (screenshots, diagrams), else JPEG;
    smaller JPEGs until the result is within the API's per-image limit."""
    for candidate in _candidates(image):
        data, media_type = _saved(candidate)
        if within_api_limits(len(data), candidate.width, candidate.height):
            return ReadyImage(data, media_type, candidate.width, candidate.height)
    raise FileUnreadable(replies.IMAGE_DAMAGED)  # unreachable for any real bitmap


def _candidates(image: Image.Image) -> Iterator[Image.Image]:
    yield image
    flat = _flat(image)
    if flat is not image:
        yield flat
    for _ in range(_ATTEMPTS):
        size = (max(1, int(flat.width * _SHRINK)), max(1, int(flat.height * _SHRINK)))
        flat = flat.resize(size, Image.Resampling.LANCZOS)
        yield flat


def _flat(image: Image.Image) -> Image.Image:
    """The image as an RGB photo (transparency over white), which JPEG encodes compactly."""
    if image.mode == "RGB" and "transparency" not in image.info:
        return image
    rgba = image.convert("RGBA")
    flat = Image.new("RGB", rgba.size, (255, 255, 255))
    flat.paste(rgba, mask=rgba.getchannel("A"))
    return flat


def _saved(image: Image.Image) -> tuple[bytes, str]:
    out = io.BytesIO()
    if image.mode in ("RGBA", "LA", "P", "1", "L") or "transparency" in image.info:
        if image.mode not in ("RGBA", "RGB", "L", "LA", "P", "1"):
            image = image.convert("RGBA")
        image.save(out, format="PNG", optimize=False)
        return out.getvalue(), "image/png"
    image.convert("RGB").save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue(), "image/jpeg"

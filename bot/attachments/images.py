"""Images people share, made ready for the model: decoded, EXIF-rotated and downscaled to the
model's recommended size with Pillow. The only module that imports Pillow.

The provider recommends at most about 1.15 megapixels and 1,568 pixels on the long edge: a larger
image costs more tokens and is downscaled by the provider anyway. An image already within both
bounds, upright and in an accepted format is kept byte for byte. Decompression bombs (a small file
that decodes to a huge bitmap) are refused before any pixel is decoded.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

from bot import replies
from bot.errors import FileUnreadable

MAX_EDGE = 1568
MAX_PIXELS = 1_150_000
# FileUnreadable before decoding: the provider's own limit is 8,000 px a side.
MAX_SOURCE_EDGE = 12_000
MAX_SOURCE_PIXELS = 64_000_000
JPEG_QUALITY = 85
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_EXIF_ORIENTATION = 0x0112


@dataclass(frozen=True, slots=True)
class ReadyImage:
    data: bytes
    media_type: str
    width: int
    height: int


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
        goal = target_size(width, height)
        if goal == (width, height) and not rotated:
            image.load()  # a truncated file fails here, not at the provider
            return ReadyImage(data, media_type, width, height)
        if image.format == "JPEG":
            # Decode at a reduced DCT scale straight away: far faster for a large photo.
            image.draft("RGB", _draft_size(goal, rotated))
        image.load()
        return _encode(_fit(image))


def _draft_size(goal: tuple[int, int], rotated: bool) -> tuple[int, int]:
    # Draft sizes are in stored orientation; a rotated photo's edges swap, so ask for the larger.
    edge = max(goal)
    return (edge, edge) if rotated else goal


def _fit(image: Image.Image) -> Image.Image:
    upright = ImageOps.exif_transpose(image)
    if upright is None:
        upright = image
    size = target_size(*upright.size)
    if size != upright.size:
        upright = upright.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    return upright


def _encode(image: Image.Image) -> ReadyImage:
    """PNG when the image has transparency or few colours (screenshots, diagrams), else JPEG."""
    out = io.BytesIO()
    if image.mode in ("RGBA", "LA", "P", "1", "L") or "transparency" in image.info:
        if image.mode not in ("RGBA", "RGB", "L", "LA", "P", "1"):
            image = image.convert("RGBA")
        image.save(out, format="PNG", optimize=False)
        media_type = "image/png"
    else:
        image.convert("RGB").save(out, format="JPEG", quality=JPEG_QUALITY)
        media_type = "image/jpeg"
    return ReadyImage(out.getvalue(), media_type, image.width, image.height)

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

from PIL import Image

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
# largest bitmap any one file costs (5K screenshots fit). A PNG cannot be decoded at a reduced
# size, so a PNG, GIF or WebP over it is refused; a JPEG of up to MAX_SOURCE_PIXELS is decoded at
# 1/2, 1/4 or 1/8 of its size.
MAX_DECODED_PIXELS = 16_000_000
JPEG_QUALITY = 85
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_EXIF_ORIENTATION = 0x0112
_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_BAND_PIXELS = 1_000_000  # pixels per band when reducing (4 MB of RGBA)
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
    except Exception:  # a hostile file makes Pillow's parsers fail in any way (IndexError...)
        raise FileUnreadable(replies.IMAGE_DAMAGED) from None


def _prepare(data: bytes) -> ReadyImage:
    with Image.open(io.BytesIO(data), formats=list(FORMATS)) as image:
        media_type = FORMATS[str(image.format)]
        width, height = image.size
        if max(width, height) > MAX_SOURCE_EDGE or width * height > MAX_SOURCE_PIXELS:
            raise FileUnreadable(replies.image_too_large(width, height))
        animated = bool(getattr(image, "is_animated", False))
        goal = target_size(width, height)
        if image.format == "JPEG":
            # Decode at a reduced DCT scale straight away: far less memory and time. (A JPEG's
            # EXIF is in its header; a PNG's may follow the pixels, so it is read after them.)
            image.draft("RGB", _draft_size(goal, _rotated(image)))
        if image.size[0] * image.size[1] > MAX_DECODED_PIXELS:
            raise FileUnreadable(replies.image_too_large(width, height))
        image.load()  # a truncated file fails here; an animated image: its first frame only
        if (
            goal == (width, height) == image.size
            and not _rotated(image)
            and not animated
            and within_api_limits(len(data), width, height)
        ):
            return ReadyImage(data, media_type, width, height)
        fitted = _fit(image)
        image.close()  # the full-size bitmap goes before encoding begins
    return _encode(fitted)


def _rotated(image: Image.Image) -> bool:
    return image.getexif().get(_EXIF_ORIENTATION, 1) not in (1, None)


def _draft_size(goal: tuple[int, int], rotated: bool) -> tuple[int, int]:
    # Draft sizes are in stored orientation; a rotated photo's edges swap, so ask for the larger.
    edge = max(goal)
    return (edge, edge) if rotated else goal


def _fit(image: Image.Image) -> Image.Image:
    """Upright, 8-bit, within the recommended size. A large bitmap is first reduced by a whole
    factor, a band of rows at a time, so the decode is the only full-size bitmap ever held."""
    size = target_size(*image.size)
    fitted = _eight_bit(image, resizing=size != image.size)
    factor = min(fitted.size[0] // size[0], fitted.size[1] // size[1])
    if factor >= 2:
        fitted = _reduced(fitted, factor)
    turn = _TRANSPOSE.get(image.getexif().get(_EXIF_ORIENTATION, 1))
    if turn is not None:
        fitted = fitted.transpose(turn)
    size = target_size(*fitted.size)
    if size != fitted.size:
        fitted = fitted.resize(size, Image.Resampling.LANCZOS)
    return fitted.copy() if fitted is image else fitted  # within the size: a small copy


def _reduced(image: Image.Image, factor: int) -> Image.Image:
    """`image.reduce(factor)` by bands of rows: reducing RGBA premultiplies its alpha in a copy,
    which is then a band's size instead of a second full-size bitmap."""
    width, height = image.size[0] // factor, image.size[1] // factor
    out = Image.new(image.mode, (width, height))
    rows = max(factor, _BAND_PIXELS // image.size[0] // factor * factor)
    for top in range(0, height * factor, rows):
        bottom = min(top + rows, height * factor)
        out.paste(image.crop((0, top, width * factor, bottom)).reduce(factor), (0, top // factor))
    return out


def _eight_bit(image: Image.Image, *, resizing: bool) -> Image.Image:
    """An image box reduction and Lanczos can work on: 16- and 32-bit greyscale scaled down to
    8 bits (a plain conversion would clip); palette and 1-bit images as RGB(A) when resized."""
    if image.mode.startswith("I;16") or image.mode == "I":
        # By bands: a whole 32-bit copy of a large 16-bit image would be twice its size.
        out = Image.new("L", image.size)
        rows = max(1, _BAND_PIXELS // image.size[0])
        for top in range(0, image.size[1], rows):
            band = image.crop((0, top, image.size[0], min(top + rows, image.size[1])))
            out.paste(band.convert("I").point(lambda value: value / 256).convert("L"), (0, top))
        return out
    if image.mode == "F":
        return image.convert("L")
    if resizing and image.mode in ("P", "1", "PA"):
        return image.convert("RGBA" if _transparent(image) else "RGB")
    return image


def _transparent(image: Image.Image) -> bool:
    return "transparency" in image.info or image.mode == "PA"


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

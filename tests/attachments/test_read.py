"""What a shared file becomes for the model: real files through `read_file`."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from bot import replies
from bot.attachments.images import MAX_EDGE, MAX_PIXELS, target_size
from bot.attachments.read import read_file, sniff
from bot.errors import FileUnreadable

from . import files


def test_a_small_png_is_kept_byte_for_byte() -> None:
    data = files.png(64, 48)
    ready = read_file("shot.png", "image/png", data)
    assert (ready.kind, ready.media_type, ready.data) == ("image", "image/png", data)
    assert ready.detail == {"width": 64, "height": 48}


def test_a_jpeg_with_exif_rotation_is_turned_upright() -> None:
    # Orientation 6: the camera was turned; viewers rotate 90° clockwise to show it upright.
    ready = read_file("photo.jpg", "image/jpeg", files.jpeg(80, 40, orientation=6))
    assert ready.kind == "image"
    assert ready.detail == {"width": 40, "height": 80}
    upright = Image.open(io.BytesIO(ready.data))
    assert upright.size == (40, 80)
    assert upright.getexif().get(files.EXIF_ORIENTATION) in (None, 1)
    # The red left half of the stored picture is on top once upright.
    red, _, blue = upright.convert("RGB").getpixel((20, 10))
    assert red > 150 > blue


def test_a_large_photo_is_downscaled_to_the_recommended_size() -> None:
    ready = read_file("big.jpg", "image/jpeg", files.noisy_jpeg(3000, 2000))
    width, height = ready.detail["width"], ready.detail["height"]
    assert max(width, height) <= MAX_EDGE
    assert width * height <= MAX_PIXELS
    assert abs(width / height - 1.5) < 0.01
    assert Image.open(io.BytesIO(ready.data)).size == (width, height)


@pytest.mark.parametrize(("width", "height"), [(1, 1), (5000, 10), (1568, 1568), (4032, 3024)])
def test_target_size_keeps_both_bounds(width: int, height: int) -> None:
    w, h = target_size(width, height)
    assert max(w, h) <= MAX_EDGE
    assert w * h <= MAX_PIXELS
    assert w <= width
    assert h <= height


def test_a_truncated_image_is_refused_as_damaged() -> None:
    with pytest.raises(FileUnreadable, match="could not be decoded"):
        read_file("cut.png", "image/png", files.truncated_png())


def test_a_decompression_bomb_is_refused_before_decoding() -> None:
    with pytest.raises(FileUnreadable, match=r"too large to decode safely|too many pixels"):
        read_file("bomb.png", "image/png", files.bomb_png())


def test_a_three_page_pdf_is_a_document() -> None:
    data = files.pdf(3)
    ready = read_file("report.pdf", "application/pdf", data)
    assert (ready.kind, ready.data, ready.detail) == ("pdf", data, {"pages": 3})


def test_a_damaged_pdf_is_refused() -> None:
    data = files.pdf(3)
    with pytest.raises(FileUnreadable, match="PDF could not be read"):
        read_file("report.pdf", "application/pdf", data[:9] + b"garbage" * 10)
    with pytest.raises(FileUnreadable, match="PDF could not be read"):
        read_file("report.pdf", "application/pdf", b"not a pdf at all")


def test_a_csv_is_text() -> None:
    ready = read_file("data.csv", "text/csv", files.csv(5))
    assert (ready.kind, ready.media_type) == ("text", "text/csv")
    assert ready.data.decode().startswith("city,temperature\ncity0,0")
    assert ready.detail["chars"] == len(files.csv(5).decode())


def test_untyped_text_is_recognised_by_its_bytes() -> None:
    ready = read_file("notes", "application/octet-stream", b"plain words\nsecond line\n")
    assert ready.kind == "text"
    assert ready.media_type == "text/plain"


def test_binary_and_unknown_types_are_unsupported() -> None:
    with pytest.raises(FileUnreadable) as caught:
        read_file("blob.bin", "application/octet-stream", files.big_file(4096))
    assert str(caught.value) == replies.unsupported_type("application/octet-stream")
    with pytest.raises(FileUnreadable, match="application/zip"):
        read_file("a.zip", "application/zip", b"PK\x03\x04" + b"\x00" * 100)


def test_the_bytes_decide_not_the_declared_type() -> None:
    assert sniff(files.png()) == "image"
    assert sniff(files.pdf(1)) == "pdf"
    ready = read_file("looks-like.txt", "text/plain", files.png())
    assert ready.kind == "image"
    with pytest.raises(FileUnreadable, match="could not be decoded"):
        read_file("fake.png", "image/png", b"hello, I am text")


FRENCH = (
    "Le café de la gare était fermé. Nous sommes allés à l'hôtel où le garçon nous a servi un "
    "thé glacé. Prix : 12 € — « très cher », a dit Hélène.\n"
) * 3
JAPANESE = (
    "これは日本語のテキストファイルです。\n東京都の天気は晴れです。今日はいい天気ですね。\n" * 3
)


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        (FRENCH, "cp1252"),
        (JAPANESE, "shift_jis"),
        (FRENCH, "utf-16-le"),  # no byte order mark
        (JAPANESE, "utf-16-le"),
        (FRENCH, "utf-32"),  # with a byte order mark
        (FRENCH, "utf-32-le"),
        (FRENCH, "utf-8"),
    ],
)
def test_text_in_other_encodings_is_read_by_detection(text: str, encoding: str) -> None:
    ready = read_file("notes.txt", "text/plain", text.encode(encoding))
    assert ready.kind == "text"
    assert ready.data.decode("utf-8") == text


def test_a_text_file_no_encoding_reads_is_refused_without_contradiction() -> None:
    with pytest.raises(FileUnreadable) as caught:
        read_file("notes.txt", "text/plain", files.big_file(4096))
    assert str(caught.value) == replies.TEXT_UNDECODABLE
    assert "is not one I can read" not in str(caught.value)


def test_a_pdf_whose_base64_cannot_fit_one_request_is_refused() -> None:
    # 21 MB of PDF is 28 MB of base64: with the rest of a request, over what the API accepts.
    with pytest.raises(FileUnreadable) as caught:
        read_file("big.pdf", "application/pdf", files.padded_pdf(21 * 1024 * 1024))
    assert str(caught.value) == replies.pdf_too_large(20)
    assert read_file("ok.pdf", "application/pdf", files.padded_pdf(12 * 1024 * 1024)).kind == "pdf"

"""The media helpers the pipeline uses: the description line, images made ready for a model."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import pytest
from PIL import Image

from bot.chat.media import BadImage, hide_description, normalize_image, remembered_answer, split_description
from tests.support import image_bytes


@pytest.mark.parametrize(
    ("answer", "description", "shown"),
    [
        ("Image: A cat on a sofa.\nWhat a cute cat!", "A cat on a sofa.", "What a cute cat!"),
        ("**Image:** A cat on a sofa.\n\nCute!", "A cat on a sofa.", "Cute!"),
        ("  image: a dog\nWoof", "a dog", "Woof"),
        ("That is a cat.", "", "That is a cat."),  # the model did not write the line: all is shown
        ("Image:\nno description", "", "Image:\nno description"),
        ("Imagine a cat.\nYes.", "", "Imagine a cat.\nYes."),
    ],
)
def test_split_description(answer, description, shown):
    assert split_description(answer) == (description, shown)


def test_memory_keeps_the_description_at_the_head_of_the_reply():
    assert remembered_answer("Image: A red kite.\nNice kite!") == "[photo: A red kite.]\nNice kite!"
    assert remembered_answer("No line here.") == "No line here."


async def _pieces(*parts: str) -> AsyncIterator[str]:
    for part in parts:
        yield part


@pytest.mark.parametrize(
    ("parts", "shown"),
    [
        (("Ima", "ge: a ca", "t on a mat\nHel", "lo ", "there"), "Hello there"),
        (("Hello", " world"), "Hello world"),  # no description line
        (("Image: only a description",), ""),
        (("x" * 450, " and more"), "x" * 450 + " and more"),  # a long first line is not held forever
    ],
)
async def test_a_streamed_answer_hides_its_description_line(parts, shown):
    assert "".join([p async for p in hide_description(_pieces(*parts))]) == shown


def test_images_are_decoded_and_scaled_only_when_needed():
    small = image_bytes(640, 480, "blue")
    assert normalize_image(small, 1280) == ("image/png", small)  # sent as it is
    mime, data = normalize_image(image_bytes(3000, 1500, "green"), 1280)
    assert mime == "image/jpeg" and Image.open(io.BytesIO(data)).size == (1280, 640)
    bmp = image_bytes(100, 100, "white", fmt="BMP")  # an uncommon format becomes a JPEG
    assert normalize_image(bmp, 1280)[0] == "image/jpeg"


@pytest.mark.parametrize(
    "data",
    [b"", b"not a picture", image_bytes(400, 300)[:150], image_bytes(400, 300, fmt="JPEG")[:300]],
    ids=["empty", "text", "truncated png", "truncated jpeg"],
)
def test_a_damaged_picture_is_refused(data):
    with pytest.raises(BadImage):
        normalize_image(data, 1280)

"""The numpy/PIL preprocessing equals the torchvision pipeline, for every kind of upload."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from servelab.core.preprocess import IMAGE_SIZE, ImageError, load_image, preprocess, torchvision_transform
from servelab.core.samples import jpeg_bytes, sample_paths, synthetic_food_image

ORIENTATION_TAG = 0x0112


def _encode(img: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _uploads() -> dict[str, bytes]:
    """One file per awkward case a browser can send."""
    base = synthetic_food_image(7, label=3)
    rgba = base.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(base.size))
    exif = Image.Exif()
    exif[ORIENTATION_TAG] = 6  # "rotate 90° clockwise to view", as phones write it
    return {
        "sample_jpeg": sample_paths()[0].read_bytes(),
        "rgb_jpeg": jpeg_bytes(base),
        "grayscale_jpeg": _encode(base.convert("L"), "JPEG"),
        "rgba_png": _encode(rgba, "PNG"),
        "palette_png": _encode(base.convert("P"), "PNG"),
        "cmyk_jpeg": _encode(base.convert("CMYK"), "JPEG"),
        "exif_rotated_jpeg": _encode(base, "JPEG", exif=exif),
        "small_odd_size_png": _encode(base.resize((97, 61)), "PNG"),
    }


UPLOADS = _uploads()


@pytest.mark.parametrize("name", sorted(UPLOADS))
def test_numpy_pipeline_equals_torchvision(name: str) -> None:
    data = UPLOADS[name]
    reference_img = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
    expected = torchvision_transform()(reference_img).numpy()
    got = preprocess(load_image(data))
    assert got.shape == (3, IMAGE_SIZE, IMAGE_SIZE) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_exif_orientation_is_applied() -> None:
    stored = Image.open(io.BytesIO(UPLOADS["exif_rotated_jpeg"]))
    upright = load_image(UPLOADS["exif_rotated_jpeg"])
    assert upright.size == (stored.size[1], stored.size[0]), "EXIF orientation 6 should swap width/height"
    assert upright.mode == "RGB"


def test_decompression_bomb_is_refused_from_the_header() -> None:
    big = _encode(Image.new("RGB", (2000, 2000)), "PNG")
    with pytest.raises(ImageError, match="over the limit"):
        load_image(big, max_pixels=1_000_000)

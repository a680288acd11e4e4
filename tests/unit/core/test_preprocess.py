"""The numpy/PIL preprocessing equals the torchvision pipeline, for every kind of upload,
and both use the constants the Food-11 model was trained with (pinned here as literals)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from servelab.core import preprocess as preprocess_module
from servelab.core.preprocess import (
    IMAGE_SIZE,
    ImageError,
    load_image,
    preprocess,
    preprocess_bytes,
    torchvision_transform,
)
from servelab.core.samples import jpeg_bytes, sample_paths, synthetic_food_image

ORIENTATION_TAG = 0x0112

# What the Food-11 MobileNetV2 was trained with (the original lab's transforms):
# Resize((224, 224)) — both sides, no aspect kept — then CenterCrop(224),
# ToTensor, Normalize with the ImageNet statistics. Literals on purpose: the
# equality test above takes its constants from the module under test, so a
# wrong constant there would be wrong on both sides and still pass.
TRAINED_RESIZE = (224, 224)
TRAINED_CROP = 224
TRAINED_MEAN = (0.485, 0.456, 0.406)
TRAINED_STD = (0.229, 0.224, 0.225)


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


def test_constants_are_those_the_model_was_trained_with() -> None:
    assert preprocess_module.RESIZE_TO == TRAINED_RESIZE and preprocess_module.IMAGE_SIZE == TRAINED_CROP
    np.testing.assert_allclose(preprocess_module.MEAN, TRAINED_MEAN, rtol=0, atol=1e-7)
    np.testing.assert_allclose(preprocess_module.STD, TRAINED_STD, rtol=0, atol=1e-7)
    resize, crop, _to_tensor, normalize = torchvision_transform().transforms
    assert tuple(resize.size) == TRAINED_RESIZE and tuple(crop.size) == (TRAINED_CROP, TRAINED_CROP)
    np.testing.assert_allclose(normalize.mean, TRAINED_MEAN, rtol=0, atol=1e-7)
    np.testing.assert_allclose(normalize.std, TRAINED_STD, rtol=0, atol=1e-7)


def test_known_pixels_through_the_whole_pipeline() -> None:
    """A 448x224 photo, its left quarter red: squashed to 224x224 the red reaches x=55.

    Worked by hand: (value / 255 - mean) / std per channel. Resize(224) or
    Resize(256) before the crop would keep the aspect ratio and crop the red
    away (x=50 blue); a BGR order, a missing /255 or another mean/std changes
    the numbers.
    """
    red, blue = (200, 30, 10), (20, 60, 220)
    img = Image.new("RGB", (448, 224), blue)
    img.paste(red, (0, 0, 112, 224))
    got = preprocess_bytes(_encode(img, "PNG"))
    assert got.shape == (3, 224, 224)
    # (200/255 - .485)/.229, (30/255 - .456)/.224, (10/255 - .406)/.225
    red_expected = [1.307047, -1.510504, -1.630153]
    # (20/255 - .485)/.229, (60/255 - .456)/.224, (220/255 - .406)/.225
    blue_expected = [-1.775409, -0.985294, 2.029978]
    for x in (0, 20, 50):
        np.testing.assert_allclose(got[:, 112, x], red_expected, atol=1e-5, err_msg=f"pixel (112, {x})")
    for x in (60, 112, 223):
        np.testing.assert_allclose(got[:, 112, x], blue_expected, atol=1e-5, err_msg=f"pixel (112, {x})")

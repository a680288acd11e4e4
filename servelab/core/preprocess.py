"""Image decoding and preprocessing: one definition for every serving path.

The numpy/PIL pipeline here needs no torch, so the ONNX FastAPI service, the
Triton ONNX runner and the Flask app can share it; ``torchvision_transform``
is the reference it is tested against (and what the PyTorch paths may use).
Decoding is strict on purpose: every way an upload can be broken maps to an
``ImageError`` whose message a client can act on.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from servelab.core.labels import CLASSES

IMAGE_SIZE = 224
RESIZE_TO = (224, 224)  # (height, width), as torchvision.transforms.Resize takes it
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

DEFAULT_MAX_PIXELS = int(os.environ.get("SERVELAB_MAX_PIXELS", 40_000_000))
DEFAULT_MAX_BYTES = int(os.environ.get("SERVELAB_MAX_BYTES", 10 * 1024 * 1024))
# The pixels one process decodes at once (3 bytes each once decoded): a small file can decode to a large
# image (a 129 KiB PNG to about 150 MiB), so concurrent decodes wait for their share of this budget,
# checked from the header before any pixel is decoded. Why: docs/decisions/2026-12-01-exposure.md
DECODE_BUDGET_PIXELS = int(os.environ.get("SERVELAB_DECODE_BUDGET_PIXELS", 2 * DEFAULT_MAX_PIXELS))
DECODE_WAIT_S = 10.0  # how long a decode waits for its share before the request is turned away


class ImageError(ValueError):
    """The client sent something that is not a usable image; the message says what."""


class DecodeBusy(ImageError):
    """The process is decoding as many pixels as its budget allows: the client should try again soon."""


class PixelBudget:
    """The pixels being decoded at once in this process: at most ``limit`` (one image may take it all)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._free = threading.Condition()

    @contextmanager
    def share(self, pixels: int, wait_s: float = DECODE_WAIT_S) -> Iterator[None]:
        """Hold ``pixels`` of the budget (all of it, for an image larger than it) while decoding."""
        wanted = min(pixels, self.limit)
        deadline = time.monotonic() + wait_s
        with self._free:
            while self.used + wanted > self.limit:
                left = deadline - time.monotonic()
                if left <= 0 or not self._free.wait(left):
                    raise DecodeBusy(f"the server is decoding {self.used:,} pixels of other images, its "
                                     f"budget is {self.limit:,}: try again in a moment")
            self.used += wanted
        try:
            yield
        finally:
            with self._free:
                self.used -= wanted
                self._free.notify_all()


DECODE_BUDGET = PixelBudget(DECODE_BUDGET_PIXELS)


def decode_base64(text: str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Strictly decode base64 text (a ``data:`` URL prefix is accepted)."""
    if not isinstance(text, str):
        raise ImageError("'image' must be a base64-encoded string")
    text = text.strip()
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    if not text:
        raise ImageError("'image' is empty: send the base64 of an image file")
    if len(text) * 3 // 4 > max_bytes:
        raise ImageError(f"image is larger than the limit of {max_bytes} bytes")
    try:
        data = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(f"'image' is not valid base64 ({exc})") from None
    if not data:
        raise ImageError("'image' decodes to zero bytes")
    return data


def load_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Decode image bytes into an upright RGB PIL image, or raise ``ImageError``.

    The pixel count is checked from the header before any pixel is decoded, so
    a decompression bomb costs nothing, and the decode waits for its share of the process's
    ``DECODE_BUDGET`` (``DecodeBusy`` past ``DECODE_WAIT_S``); EXIF orientation is applied so a phone
    photo is classified the way it is seen.
    """
    if not data:
        raise ImageError("no image data: the file is empty")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img: Image.Image = Image.open(io.BytesIO(data))
            width, height = img.size
            if width * height > max_pixels:
                raise ImageError(
                    f"image is {width}x{height} = {width * height} pixels, over the limit of "
                    f"{max_pixels} pixels"
                )
            with DECODE_BUDGET.share(width * height):
                img.load()
                img = ImageOps.exif_transpose(img)
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageError(f"image has too many pixels ({exc})") from None
    except UnidentifiedImageError:
        raise ImageError("the data is not an image in a format Pillow can read") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"the image is truncated or corrupt ({exc})") from None
    return img.convert("RGB")


def image_from_base64(text: str, max_bytes: int = DEFAULT_MAX_BYTES,
                      max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Base64 text of an image file → RGB image; the path every JSON API takes."""
    return load_image(decode_base64(text, max_bytes), max_pixels)


def _center_crop(img: Image.Image, size: int) -> Image.Image:
    width, height = img.size
    left = round((width - size) / 2.0)
    top = round((height - size) / 2.0)
    return img.crop((left, top, left + size, top + size))


def preprocess(img: Image.Image) -> np.ndarray:
    """RGB image → normalised float32 array [3, 224, 224].

    Mirrors Resize((224, 224)) → CenterCrop(224) → ToTensor → Normalize(ImageNet)
    operation for operation (same PIL resize, same float32 arithmetic order), so
    it matches torchvision to float rounding.
    """
    resized = img.resize((RESIZE_TO[1], RESIZE_TO[0]), Image.Resampling.BILINEAR)
    cropped = _center_crop(resized, IMAGE_SIZE)
    array = np.asarray(cropped, dtype=np.uint8).astype(np.float32) / np.float32(255)
    array = (array - MEAN) / STD
    return np.ascontiguousarray(array.transpose(2, 0, 1))


def preprocess_batch(images: Sequence[Image.Image]) -> np.ndarray:
    """Several images → one float32 batch [N, 3, 224, 224]."""
    return np.stack([preprocess(img) for img in images]).astype(np.float32, copy=False)


def preprocess_bytes(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Image file bytes → [3, 224, 224]: decode and preprocess in one call."""
    return preprocess(load_image(data, max_pixels))


def torchvision_transform() -> Any:
    """The reference torchvision pipeline (imports torch, so only PyTorch paths call it)."""
    from torchvision import transforms

    return transforms.Compose([
        transforms.Resize(RESIZE_TO),
        transforms.CenterCrop(IMAGE_SIZE),
        transforms.ToTensor(),
        transforms.Normalize(mean=MEAN.tolist(), std=STD.tolist()),
    ])


def softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable softmax over the last axis."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def top1(logits: np.ndarray) -> tuple[str, float]:
    """Logits of one image → (label, softmax probability of that label)."""
    probs = softmax(np.asarray(logits).reshape(-1))
    index = int(np.argmax(probs))
    return CLASSES[index], float(probs[index])

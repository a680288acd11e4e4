"""Deterministic stand-in food photos.

No Food-11 images can be downloaded here, so the lab draws its own: a plate on a
table with coloured, textured shapes. They are real JPEG files of a realistic
size (about 30 KB, 512x384), so decoding and preprocessing cost what a phone
photo would.
"""

from __future__ import annotations

import argparse
import colorsys
import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from servelab.core.labels import NUM_CLASSES
from servelab.core.paths import SAMPLES_DIR

DEFAULT_SIZE = (512, 384)


def class_tint(label: int) -> np.ndarray:
    """The colour that marks class ``label`` in drawn photos (evenly spaced hues)."""
    return np.array(colorsys.hsv_to_rgb(label / NUM_CLASSES, 0.9, 1.0), dtype=np.float32) * 255


def synthetic_food_image(seed: int, label: int | None = None,
                         size: tuple[int, int] = DEFAULT_SIZE) -> Image.Image:
    """One RGB 'dish' drawn from ``seed``; the same seed always gives the same picture.

    With ``label`` the picture is tinted with that class's colour: the stand-in
    model is trained to tell those tints apart, so drawn photos of different
    classes get different, confident predictions.
    """
    rng = np.random.default_rng(seed)
    width, height = size
    table = tuple(int(c) for c in rng.integers(40, 200, size=3))
    img = Image.new("RGB", size, table)
    draw = ImageDraw.Draw(img)
    margin = int(min(size) * 0.08)
    draw.ellipse((margin, margin, width - margin, height - margin), fill=(235, 235, 228))
    for _ in range(int(rng.integers(4, 12))):
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        cx, cy = rng.integers(width // 4, 3 * width // 4), rng.integers(height // 4, 3 * height // 4)
        rx, ry = rng.integers(15, width // 5), rng.integers(15, height // 5)
        box = (int(cx - rx), int(cy - ry), int(cx + rx), int(cy + ry))
        if rng.random() < 0.5:
            draw.ellipse(box, fill=colour)
        else:
            draw.rectangle(box, fill=colour)
    noise = rng.normal(0, 18, size=(height, width, 3))
    textured = np.clip(np.asarray(img, dtype=np.float32) + noise, 0, 255).astype(np.uint8)
    if label is not None:
        textured = np.clip(0.55 * textured + 0.45 * class_tint(label), 0, 255).astype(np.uint8)
    return Image.fromarray(textured).filter(ImageFilter.GaussianBlur(radius=1.2))


def jpeg_bytes(img: Image.Image, quality: int = 85) -> bytes:
    """Encode an image as JPEG bytes, as a browser upload would carry it."""
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def write_samples(directory: Path = SAMPLES_DIR, count: int = NUM_CLASSES,
                  first_seed: int = 1000) -> list[Path]:
    """Write ``count`` sample JPEGs (food_00.jpg …, one class tint each); existing files stay."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"food_{i:02d}.jpg"
        if not path.exists():
            path.write_bytes(jpeg_bytes(synthetic_food_image(first_seed + i, label=i % NUM_CLASSES)))
        paths.append(path)
    return paths


def sample_paths(directory: Path = SAMPLES_DIR) -> list[Path]:
    """The sample JPEGs shipped with the lab, in a stable order."""
    return sorted(directory.glob("*.jpg"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the lab's stand-in food photos.")
    parser.add_argument("--dir", type=Path, default=SAMPLES_DIR)
    parser.add_argument("--count", type=int, default=NUM_CLASSES)
    args = parser.parse_args(argv)
    for path in write_samples(args.dir, args.count):
        print(path)


if __name__ == "__main__":
    main()

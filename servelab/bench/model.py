"""The model alone, without a server: the ceiling a service on this machine can approach.

``run_raw`` times ONNX Runtime and PyTorch at batch 1 and 16 (the services' own engine classes and
thread settings) and decode + preprocessing per image on one thread; ``ceiling`` turns such rows
into the requests per second no service could beat; ``bracket_raw`` averages the rows timed before
and after the services (a shared machine drifts).
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from servelab.bench.client import BenchError, ImageSource, request_bodies
from servelab.core.progress import bar as tqdm
from servelab.core.samples import sample_paths

ENGINES = {"onnx": "onnxruntime", "pt": "pytorch"}  # a service's kind → its raw rows' "what"
RAW_COLUMNS = ("what", "batch", "threads", "ms_per_image", "images_per_s")


def _time_per_call(call: Callable[[], Any], min_seconds: float, min_calls: int = 3) -> float:
    """Median seconds of one ``call`` over at least ``min_seconds`` (after one warm-up call)."""
    call()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < min_calls or time.perf_counter() - started < min_seconds:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_preprocess(images: ImageSource = None, min_seconds: float = 2.0) -> float:
    """Seconds to decode + preprocess one image (base64 text → [3,224,224]), one thread."""
    from servelab.core.preprocess import image_from_base64, preprocess

    texts = [json.loads(body)["image"] for body in request_bodies(images)]
    per_round = _time_per_call(lambda: [preprocess(image_from_base64(t)) for t in texts], min_seconds)
    return per_round / len(texts)


def run_raw(batch_sizes: Sequence[int] = (1, 16), backends: Sequence[str] = ("onnx", "pt"),
            threads: int | None = None, min_seconds: float = 3.0, images: ImageSource = None,
            model_paths: dict[str, Path] | None = None) -> list[dict[str, Any]]:
    """Model-only speed: one row per (backend, batch) with images/s and ms/image, plus preprocessing.

    Uses the same backend classes and thread settings as the services
    (``servelab.serving.engines``), so the figures are what a service's worker gets.
    """
    from servelab.core.cpu import cpu_cores
    from servelab.core.paths import REPO_ROOT
    from servelab.core.preprocess import preprocess_bytes
    from servelab.serving.engines import load_backend

    threads = threads or cpu_cores()
    paths = {"onnx": REPO_ROOT / "fastapi_onnx" / "food11.onnx",
             "pt": REPO_ROOT / "fastapi_pt" / "food11.pth", **(model_paths or {})}
    sources = list(images) if images is not None else sample_paths()
    arrays = [preprocess_bytes(s if isinstance(s, bytes) else Path(s).read_bytes()) for s in sources]
    rows: list[dict[str, Any]] = []
    steps = [(b, n) for b in backends for n in batch_sizes]
    with tqdm(total=len(steps) + 1, desc="raw model timing", unit="step") as bar:
        pre = time_preprocess(images, min_seconds=min_seconds / 2)
        rows.append({"mode": "raw", "what": "preprocess", "batch": 1, "threads": 1,
                     "ms_per_image": pre * 1000, "images_per_s": 1 / pre})
        bar.update(1)
        for kind in backends:
            backend = load_backend(kind, paths[kind], threads)
            for size in batch_sizes:
                batch = np.stack([arrays[i % len(arrays)] for i in range(size)])
                per_call = _time_per_call(functools.partial(backend.infer, batch), min_seconds)
                rows.append({"mode": "raw", "what": backend.name, "batch": size, "threads": threads,
                             "device": backend.device, "ms_per_image": per_call / size * 1000,
                             "images_per_s": size / per_call})
                bar.update(1)
    return rows


def raw_figure(rows: Sequence[dict[str, Any]], what: str, batch: int = 1) -> float:
    """ms per image of one raw row (``what`` = "preprocess", "onnxruntime" or "pytorch")."""
    for row in rows:
        if row["what"] == what and row["batch"] == batch:
            return float(row["ms_per_image"])
    raise BenchError(f"no raw measurement of {what} at batch {batch}")


def bracket_raw(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Raw rows timed before and after the services, averaged row by row: the bounds' model speed.

    A shared machine's speed drifts over minutes, so the bounds use the
    model's speed around the time the services ran, not only before.
    """
    # why: docs/decisions/2026-11-22-bench-bounds-from-the-model-timed-around-the-services.md
    rows = []
    for first, last in zip(before, after, strict=True):
        ms = (first["ms_per_image"] + last["ms_per_image"]) / 2
        rows.append({**first, "ms_per_image": ms, "images_per_s": 1000.0 / ms,
                     "ms_before": first["ms_per_image"], "ms_after": last["ms_per_image"]})
    return rows


def ceiling(rows: Sequence[dict[str, Any]], kind: str, cores: int) -> float:
    """The "raw ceiling" a ``kind`` ("onnx"/"pt") service's requests/s is measured against, from ``run_raw``
    rows: its engine at the batch size it runs fastest at (ms per image) and preprocessing (ms per image,
    one thread); the HTTP layer and the clients are not in it.

    On a CPU the two share the cores: 1 / (engine + preprocess / cores). That is a reference, not a
    strict bound: the engine is timed on every core, and single-threaded passes side by side can beat it
    (a round may read above 1). On a GPU they run on different hardware and overlap: the lower of
    1 / engine and cores / preprocess.
    """
    what = ENGINES[kind]
    engine = [row for row in rows if row["what"] == what]
    if not engine:
        raise BenchError(f"no raw measurement of {what}")
    best = min(float(row["ms_per_image"]) for row in engine)
    pre = raw_figure(rows, "preprocess")
    if any(str(row.get("device", "cpu")).startswith("cuda") for row in engine):
        return min(1000.0 / best, 1000.0 * cores / pre)
    return 1000.0 / (best + pre / cores)

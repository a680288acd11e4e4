"""GourmetGram, the lab's web app, pointed at whichever server a notebook runs (03, 04, 06).

``flask_up`` starts (or reconfigures) the app in front of a FastAPI or Triton server and
``flask_uploads`` sends sample photos through it as a browser would, recording one row.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from servelab.core.progress import bar as tqdm  # text on stdout: plain output in executed notebooks
from servelab.lab.common import Endpoint, record, show_columns
from servelab.lab.params import LabParams
from servelab.results.schema import FLASK, load
from servelab.results.store import results_dir
from servelab.targets.base import Stack


def flask_up(stack: Stack, backend: str) -> Endpoint:
    """GourmetGram pointed at the stack's server through ``backend`` (fastapi | triton | triton_onnx).

    ``fastapi`` runs it in the FastAPI stack; ``triton`` and ``triton_onnx`` in the Triton stack, calling
    ``food_classifier`` or ``food_classifier_onnx`` (it then preprocesses and applies softmax itself).
    """
    if backend == "fastapi":
        stack.up("fastapi", services=["flask"])
    else:
        stack.up("triton", services=["flask"], flask_backend=backend)
    return Endpoint(f"flask ({backend})", stack.url("flask").rstrip("/"))


def flask_uploads(flask: Endpoint, p: LabParams, step: str) -> pd.DataFrame:
    """Upload sample photos through the app's API, as a browser would; one summary row stored."""
    import httpx

    from servelab.core.samples import sample_paths

    paths = sample_paths()
    replies: list[dict[str, Any]] = []
    times: list[float] = []
    errors = 0
    with httpx.Client(timeout=60.0) as client:
        for i in tqdm(range(p.flask_requests), desc="uploads", unit="img"):
            path = paths[i % len(paths)]
            started = time.perf_counter()
            response = client.post(f"{flask.url}/api/predict",
                                   files={"file": (path.name, path.read_bytes(), "image/jpeg")})
            times.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                errors += 1
                continue
            replies.append({"image": path.name, "ms": round(times[-1], 1), **response.json()})
    if not replies:
        raise RuntimeError(f"every upload to {flask.url} failed ({errors} errors): see the app's log")
    ms = pd.Series(times, dtype="float64")  # float64 anyway; unsaid, pandas-stubs type it Series[bool]
    row = {"step": step, "backend": flask.kind, "requests": len(times), "errors": errors,
           "median_ms": float(ms.median()), "p95_ms": float(ms.quantile(0.95))}
    record(FLASK, [row])
    return pd.DataFrame(replies)


FLASK_COLUMNS = ["step", "backend", "requests", "errors", "median_ms", "p95_ms", "labels_agree"]


def flask_summary() -> pd.DataFrame:
    """Every GourmetGram measurement of this run: one row per backend it was tried against."""
    return show_columns(load(results_dir(), FLASK), FLASK_COLUMNS)

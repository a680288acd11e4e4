"""GourmetGram, the lab's web app, pointed at whichever server a notebook runs (03, 04, 06).

``flask_up`` starts (or reconfigures) the app in front of a FastAPI or Triton server and
``flask_uploads`` sends sample photos through it as a browser would, recording one row: the first
(cold) upload apart, the median and the slowest of the others, and their p95 only from enough of them.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from servelab.core.progress import bar as tqdm  # text on stdout: plain output in executed notebooks
from servelab.lab.params import LabParams
from servelab.lab.stack import Endpoint
from servelab.lab.tables import record, show_columns
from servelab.results.schema import FLASK, load
from servelab.results.store import results_dir
from servelab.targets.base import Stack

MIN_FOR_P95 = 20  # warm uploads before a p95 is shown; why: docs/decisions/2026-11-23-readable-notebooks.md


def flask_up(stack: Stack, backend: str) -> Endpoint:
    """GourmetGram pointed at the stack's server through ``backend``: ``fastapi`` runs it in the FastAPI
    stack, the others (``servelab.targets.base.FLASK_TRITON_BACKENDS``: ``flask_app.backends`` holds what
    each sends and which model it calls) in the Triton stack."""
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
    row = {"step": step, "backend": flask.kind, "requests": len(times), "errors": errors,
           **upload_times(times)}
    record(FLASK, [row])
    print(read_uploads(row))
    return pd.DataFrame(replies)


def upload_times(times: list[float]) -> dict[str, float | None]:
    """The first upload's time (cold: the app's and the server's first request) and the others' median
    and maximum; their p95 only from ``MIN_FOR_P95`` or more of them (None otherwise)."""
    warm = pd.Series(times[1:], dtype="float64")  # unsaid, pandas-stubs type it Series[bool]
    return {"cold_ms": float(times[0]) if times else None,
            "median_ms": float(warm.median()) if len(warm) else None,
            "max_ms": float(warm.max()) if len(warm) else None,
            "p95_ms": float(warm.quantile(0.95)) if len(warm) >= MIN_FOR_P95 else None}


def read_uploads(row: dict[str, Any]) -> str:
    """One line on a ``flask_uploads`` row: the cold upload apart, then the warm ones."""
    def ms(key: str) -> str:
        return f"{row[key]:.1f} ms" if row.get(key) is not None else "—"

    warm = int(row["requests"]) - 1
    p95 = (f", p95 {ms('p95_ms')}" if row.get("p95_ms") is not None
           else f" (no p95 from fewer than {MIN_FOR_P95})")
    return (f"{row['backend']}: first upload {ms('cold_ms')} (cold: the first request through the app and "
            f"the server, kept out of the rest); the other {warm}: median {ms('median_ms')}, "
            f"max {ms('max_ms')}{p95}")


# cold_ms: the first upload; median_ms, max_ms, p95_ms: the others (p95 from MIN_FOR_P95 of them or more)
FLASK_COLUMNS = ["step", "backend", "requests", "errors", "cold_ms", "median_ms", "max_ms", "p95_ms"]


def flask_summary() -> pd.DataFrame:
    """Every GourmetGram measurement of this run: one row per backend it was tried against."""
    return show_columns(load(results_dir(), FLASK), FLASK_COLUMNS)

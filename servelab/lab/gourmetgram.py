"""GourmetGram, the lab's web app, pointed at whichever server a notebook runs (03, 04, 06).

``flask_up`` starts (or reconfigures) the app in front of a FastAPI or Triton server and
``flask_uploads`` sends sample photos through it as a browser would, recording one row.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pandas as pd
from tqdm import tqdm  # text bars: they stay readable in executed notebooks

from servelab.lab.common import hostport, record
from servelab.lab.params import LabParams
from servelab.results.schema import FLASK
from servelab.targets.base import Stack

if TYPE_CHECKING:
    from servelab.lab.step03_fastapi import Endpoint
    from servelab.lab.triton_steps import Triton


FLASK_STACK = {"fastapi": "fastapi", "triton": "triton"}  # backends a stack's own flask service serves


def flask_up(stack: Stack, backend: str, server: Endpoint | Triton) -> Endpoint:
    """GourmetGram pointed at ``server`` through ``backend`` (fastapi | triton | triton_onnx).

    The stack's own ``flask`` service serves the first two. For ``triton_onnx``
    a stack that cannot reconfigure its flask service (the local one today) gets
    a local GourmetGram process configured by environment variables.
    """
    if backend in FLASK_STACK and not hasattr(stack, "flask_backend"):
        stack.up(FLASK_STACK[backend], services=["flask"])
        return Endpoint(f"flask ({backend})", stack.url("flask").rstrip("/"))
    if hasattr(stack, "flask_backend"):
        stack.flask_backend = backend  # type: ignore[attr-defined]
        stack.up("fastapi" if backend == "fastapi" else "triton", services=["flask"])
        return Endpoint(f"flask ({backend})", stack.url("flask").rstrip("/"))
    if stack.target != "local":
        raise RuntimeError(f"the {stack.target} stack cannot switch its flask service to {backend}")
    from servelab.targets.services import start_flask

    global _LOCAL_FLASK
    if _LOCAL_FLASK is not None:
        _LOCAL_FLASK.stop()
    url_key = "FASTAPI_SERVER_URL" if backend == "fastapi" else "TRITON_SERVER_URL"
    url = server.url if backend == "fastapi" else hostport(server.url)
    _LOCAL_FLASK = start_flask({"PREDICT_BACKEND": backend, url_key: url})
    return Endpoint(f"flask ({backend})", _LOCAL_FLASK.url)


_LOCAL_FLASK: Any = None


def flask_uploads(flask: Endpoint, p: LabParams, step: str) -> pd.DataFrame:
    """Upload sample photos through the app's API, as a browser would; one summary row stored."""
    import httpx

    from servelab.core.samples import sample_paths

    paths = sample_paths()
    replies, times, errors = [], [], 0
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
    ms = pd.Series(times)
    row = {"step": step, "backend": flask.kind, "requests": len(times), "errors": errors,
           "median_ms": float(ms.median()), "p95_ms": float(ms.quantile(0.95))}
    record(FLASK, [row])
    return pd.DataFrame(replies)

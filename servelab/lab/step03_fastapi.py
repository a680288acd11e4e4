"""Notebook 03: the FastAPI services (PyTorch, then ONNX Runtime) and GourmetGram in front of them.

Measurements (sequential, then concurrent clients; uploads through the web app), the report's
view of them, and the step's expected effects (``rules``).
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.lab.common import (
    Endpoint,
    measure_with_utilisation,
    record,
    show_columns,
    util_columns,
)
from servelab.lab.gourmetgram import FLASK_COLUMNS
from servelab.lab.params import LabParams
from servelab.report.effects import Check, check, device_gap, row, spread
from servelab.report.figures import Section, as_image, figure, plot_html, table_html
from servelab.report.readings import first
from servelab.results.schema import FASTAPI, FASTAPI_COLUMNS, RunData, device_of, load, num
from servelab.results.store import results_dir
from servelab.targets.base import Stack

# what a verdict's "(spread …)" spans here (servelab.report.terms)
SPREAD_OVER = "the medians of each run's first, middle and last third"


def fastapi_up(stack: Stack, kind: str) -> Endpoint:
    """Bring up the FastAPI service (``kind`` "pt" or "onnx") and return its endpoint.

    The app is an argument of ``Stack.up`` (``FASTAPI_APP`` in the compose files), so switching is a
    setting, not a code edit.
    """
    if kind not in ("pt", "onnx"):
        raise ValueError(f"unknown FastAPI service {kind!r}: use 'pt' or 'onnx'")
    import httpx

    stack.up("fastapi", services=["fastapi_server"], fastapi_app=f"fastapi_{kind}")
    api = Endpoint(f"fastapi_{kind}", stack.url("fastapi_server").rstrip("/"))
    reply = httpx.get(f"{api.url}/health", timeout=30.0, trust_env=False)  # its own host: never a proxy
    facts = reply.json() if reply.status_code == 200 else {"device": f"? (/health: {reply.status_code})"}
    engine = {"pt": "PyTorch", "onnx": "ONNX Runtime"}[kind]
    providers = f" ({', '.join(facts['providers'])})" if facts.get("providers") else ""
    print(f"$ curl -s {api.url}/health  # the engine: {engine} on {facts.get('device')}{providers}")
    return api


def fastapi_down(stack: Stack) -> None:
    """Stop the FastAPI stack (the service, and the web app if it was started)."""
    stack.down("fastapi")


def try_predict(api: Endpoint, sample: int = 0) -> pd.DataFrame:
    """POST one sample photo to ``/predict``: the reply, its status and time."""
    import httpx

    from servelab.bench import request_bodies
    from servelab.core.samples import sample_paths

    path = sample_paths()[sample]
    body = request_bodies([path])[0]
    started = time.perf_counter()
    response = httpx.post(f"{api.url}/predict", content=body, timeout=60.0,
                          headers={"content-type": "application/json"})
    elapsed = (time.perf_counter() - started) * 1000
    return pd.DataFrame([{"image": path.name, "status": response.status_code, "ms": round(elapsed, 1),
                          **response.json()}])


def docs_page(api: Endpoint) -> pd.DataFrame:
    """The service's self-documentation: /docs (Swagger UI) and the routes in /openapi.json."""
    import httpx

    docs = httpx.get(f"{api.url}/docs", timeout=30.0)
    spec = httpx.get(f"{api.url}/openapi.json", timeout=30.0).json()
    routes = [{"route": f"{method.upper()} {path}", "summary": op.get("summary", "")}
              for path, ops in spec.get("paths", {}).items() for method, op in ops.items()]
    print(f"Swagger UI: {api.url}/docs -> HTTP {docs.status_code}")
    return pd.DataFrame(routes)


def _fastapi_row(api: Endpoint, result: dict[str, Any], util: dict[str, Any]) -> dict[str, Any]:
    """One measurement's row, with the service's own settings from /health: its ``max_batch``
    differs per engine on purpose (docs/decisions/2026-11-22-fastapi-max-batch-per-device.md)."""
    import httpx

    backend = api.kind.removeprefix("fastapi_")
    health = httpx.get(f"{api.url}/health", timeout=30.0).json()
    return {"step": api.kind, "backend": backend, "device": health.get("device"),
            "max_batch": health.get("max_batch"), **{k: v for k, v in result.items() if k != "url"},
            **util_columns(util)}


def fastapi_sequential(api: Endpoint, p: LabParams) -> pd.DataFrame:
    """``seq_requests`` requests one after another; stored under ``fastapi``."""
    from servelab.bench import run_sequential

    result, util = measure_with_utilisation(run_sequential, api.url, p.seq_requests)
    return show_columns(record(FASTAPI, [_fastapi_row(api, result, util)]), FASTAPI_COLUMNS)


def fastapi_concurrent(api: Endpoint, p: LabParams) -> pd.DataFrame:
    """``conc_requests`` requests from ``concurrency`` clients; stored under ``fastapi``."""
    from servelab.bench import run_concurrent

    result, util = measure_with_utilisation(run_concurrent, api.url, p.conc_requests, p.concurrency)
    return show_columns(record(FASTAPI, [_fastapi_row(api, result, util)]), FASTAPI_COLUMNS)


def fastapi_summary() -> pd.DataFrame:
    """Every FastAPI measurement of this run, side by side."""
    return show_columns(load(results_dir(), FASTAPI), FASTAPI_COLUMNS)


def plot_fastapi() -> Any:
    df = load(results_dir(), FASTAPI)
    print(read_fastapi(df))
    return as_image(fig_fastapi(df))


def fig_fastapi(df: pd.DataFrame) -> Figure:
    """Latency percentiles (sequential and concurrent) and throughput, PyTorch vs ONNX."""
    fig, (left, right) = figure(cols=2)
    df = df.copy()
    # "str" is str to pandas; pandas-stubs type astype(str) as a bool Series
    df["run"] = df["backend"].astype("str") + "\n" + df["mode"].astype("str")
    positions = range(len(df))
    width = 0.27
    for i, (column, name) in enumerate([("median_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99")]):
        left.bar([p + (i - 1) * width for p in positions], num(df, column), width, label=name)
    left.set_xticks(list(positions), df["run"], fontsize=8)
    left.set_ylabel("latency (ms)")
    left.set_title("latency", fontsize=10)
    left.legend(fontsize=8)
    right.bar(list(positions), num(df, "throughput_rps"), color="tab:green")
    right.set_xticks(list(positions), df["run"], fontsize=8)
    right.set_ylabel("requests/s")
    right.set_title("throughput", fontsize=10)
    fig.suptitle("FastAPI: PyTorch vs ONNX Runtime", fontsize=11)
    fig.tight_layout()
    return fig


def read_fastapi(df: pd.DataFrame) -> str:
    parts = []
    for backend in ("pt", "onnx"):
        seq = first(df, "median_ms", backend=backend, mode="sequential")
        conc = first(df, "median_ms", backend=backend, mode="concurrent")
        if seq and conc:
            where = device_of(df, backend=backend)
            name = f"{backend} on the {where}" if where else backend
            parts.append(f"{name}: median {seq:.0f} ms alone → {conc:.0f} ms with "
                         f"{int(first(df, 'concurrency', backend=backend, mode='concurrent') or 0)} clients "
                         f"({conc / seq:.1f}×)")
    pt, onnx = (first(df, "median_ms", backend=b, mode="sequential") for b in ("pt", "onnx"))
    if pt and onnx:
        on = {b: device_of(df, backend=b, mode="sequential") for b in ("pt", "onnx")}
        if on["pt"] != on["onnx"]:  # not an engine comparison: say what each side ran on
            parts.append(f"one client: PyTorch on the {on['pt'] or '?'} {pt:.0f} ms, ONNX Runtime on the "
                         f"{on['onnx'] or '?'} {onnx:.0f} ms (different devices: not an engine comparison)")
        else:
            where = f" (both on the {on['pt']})" if on["pt"] else ""
            parts.append(f"ONNX Runtime {pt / onnx:.1f}× faster than PyTorch for one client{where}")
    return "; ".join(parts) or "no FastAPI measurements in this run"


# ----------------------------------------------------------------------------- report and rules

def sections(data: RunData) -> list[Section]:
    """The report's view of this step: latency and throughput per service, then GourmetGram."""
    out = []
    if not data.fastapi.empty:
        out.append(Section("FastAPI: PyTorch vs ONNX Runtime", [
            plot_html(fig_fastapi(data.fastapi), read_fastapi(data.fastapi)),
            table_html(data.fastapi, FASTAPI_COLUMNS)]))
    if not data.flask.empty:
        out.append(Section("GourmetGram (Flask) through each backend",
                           [table_html(data.flask, FLASK_COLUMNS)]))
    return out


def rules(data: RunData) -> list[Check]:
    """Queuing shows with many clients; ONNX Runtime answers one client faster than PyTorch (each gap
    weighed against the spread of the medians over the run's thirds)."""
    fastapi = data.fastapi

    def level(column: str, backend: str, mode: str) -> float | None:
        return row(fastapi, column, backend=backend, mode=mode)

    checks = [check(
        f"FastAPI {backend}: with many clients the median latency is ≥ 4× one client's (queuing)",
        (level("median_ms", backend, "sequential"), level("median_ms", backend, "concurrent")),
        lambda a, b: b >= 4 * a, lambda a, b: f"{a:.0f} ms → {b:.0f} ms ({b / a:.1f}×)",
        noise=(spread(fastapi, "median_ms", backend=backend, mode="sequential"),
               spread(fastapi, "median_ms", backend=backend, mode="concurrent")), unit="ms")
        for backend in ("pt", "onnx")]
    on = device_of(fastapi, backend="pt", mode="sequential")
    both = f" (both on the {on})" if on else ""
    checks.append(check(  # the comparison holds the device fixed, or says why it cannot
        "FastAPI: ONNX Runtime answers one client faster than PyTorch",
        (level("median_ms", "pt", "sequential"), level("median_ms", "onnx", "sequential")),
        lambda pt, ox: ox < pt, lambda pt, ox: f"PyTorch {pt:.0f} ms, ONNX {ox:.0f} ms{both}",
        noise=(spread(fastapi, "median_ms", backend="pt", mode="sequential"),
               spread(fastapi, "median_ms", backend="onnx", mode="sequential")), unit="ms",
        blocked=device_gap(fastapi, "backend", {"pt": "PyTorch", "onnx": "ONNX Runtime"}, mode="sequential")))
    return checks

"""Notebook 03: the FastAPI services (PyTorch, then ONNX Runtime) and GourmetGram in front of them.

Measurements (sequential, then concurrent clients; uploads through the web app; one worker process
against N), the report's view of them, and the step's expected effects (``rules``). Where each
request's time went, and what that makes of the bound: ``step03_stages``.
"""

from __future__ import annotations

import html
import time
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from servelab.core.browser import in_browser
from servelab.lab import step03_stages as stages
from servelab.lab.gourmetgram import FLASK_COLUMNS
from servelab.lab.params import LabParams
from servelab.lab.stack import Endpoint
from servelab.lab.tables import measure_with_utilisation, record, show_columns, util_columns
from servelab.report.effects import Check, Quantity, Rerun, check, device_gap, row, spread
from servelab.report.figures import Section, as_image, figure, plot_html, table_html
from servelab.report.readings import first
from servelab.results.schema import FASTAPI, FASTAPI_COLUMNS, RunData, device_of, load, num
from servelab.results.store import results_dir
from servelab.targets.base import Stack

# what a verdict's "(spread …)" spans here (servelab.report.terms)
# the verdict the report's first screen gives as this step's one line (servelab.report.html.headline)
HEADLINE = "ONNX Runtime answers one client faster"
SPREAD_OVER = "the medians of each run's first, middle and last third, without the one farthest off"
SPREAD_SPANS = "each median times its run's spread over its thirds, the larger"


def fastapi_up(stack: Stack, kind: str, workers: int = 1) -> Endpoint:
    """Bring up the FastAPI service (``kind`` "pt" or "onnx") with ``workers`` worker processes and return
    its endpoint.

    The app and the processes are arguments of ``Stack.up`` (``FASTAPI_APP`` and ``WORKERS`` in the compose
    files), so switching is a setting, not a code edit.
    """
    if kind not in ("pt", "onnx"):
        raise ValueError(f"unknown FastAPI service {kind!r}: use 'pt' or 'onnx'")
    import httpx

    stack.up("fastapi", services=["fastapi_server"], fastapi_app=f"fastapi_{kind}", fastapi_workers=workers)
    api = Endpoint(f"fastapi_{kind}", stack.url("fastapi_server").rstrip("/"))
    reply = httpx.get(f"{api.url}/health", timeout=30.0, trust_env=False)  # its own host: never a proxy
    facts = reply.json() if reply.status_code == 200 else {"device": f"? (/health: {reply.status_code})"}
    engine = {"pt": "PyTorch", "onnx": "ONNX Runtime"}[kind]
    providers = f" ({', '.join(facts['providers'])})" if facts.get("providers") else ""
    processes = int(facts.get("processes") or 1)
    copies = f"; {processes} worker processes, each with its copy of the model" if processes > 1 else ""
    print(f"$ curl -s {api.url}/health  # the engine: {engine} on {facts.get('device')}{providers}{copies}")
    return api


def fastapi_down(stack: Stack) -> None:
    """Stop the FastAPI stack (the service, and the web app if it was started)."""
    stack.down("fastapi")


def try_predict(api: Endpoint, sample: int = 0) -> pd.DataFrame:
    """POST one sample photo to ``/predict``: the reply, its status and time; prints its Server-Timing."""
    import httpx

    from servelab.bench import request_bodies
    from servelab.core.samples import sample_paths

    path = sample_paths()[sample]
    body = request_bodies([path])[0]
    started = time.perf_counter()
    response = httpx.post(f"{api.url}/predict", content=body, timeout=60.0,
                          headers={"content-type": "application/json"})
    elapsed = (time.perf_counter() - started) * 1000
    print(f"Server-Timing: {response.headers.get('server-timing')}  # this request's stages, in ms")
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
    if in_browser(f"{api.url}/docs") != f"{api.url}/docs":  # on the node: loopback only, through Jupyter
        print(f"In your browser: this Jupyter server's address with {in_browser(f'{api.url}/docs')} as its "
              "path (the service listens on the node's loopback only)")
    return pd.DataFrame(routes)


def _fastapi_row(api: Endpoint, result: dict[str, Any], util: dict[str, Any]) -> dict[str, Any]:
    """One measurement's row, with the service's own settings from /health: its ``max_batch``
    differs per engine on purpose (docs/decisions/2026-11-22-fastapi-max-batch-per-device.md)."""
    import httpx

    backend = api.kind.removeprefix("fastapi_")
    health = httpx.get(f"{api.url}/health", timeout=30.0).json()
    return {"step": api.kind, "backend": backend, "device": health.get("device"),
            "max_batch": health.get("max_batch"), "workers": health.get("processes", 1),
            **{k: v for k, v in result.items() if k != "url"}, **util_columns(util)}


def fastapi_sequential(api: Endpoint, p: LabParams) -> pd.DataFrame:
    """``seq_requests`` requests one after another; stored under ``fastapi``."""
    from servelab.bench import run_sequential

    result, util = measure_with_utilisation(run_sequential, api.url, p.seq_requests)
    return show_columns(record(FASTAPI, [_fastapi_row(api, result, util)]), FASTAPI_COLUMNS)


def fastapi_concurrent(api: Endpoint, p: LabParams, ceiling_rps: float | None = None) -> pd.DataFrame:
    """``conc_requests`` requests from ``concurrency`` clients; stored under ``fastapi`` (with the model
    alone's ``ceiling_rps`` beside it, when given)."""
    from servelab.bench import run_concurrent

    result, util = measure_with_utilisation(run_concurrent, api.url, p.conc_requests, p.concurrency)
    row = {**_fastapi_row(api, result, util), **({"ceiling_rps": ceiling_rps} if ceiling_rps else {})}
    return show_columns(record(FASTAPI, [row]), FASTAPI_COLUMNS)


def fastapi_summary() -> pd.DataFrame:
    """Every FastAPI measurement of this run, side by side."""
    return show_columns(load(results_dir(), FASTAPI), FASTAPI_COLUMNS)


def plot_fastapi() -> Any:
    df = stages.one_process(load(results_dir(), FASTAPI))
    print(read_fastapi(df))
    return as_image(fig_fastapi(df))


# ----------------------------------------------------------------------------- inside a request

def stage_breakdown() -> pd.DataFrame:
    """Each FastAPI measurement's mean ms per stage (from the answers' Server-Timing headers): one column
    per measurement, the stages as rows (``step03_stages.stage_table``)."""
    return stages.stage_table(load(results_dir(), FASTAPI))


def plot_stages(say: bool = True) -> Any:
    """The stages as one stacked bar per measurement; the line above it names the bound per engine
    (``say=False``: the plot alone, drawn again with later measurements whose lines were said)."""
    df = load(results_dir(), FASTAPI)
    if say:
        print(stages.read_stages(df))
    return as_image(stages.fig_stages(df))


def _on_gpu(kind: str) -> bool:
    """Did this run's ``kind`` ("pt"/"onnx") service compute on a GPU?"""
    df = load(results_dir(), FASTAPI)
    if df.empty or "device" not in df or "backend" not in df:
        return False
    return "cuda" in set(df[df["backend"] == kind]["device"].astype(str))


def model_ceiling(kind: str, p: LabParams) -> float | None:
    """The requests/s the model alone allows (``servelab.bench.ceiling``), timed in this kernel, where the
    ``kind`` service's rows ran on a GPU; None, with one line, on a CPU (no bound there: single-threaded
    passes side by side beat the model alone on every core) or where this kernel cannot load the engine
    (the Jupyter image has no torch)."""
    import importlib.util

    from servelab.bench import ceiling, run_raw
    from servelab.core.cpu import cpu_cores

    module = {"pt": "torch", "onnx": "onnxruntime"}[kind]
    if not _on_gpu(kind):
        print("no ceiling on a CPU: the model alone on every core (batch 1 or 16) is no bound there, since "
              "single-threaded passes side by side beat it (docs/decisions/2026-11-22-fastapi-cpu-threads-"
              "and-workers.md); on a GPU this cell times the model alone, and the next ones the share of it "
              "each configuration reaches")
        return None
    if importlib.util.find_spec(module) is None:
        print(f"the model alone is not timed here: this kernel has no {module} (run `python -m "
              f"servelab.bench ceiling --service {kind}` where the services run); the shares of the ceiling "
              "stay blank")
        return None
    seconds = 3.0 if p.preset == "full" else 0.6
    timed_rows = run_raw(batch_sizes=(1, 16), backends=(kind,), min_seconds=seconds)
    for timed in timed_rows:
        where = f" on the {timed['device']}" if timed.get("device") else ""
        print(f"{timed['what']} batch {timed['batch']}{where}: {timed['ms_per_image']:.2f} ms per image")
    top, cores = ceiling(timed_rows, kind, cpu_cores()), cpu_cores()
    print(f"ceiling: {top:.0f} requests/s (the lower of 1 / model and {cores} cores / preprocess: on a GPU "
          "the two run on different hardware; the model at its fastest batch size)")
    return top


def workers_for_n(p: LabParams) -> int:
    """N of the "one process vs N" step: ``fastapi_workers``, else one per core on a CPU, half the cores on a
    GPU (2 to 8; ``step03_stages.processes_for``), from where this run's PyTorch rows computed."""
    from servelab.core.cpu import cpu_cores

    if p.fastapi_workers:
        return int(p.fastapi_workers)
    device = "cuda" if _on_gpu("pt") else "cpu"
    n = stages.processes_for(device, cpu_cores())
    print(f"N = {n}: {'half the cores' if device == 'cuda' else 'one process per core'} of this "
          f"{cpu_cores()}-core machine ({'the engine is on the GPU' if device == 'cuda' else 'CPU only'})")
    return n


def workers_in(settings: str) -> int:
    """``WORKERS`` from the service's settings as the student writes them (``KEY=value`` lines, as in a
    ``.env`` file or before ``docker compose up``; python-dotenv reads them); 1 when the line is absent."""
    import io

    from dotenv import dotenv_values

    from servelab.lab.exercise import StudentError

    value = dotenv_values(stream=io.StringIO(settings)).get("WORKERS")
    if value is None:
        print("no WORKERS line: the service starts one worker process (write WORKERS=N to start N)")
        return 1
    if not value.strip().isdigit() or int(value) < 1:
        raise StudentError(f"WORKERS={value} is not a number of worker processes: write WORKERS=N, N ≥ 1")
    return int(value)


def one_vs_n() -> pd.DataFrame:
    """One worker process against N, at many clients: throughput, share of the ceiling, batches, stages."""
    df = load(results_dir(), FASTAPI)
    print(stages.read_processes(df))
    return stages.stage_table(stages.compare_processes(df))


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
        one = stages.one_process(data.fastapi)
        out.append(Section("FastAPI: PyTorch vs ONNX Runtime", [
            plot_html(fig_fastapi(one), read_fastapi(one)), table_html(data.fastapi, FASTAPI_COLUMNS)]))
    if not stages.staged(data.fastapi).empty:
        out.append(Section("FastAPI: where a request spends its time", [
            plot_html(stages.fig_stages(data.fastapi), stages.read_stages(data.fastapi)),
            stages.stage_table_html(data.fastapi),
            *([f"<p>{html.escape(stages.read_processes(data.fastapi))}</p>"]
              if not stages.several_processes(data.fastapi).empty else [])]))
    if not data.flask.empty:
        out.append(Section("GourmetGram (Flask) through each backend",
                           [table_html(data.flask, FLASK_COLUMNS)]))
    return out


def rules(data: RunData) -> list[Check]:
    """Queuing shows with many clients; ONNX Runtime answers one client faster than PyTorch (each gap
    weighed against the spread of the medians over the run's thirds); what bounds throughput with many
    clients, and what N worker processes change (``step03_stages``)."""
    fastapi = stages.one_process(data.fastapi)

    def level(column: str, backend: str, mode: str) -> float | None:
        return row(fastapi, column, backend=backend, mode=mode)

    def rerun(mode: str, backend: str = "pt") -> Rerun:  # more requests narrow a band on medians
        return Rerun("seq_requests" if mode == "sequential" else "conc_requests",
                     level("requests", backend, mode))

    def clients(backend: str) -> str:
        return f"{int(level('concurrency', backend, 'concurrent') or 0)} clients"

    checks = [check(
        f"FastAPI {backend}: with many clients the median latency is ≥ 4× one client's (queuing)",
        (level("median_ms", backend, "sequential"), level("median_ms", backend, "concurrent")),
        lambda a, b: b >= 4 * a, lambda a, b: f"{a:.0f} ms → {b:.0f} ms ({b / a:.1f}×)",
        noise=(spread(fastapi, "median_ms", backend=backend, mode="sequential"),
               spread(fastapi, "median_ms", backend=backend, mode="concurrent")), unit="ms",
        figures=lambda a, b: (Quantity("1 client", a, "ms"), Quantity(clients(backend), b, "ms"),  # noqa: B023
                              Quantity("", b / a, "×")),
        rerun=rerun("concurrent", backend), spans=SPREAD_SPANS)
        for backend in ("pt", "onnx")]
    on = device_of(fastapi, backend="pt", mode="sequential")
    both = f" (both on the {on})" if on else ""
    checks.append(check(  # the comparison holds the device fixed, or says why it cannot
        "FastAPI: ONNX Runtime answers one client faster than PyTorch",
        (level("median_ms", "pt", "sequential"), level("median_ms", "onnx", "sequential")),
        lambda pt, ox: ox < pt, lambda pt, ox: f"PyTorch {pt:.0f} ms, ONNX {ox:.0f} ms{both} (medians)",
        noise=(spread(fastapi, "median_ms", backend="pt", mode="sequential"),
               spread(fastapi, "median_ms", backend="onnx", mode="sequential")), unit="ms",
        names=("PyTorch", "ONNX Runtime"), rerun=rerun("sequential"), spans=SPREAD_SPANS,
        blocked=device_gap(fastapi, "backend", {"pt": "PyTorch", "onnx": "ONNX Runtime"}, mode="sequential")))
    return checks + stages.stage_checks(data.fastapi) + stages.process_checks(data.fastapi)

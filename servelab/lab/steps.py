"""The lab's notebook steps: one call per notebook cell.

Notebooks stay short — prose, then one to five lines that call this module —
and this module only *composes* the parts built elsewhere: the stack interface
(``servelab.targets.base``) for everything that happens on the target's host, the
FastAPI benchmark (``servelab.bench``), the Triton config editing, statistics
and perf_analyzer wrapper (``servelab.triton``), and utilisation sampling
(``servelab.core.monitor``). Each measurement is appended to the run's results as
data (``servelab.results.store``) and returned as a DataFrame; the plots drawn here
are the same ones the report draws from that data (``servelab.report.html``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from tqdm import tqdm  # text bars: they stay readable in executed notebooks

from servelab.core.paths import ARTIFACTS_DIR, REPO_ROOT, STAGING_DIR
from servelab.lab.params import LabParams
from servelab.report import html as report
from servelab.results.store import append_rows, host_facts, read_rows
from servelab.targets.base import Stack, get_stack

# Names of the results files each experiment writes (the report reads the same names).
FASTAPI = report.FASTAPI
FLASK = report.FLASK
TRITON = report.TRITON

CPU_VS_GPU = [
    ("Queuing: latency grows with concurrency, compute stays flat (steps 3-4)", "yes, fully"),
    ("ONNX Runtime faster than eager PyTorch per image (steps 3, 6)", "yes, about 2.5-3x"),
    ("More instances than cores never helps; threads per instance matter (step 5)", "yes, sharply"),
    ("Instances spread over two GPUs raise GPU utilisation (steps 5, 6)",
     "no: no GPU; instances share cores"),
    ("Client batch 16 costs little more than one image (step 4)", "no: a CPU batch costs ~its size"),
    ("Dynamic batching keeps latency flat as the rate rises (step 7)",
     "partly: batches form (see the stats) but add no throughput"),
    ("GPU utilisation (nvtop) during a run", "no: CPU utilisation per core instead"),
    ("Triton's ONNX Runtime backend (step 6)",
     "approximated: the local Triton serves model.onnx through a Python-backend runner"),
]


# ----------------------------------------------------------------------------- 00: the machine

def machine_facts() -> pd.DataFrame:
    """The facts every measurement is stored with: host, cores, GPU, Python."""
    facts = dict(host_facts())
    try:
        import psutil

        facts["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
        facts["load_average_1m"] = round(os.getloadavg()[0], 2)
    except (ImportError, OSError):
        pass
    return pd.DataFrame({"fact": list(facts), "value": [str(v) for v in facts.values()]})


def cpu_vs_gpu() -> pd.DataFrame:
    """Which of the lab's lessons a CPU-only run reproduces."""
    return pd.DataFrame(CPU_VS_GPU, columns=["effect on the GPU node", "on a CPU-only run"])


def check_artifacts() -> pd.DataFrame:
    """The model files every service loads; a missing one names the command that builds it."""
    from servelab.core.model import require_file

    files = [ARTIFACTS_DIR / "food11.pth", ARTIFACTS_DIR / "food11.onnx",
             STAGING_DIR / "food_classifier" / "1" / "food11.pth",
             STAGING_DIR / "food_classifier_onnx" / "1" / "model.onnx"]
    for path in files:
        require_file(path)
    return pd.DataFrame({"file": [str(p.relative_to(REPO_ROOT)) if p.is_relative_to(REPO_ROOT) else str(p)
                                  for p in files],
                         "MB": [round(p.stat().st_size / 1e6, 1) for p in files]})


def show_file(relpath: str, lines: int = 40, start: str | None = None) -> None:
    """Print the first ``lines`` of a project file (from the line containing ``start`` if given)."""
    text = (REPO_ROOT / relpath).read_text().splitlines()
    first = next((i for i, line in enumerate(text) if start and start in line), 0)
    print(f"# {relpath} (lines {first + 1}-{min(len(text), first + lines)} of {len(text)})")
    print("\n".join(text[first:first + lines]))


# ----------------------------------------------------------------------------- shared helpers

def as_image(fig: Figure) -> Any:
    """A figure as an image a notebook shows (and stores) as PNG, whatever matplotlib backend is active."""
    import io

    from IPython.display import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return Image(data=buffer.getvalue(), format="png")


def record(experiment: str, rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Append ``rows`` to the run's results and return them as a DataFrame."""
    append_rows(experiment, rows)
    return pd.DataFrame(list(rows))


def concat(*frames: pd.DataFrame) -> pd.DataFrame:
    """Several measurement tables as one (for a combined plot)."""
    return pd.concat(frames, ignore_index=True)


def results_overview() -> pd.DataFrame:
    """How many rows each experiment stored in this run's results."""
    directory = Path(os.environ.get("SERVELAB_RESULTS") or REPO_ROOT / "results")
    rows = [{"experiment": path.stem, "rows": len(read_rows(path.stem, directory)), "file": path.name}
            for path in sorted(directory.glob("*.jsonl"))]
    return pd.DataFrame(rows, columns=["experiment", "rows", "file"])


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


# ----------------------------------------------------------------------------- stacks

def open_stack(p: LabParams) -> Stack:
    """The target's stack: local processes, or compose on this host (the node's Jupyter on Chameleon).

    ``target="chameleon"`` raises a ParameterError that says where notebooks 03-07 run instead.
    """
    return get_stack(p.target, **_local_options(p.target))


def stop_stacks(p: LabParams) -> None:
    """Stop every stack this lab started (08). On chameleon they run on the node, and deleting the
    server stops them: nothing to do from here."""
    if p.target == "chameleon":
        print("The stacks run on the node: deleting its server (next cell) stops them.")
        return
    open_stack(p).down()


def node_jupyter(node: Any) -> None:
    """Where to go after 02: the node's Jupyter server, where notebooks 03-07 run (target docker)."""
    if node is None:
        print("plan mode: on Chameleon this prints the node's Jupyter URL (with its token); "
              "notebooks 03-07 run there with target='docker'.")
        return
    print(f"Open the node's Jupyter server and run notebooks 03-07 there with target='docker':\n"
          f"  {node.jupyter_url}\nSSH for nvtop: ssh {node.user}@{node.address}")


def _local_options(target: str) -> dict[str, Any]:
    """A headless run (``SERVELAB_RESULTS`` set) keeps the local host's files inside its results folder.

    The live model repository and the servers' logs then belong to that run:
    two runs on one machine (CI jobs, a test next to a student) never rewrite
    each other's ``models/``, and the logs sit beside the measurements.
    """
    results = os.environ.get("SERVELAB_RESULTS")
    if target != "local" or not results:
        return {}
    return {"root": Path(results) / "host", "log_dir": Path(results) / "logs"}


def _hostport(url: str) -> str:
    """tritonclient and perf_analyzer take ``host:port`` without a scheme."""
    return url.split("://", 1)[-1].rstrip("/")


def _http(url: str) -> str:
    return url if "://" in url else f"http://{url}"


# ----------------------------------------------------------------------------- 03: FastAPI

@dataclass
class Endpoint:
    """A running HTTP service the notebook talks to: its kind and base URL."""

    kind: str
    url: str

    def _repr_html_(self) -> str:
        return f"<b>{self.kind}</b> at <code>{self.url}</code>"


def fastapi_up(stack: Stack, kind: str) -> Endpoint:
    """Bring up the FastAPI service (``kind`` "pt" or "onnx") and return its endpoint.

    Every stack picks the app from its ``fastapi_app`` setting (``FASTAPI_APP``
    in the compose files), so switching is a setting, not a code edit.
    """
    if kind not in ("pt", "onnx"):
        raise ValueError(f"unknown FastAPI service {kind!r}: use 'pt' or 'onnx'")
    stack.fastapi_app = f"fastapi_{kind}"  # type: ignore[attr-defined]
    stack.up("fastapi", services=["fastapi_server"])
    return Endpoint(f"fastapi_{kind}", stack.url("fastapi_server").rstrip("/"))


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
    backend = api.kind.removeprefix("fastapi_")
    return {"step": api.kind, "backend": backend, **{k: v for k, v in result.items() if k != "url"},
            **_util_columns(util)}


def fastapi_sequential(api: Endpoint, p: LabParams) -> pd.DataFrame:
    """``seq_requests`` requests one after another; stored under ``fastapi``."""
    from servelab.bench import run_sequential

    result, util = _measure(run_sequential, api.url, p.seq_requests)
    return _show(record(FASTAPI, [_fastapi_row(api, result, util)]), report.FASTAPI_COLUMNS)


def fastapi_concurrent(api: Endpoint, p: LabParams) -> pd.DataFrame:
    """``conc_requests`` requests from ``concurrency`` clients; stored under ``fastapi``."""
    from servelab.bench import run_concurrent

    result, util = _measure(run_concurrent, api.url, p.conc_requests, p.concurrency)
    return _show(record(FASTAPI, [_fastapi_row(api, result, util)]), report.FASTAPI_COLUMNS)


def fastapi_summary() -> pd.DataFrame:
    """Every FastAPI measurement of this run, side by side."""
    return _show(report.load(_results_dir_or_default(), FASTAPI), report.FASTAPI_COLUMNS)


def plot_fastapi() -> Any:
    df = report.load(_results_dir_or_default(), FASTAPI)
    print(report.read_fastapi(df))
    return as_image(report.fig_fastapi(df))


# ----------------------------------------------------------------------------- the web app

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
    url = server.url if backend == "fastapi" else _hostport(server.url)
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


# ----------------------------------------------------------------------------- measurement helpers

def _measure(call, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Run ``call`` while sampling CPU (and GPU) utilisation."""
    from servelab.core.monitor import Utilisation

    with Utilisation() as util:
        result = call(*args, **kwargs)
    return result, util.summary()


def _util_columns(util: dict[str, Any]) -> dict[str, Any]:
    """The report's two utilisation columns, plus the monitor's detail."""
    gpus = [util[k] for k in util if k.startswith("gpu") and k.endswith("_util_mean_pct")]
    return {"cpu_util_pct": util.get("cpu_mean_pct"),
            "gpu_util_pct": round(sum(gpus) / len(gpus), 1) if gpus else None,
            "utilisation": util}


def _show(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    present = [c for c in columns if c in df]
    return df[present].round(2) if present else df


def _results_dir_or_default() -> Path:
    return Path(os.environ.get("SERVELAB_RESULTS") or REPO_ROOT / "results")


# ----------------------------------------------------------------------------- 04-07: Triton

REPOSITORY = "models"  # the live model repository, relative to the project root on the target's host
INPUT_NAMES = {"food_classifier": "INPUT_IMAGE", "food_classifier_onnx": "input"}


@dataclass
class Triton:
    """The Triton server of a stack: where it answers and how to talk to it."""

    stack: Stack
    url: str  # host:port, as tritonclient and perf_analyzer take it

    def client(self) -> Any:
        import tritonclient.http as httpclient

        return httpclient.InferenceServerClient(self.url, network_timeout=120.0, connection_timeout=30.0)

    def _repr_html_(self) -> str:
        models = ", ".join(f"{m['name']} ({m.get('state', '?')})"
                           for m in self.client().get_model_repository_index())
        return f"Triton at <code>{self.url}</code> (target {self.stack.target}); models: {models}"


def triton_up(stack: Stack, models: Sequence[str]) -> Triton:
    """Bring up the Triton stack, deploy ``models`` from the staging area and load them."""
    stack.up("triton", services=["triton_server"])
    triton = Triton(stack, _hostport(stack.url("triton_server")))
    for name in models:
        deploy(triton, name)
    return triton


def triton_down(stack: Stack) -> None:
    stack.down("triton")


def deploy(triton: Triton, name: str) -> None:
    """Copy the staged model into the live repository, adapted to the target, and load it."""
    import tempfile

    from servelab.triton.repository import deploy_model

    with tempfile.TemporaryDirectory() as tmp:
        folder = deploy_model(name, Path(tmp), gpu=triton.stack.has_gpu, quiet=True)
        wanted = (folder / "config.pbtxt").read_text()
        if _deployed_config(triton, name) == wanted and _ready(triton.client(), name):
            return  # the stack deployed and loaded exactly this already
        print(f"deploying models_staging/{name} -> {REPOSITORY}/{name} on the {triton.stack.target} target")
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            triton.stack.write_file(f"{REPOSITORY}/{name}/{path.relative_to(folder)}", path.read_bytes())
    triton.stack.reload_model(name)
    _wait_ready(triton, name)


def _deployed_config(triton: Triton, name: str) -> str | None:
    try:
        return triton.stack.read_file(f"{REPOSITORY}/{name}/config.pbtxt").decode()
    except (OSError, RuntimeError):
        return None


def _wait_ready(triton: Triton, name: str, timeout: float = 120.0) -> None:
    from servelab.core.procs import wait_until

    client = triton.client()
    wait_until(lambda: _ready(client, name), f"model '{name}' to be ready on Triton at {triton.url}", timeout)


def _ready(client: Any, name: str) -> bool:
    try:
        return bool(client.is_model_ready(name))
    except Exception:  # connection refused while it restarts
        return False


def _read_config(triton: Triton, name: str) -> Any:
    from servelab.triton.config import parse_config

    return parse_config(triton.stack.read_file(f"{REPOSITORY}/{name}/config.pbtxt").decode())


def show_config(triton: Triton, name: str) -> None:
    """The deployed config.pbtxt, as the server reads it."""
    print(triton.stack.read_file(f"{REPOSITORY}/{name}/config.pbtxt").decode())


def show_model_code(name: str) -> None:
    """The Python backend's ``execute``: one forward pass for the whole batch Triton hands it."""
    show_file(f"models_staging/{name}/1/model.py", lines=45, start="def execute")


def apply_config(triton: Triton, name: str, cfg: Any, quiet: bool = False) -> Any:
    """Write ``cfg`` as the model's config.pbtxt, show the diff, reload, confirm it is live."""
    from servelab.triton.config import config_json, config_text, diff_configs, live_config, mc, validate

    validate(cfg)
    path = f"{REPOSITORY}/{name}/config.pbtxt"
    old = config_text(_read_config(triton, name))
    new = config_text(cfg)
    if not quiet:
        print(diff_configs(old, new, f"{name}/config.pbtxt") or f"{name}/config.pbtxt: unchanged")
    triton.stack.write_file(path, new)
    started = time.perf_counter()
    triton.stack.reload_model(name, config_json(cfg))
    _wait_ready(triton, name)
    live = live_config(triton.client(), name)
    if not quiet:
        print(f"live after {time.perf_counter() - started:.1f} s (confirmed by the server): "
              + ", ".join(f"{g.count} × {mc.ModelInstanceGroup.Kind.Name(g.kind)}"
                          + (f" on GPUs {list(g.gpus)}" if g.gpus else "") for g in live.instance_group)
              + f"; dynamic batching {'on' if live.HasField('dynamic_batching') else 'off'}")
    return live


def set_instances(triton: Triton, name: str, count: int, gpus: Sequence[int] = (),
                  threads: str = "auto", quiet: bool = False) -> None:
    """``count`` instances per listed GPU (KIND_GPU) or on the CPU; ``threads`` for food_classifier."""
    from servelab.triton.config import set_instances as set_count
    from servelab.triton.config import set_parameter

    cfg = _read_config(triton, name)
    kind = "KIND_GPU" if triton.stack.has_gpu else "KIND_CPU"
    cfg = set_count(cfg, count, kind, gpus if triton.stack.has_gpu else ())
    if "CPU_THREADS" in cfg.parameters:
        cfg = set_parameter(cfg, "CPU_THREADS", threads)
    apply_config(triton, name, cfg, quiet)


def set_dynamic_batching(triton: Triton, name: str, p: LabParams | None = None, enabled: bool = True,
                         quiet: bool = False) -> None:
    """Turn dynamic batching on (preferred sizes and queue delay from ``p``) or off."""
    from servelab.triton.config import set_dynamic_batching as set_batching

    sizes = p.preferred_batch_sizes if p is not None else [4, 6, 8]
    delay = p.max_queue_delay_us if p is not None else 100
    cfg = set_batching(_read_config(triton, name), enabled, sizes, delay)
    apply_config(triton, name, cfg, quiet)


def triton_try(triton: Triton, name: str, sample: int = 0) -> pd.DataFrame:
    """One sample photo through Triton's client: label and probability."""
    import base64

    import numpy as np
    import tritonclient.http as httpclient

    from servelab.core.labels import CLASSES
    from servelab.core.preprocess import preprocess_bytes, softmax
    from servelab.core.samples import sample_paths

    path = sample_paths()[sample]
    data = path.read_bytes()
    client = triton.client()
    started = time.perf_counter()
    if name == "food_classifier":
        image = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
        image.set_data_from_numpy(np.array([[base64.b64encode(data)]], dtype=object))
        result = client.infer(name, [image])
        label = result.as_numpy("FOOD_LABEL")[0, 0]
        label = label.decode() if isinstance(label, bytes) else str(label)
        probability = float(result.as_numpy("PROBABILITY")[0, 0])
    else:
        tensor = preprocess_bytes(data)[None].astype(np.float32)
        image = httpclient.InferInput("input", list(tensor.shape), "FP32")
        image.set_data_from_numpy(tensor)
        logits = client.infer(name, [image]).as_numpy("output")[0]
        probs = softmax(logits)
        label, probability = CLASSES[int(np.argmax(probs))], float(np.max(probs))
    ms = (time.perf_counter() - started) * 1000
    return pd.DataFrame([{"model": name, "image": path.name, "prediction": label,
                          "probability": round(probability, 4), "ms": round(ms, 1)}])


def measure(triton: Triton, name: str, p: LabParams, step: str, label: str = "", *,
            concurrency: int | None = None, rate: float | None = None, distribution: str = "constant",
            batch: int = 1, extra: dict[str, Any] | None = None) -> pd.DataFrame:
    """One perf_analyzer run with the server's statistics and utilisation, recorded under ``triton``.

    The measuring itself is ``servelab.triton.experiments.measure``; this adds the
    lab step, the notebook's window sizes and the target's perf_analyzer runner.
    """
    from servelab.triton import experiments
    from servelab.triton.perf import PerfAnalyzerError

    clients = concurrency or 1  # perf_analyzer wants at least one request per client in a window
    # a client batch carries `batch` images per request: fewer requests give the same work
    window = p.window_requests if batch == 1 else max(8, p.window_requests // 4)
    if p.settle == "fixed":  # one window per level: no stability search, fast and predictable
        # ... and perf_analyzer wants at least one second's worth of requests at a given rate
        settle: dict[str, Any] = {"request_count": max(window, 2 * clients, math.ceil(rate or 0) + 1)}
    else:
        settle = {"measurement_mode": "count_windows",
                  "measurement_request_count": max(window, 2 * clients, math.ceil(rate or 0) + 1),
                  "stability_percentage": p.stability_pct, "max_trials": p.max_trials}
    load: dict[str, Any] = ({"concurrency": concurrency} if concurrency is not None
                            else {"request_rate": round(float(rate or 0), 1), "distribution": distribution})
    columns = {"step": step, "threads": "split", **(extra or {})}
    inputs = experiments.input_data_for(triton, name, workdir=_results_dir_or_default() / "perf-inputs")
    where = triton.stack.perf_options(inputs)
    for attempt in (1, 2):
        try:
            frame = experiments.measure(triton, name, label or step, batch=batch, settle=settle,
                                        warmup_requests=max(clients, min(16, window // 4)),
                                        timeout=_perf_timeout(p), extra=columns, **where, **load)
            return report.normalise_triton(frame)
        except PerfAnalyzerError as exc:  # a stuck or failed run on a busy machine: once more
            if attempt == 2:
                raise
            print(f"perf_analyzer failed ({str(exc).splitlines()[0][:200]}); trying once more")
    raise AssertionError("unreachable")


# perf_analyzer is killed after this long (one level, warm-up included): a hung run must not eat the budget
PERF_TIMEOUT_S = {"fixed": 150.0, "stable": 600.0}
QUICK_PERF_TIMEOUT_S = 150.0  # quick windows take seconds: a stuck run is retried inside the cell's limit


def _perf_timeout(p: LabParams) -> float:
    timeout = PERF_TIMEOUT_S[p.settle]
    return min(timeout, QUICK_PERF_TIMEOUT_S) if p.preset == "quick" else timeout


TRITON_SHOW = ["step", "model", "label", "instances", "threads", "dynamic_batching", "concurrency", "batch",
               "distribution", "rate", "throughput", "p50_ms", "p99_ms", "queue_ms", "compute_input_ms",
               "compute_infer_ms", "compute_output_ms", "cpu_util_pct", "gpu_util_pct", "mean_batch_size",
               "batch_counts", "settled"]


def _measure_all(triton: Triton, name: str, p: LabParams, step: str,
                 runs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Several measurements of one step, with a bar; stored under ``triton``."""
    frames = [measure(triton, name, p, step, **run) for run in tqdm(runs, desc=step, unit="run")]
    return _show(concat(*frames), TRITON_SHOW)


def concurrency_sweep(triton: Triton, name: str, p: LabParams, step: str,
                      levels: Sequence[int] | None = None) -> pd.DataFrame:
    """One measurement per concurrency level (default: the notebook's ``concurrency_levels``)."""
    levels = list(levels or p.concurrency_levels)
    return _measure_all(triton, name, p, step,
                        [{"concurrency": c, "label": f"{name} c={c}"} for c in levels])


def client_batch(triton: Triton, name: str, p: LabParams) -> pd.DataFrame:
    """One client sending ``client_batch`` images per request (throughput counts images)."""
    return _measure_all(triton, name, p, "python_client_batch",
                        [{"concurrency": 1, "batch": p.client_batch, "label": f"batch {p.client_batch}"}])


def plot_breakdown(df: pd.DataFrame, x: str = "concurrency", title: str = "") -> Any:
    print(report.read_breakdown(df, x))
    return as_image(report.fig_breakdown(df, x, title))


# ----------------------------------------------------------------------------- 05: instances

def instance_plan(stack: Stack, p: LabParams) -> pd.DataFrame:
    """The instance steps: 1 on GPU 0 → 2+2 → 4+4 on two GPUs; on CPU 1 → cores → 2 × cores."""
    if p.instance_counts:
        counts = list(p.instance_counts)
    elif stack.has_gpu:
        counts = [1, 2, 4]
    else:
        cores = os.cpu_count() or 1
        counts = sorted({1, cores, 2 * cores})
    rows = []
    for i, count in enumerate(counts):
        gpus = ([0] if i == 0 else [0, 1]) if stack.has_gpu else []
        total = count * max(1, len(gpus))
        where = f"{'+'.join([str(count)] * len(gpus))} on GPUs {gpus}" if gpus else f"{count} on the CPU"
        rows.append({"count": count, "gpus": gpus, "instances": total, "label": where})
    return pd.DataFrame(rows)


def instance_scaling(triton: Triton, name: str, plan: pd.DataFrame, p: LabParams) -> pd.DataFrame:
    """Each planned step: change instance_group (diff shown), reload, measure at ``scaling_concurrency``."""
    frames = []
    for _, step in tqdm(list(plan.iterrows()), desc="instance steps", unit="config"):
        set_instances(triton, name, int(step["count"]), list(step["gpus"]))
        frames.append(measure(triton, name, p, "instance_scaling", str(step["label"]),
                              concurrency=p.scaling_concurrency, extra={"threads": "split"}))
    return _show(concat(*frames), TRITON_SHOW)


def threads_lesson(triton: Triton, name: str, p: LabParams, count: int = 2) -> pd.DataFrame:
    """``count`` instances with the framework's default threads, then with the cores split between them."""
    frames = []
    for threads, setting in (("default", "default"), ("split", "auto")):
        set_instances(triton, name, count, [0] if triton.stack.has_gpu else (), threads=setting)
        frames.append(measure(triton, name, p, "threads_lesson", f"{count} instances, {threads} threads",
                              concurrency=p.scaling_concurrency, extra={"threads": threads}))
    set_instances(triton, name, 1, [0] if triton.stack.has_gpu else (), quiet=True)
    return _show(concat(*frames), TRITON_SHOW)


def plot_scaling(df: pd.DataFrame, title: str = "") -> Any:
    print(report.read_scaling(df))
    return as_image(report.fig_scaling(df, title))


# ----------------------------------------------------------------------------- 06: ONNX backend

def scale_and_sweep(triton: Triton, name: str, count: int, p: LabParams, step: str,
                    levels: Sequence[int]) -> pd.DataFrame:
    """``count`` instances (over GPUs 0 and 1 on a GPU host), then a concurrency sweep."""
    set_instances(triton, name, count, [0, 1] if triton.stack.has_gpu else ())
    gpus = " over GPUs [0, 1]" if triton.stack.has_gpu else " on the CPU"
    return _measure_all(triton, name, p, step,
                        [{"concurrency": c, "label": f"count {count}{gpus}, c={c}"} for c in levels])


def plot_backends(python_rows: pd.DataFrame, onnx_rows: pd.DataFrame) -> Any:
    both = concat(python_rows, onnx_rows)
    print(report.read_breakdown(both.sort_values(["model", "concurrency"])))
    return as_image(report.fig_backends(both))


# ----------------------------------------------------------------------------- 07: dynamic batching

def measure_capacity(triton: Triton, name: str, p: LabParams) -> float:
    """What one instance serves at most (inferences/s at ``capacity_concurrency``); rates derive from it."""
    rows = _measure_all(triton, name, p, "capacity",
                        [{"concurrency": p.capacity_concurrency, "label": "capacity"}])
    capacity = float(rows["throughput"].iloc[0])
    if not capacity > 0:
        raise RuntimeError(f"measured capacity of {name} is {capacity}: cannot derive arrival rates")
    print(f"one instance of {name} serves at most ≈{capacity:.1f} inferences/s on this target")
    return capacity


def arrival_patterns(triton: Triton, name: str, capacity: float, p: LabParams) -> pd.DataFrame:
    """Constant vs Poisson arrivals at ``base_rate_fraction`` × capacity."""
    rate = round(p.base_rate_fraction * capacity, 1)
    return _measure_all(triton, name, p, "arrivals",
                        [{"rate": rate, "distribution": d, "label": f"{d} {rate:g}/s"}
                         for d in ("constant", "poisson")])


def dynamic_batching_sweep(triton: Triton, name: str, capacity: float, p: LabParams) -> pd.DataFrame:
    """Poisson arrivals at each ``rate_fractions`` × capacity, dynamic batching off and then on."""
    rates = [round(f * capacity, 1) for f in p.rate_fractions]
    frames = []
    for enabled in (False, True):
        set_dynamic_batching(triton, name, p, enabled, quiet=True)
        state = "on" if enabled else "off"
        frames.append(_measure_all(triton, name, p, "dynamic_batching",
                                   [{"rate": r, "distribution": "poisson",
                                     "label": f"batching {state} {r:g}/s"}
                                    for r in rates]))
    return concat(*frames)


def plot_rates(df: pd.DataFrame) -> Any:
    print(report.read_rates(df))
    return as_image(report.fig_rates(df))


def plot_batch_sizes(df: pd.DataFrame) -> Any:
    counts = report.batch_size_counts(df[df["dynamic_batching"] == True])  # noqa: E712
    print(report.read_batch_sizes(counts))
    return as_image(report.fig_batch_sizes(counts))

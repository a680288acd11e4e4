"""The Triton plumbing the Triton notebooks share: bring the server up, deploy and reconfigure a model,
try it once, and measure it with perf_analyzer (with the server's statistics and utilisation).
Long on purpose: these cells share the ``Triton`` handle and its model-state checks (``not_loaded``); the
server's statistics are in triton_stats, the student's edits in triton_edits, the views in triton_views.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from servelab.lab.exercise import StudentError
from servelab.lab.params import LabParams
from servelab.lab.show import show_code
from servelab.lab.stack import hostport
from servelab.lab.tables import concat, show_columns
from servelab.lab.triton_stats import stats_change, stats_json  # noqa: F401  (the notebooks call them here)
from servelab.report.figures import as_image, fig_breakdown
from servelab.report.readings import read_breakdown
from servelab.results.schema import TRITON_COLUMNS, normalise_triton
from servelab.results.store import results_dir
from servelab.targets.base import MODEL_REPOSITORY, Stack
from servelab.triton.access import curl_header
from servelab.triton.defaults import MAX_QUEUE_DELAY_US, PREFERRED_BATCH_SIZES


@dataclass
class Triton:
    """The Triton server of a stack: where it answers and how to talk to it."""

    stack: Stack
    url: str  # host:port, as tritonclient and perf_analyzer take it
    hints: dict[str, str] = field(default_factory=dict)  # model → what loads it, where a cell does (06)

    def client(self) -> Any:
        """A tritonclient HTTP client that sends the lab's key (model control: ``servelab.triton.access``)."""
        from servelab.triton.access import control_client

        return control_client(self.url, network_timeout=120.0, connection_timeout=30.0)

    @property
    def pid(self) -> int | None:
        """tritonserver's pid where this process can see it (the local target's own process): the
        server CPU the tables show beside the machine's; None on a compose target (another container)."""
        service = getattr(self.stack, "service", None)
        try:
            return int(service("triton_server").pid) if service else None
        except (RuntimeError, AttributeError, TypeError, ValueError):
            return None

    @property
    def metrics_url(self) -> str:
        """Triton's Prometheus page (its metrics port), as a scraper or ``curl`` asks for it."""
        return self.stack.url("triton_server", "metrics").rstrip("/") + "/metrics"

    def _repr_html_(self) -> str:
        models = ", ".join(f"{m['name']} ({m.get('state', '?')})"
                           for m in self.client().get_model_repository_index())
        return f"Triton at <code>{self.url}</code> (target {self.stack.target}); models: {models}"


def triton_up(stack: Stack, models: Sequence[str], later: Sequence[str] = ()) -> Triton:
    """Bring up the Triton stack, deploy ``models`` from the staging area and load them; a model the server
    loaded at its start (the compose file loads both) is unloaded: unused, or loaded ``later`` (06's)."""
    stack.up("triton", services=["triton_server"])
    triton = Triton(stack, hostport(stack.url("triton_server")))
    for name in models:
        deploy(triton, name)
    for other in [m["name"] for m in triton.client().get_model_repository_index()
                  if m.get("state") == "READY" and m["name"] not in models]:
        why = "loaded below, from its config.pbtxt as you write it" if other in later else "not used here"
        print(f"$ curl -s -X POST {curl_header()} http://{triton.url}/v2/repository/models/{other}/unload  "
              f"# {why}")
        triton.client().unload_model(other)
    for name in models:
        print(f"{name} computes on the {where_it_computes(triton, name)[1]}")
    return triton


def where_it_computes(triton: Triton, name: str) -> tuple[str, str]:
    """(``device`` as the tables record it, the words a notebook prints) for ``name``'s live instances."""
    from servelab.core.paths import STAGING_DIR
    from servelab.triton.config import read_config
    from servelab.triton.repository import serving_device

    return serving_device(live_config(triton, name), read_config(STAGING_DIR / name),
                          same_packages=triton.stack.target == "local")


def triton_down(stack: Stack) -> None:
    stack.down("triton")


def deploy(triton: Triton, name: str, staging_dir: Path | None = None, source: str = "") -> bool:
    """Copy the staged model (or ``staging_dir``'s, ``source`` naming it) into the live repository,
    adapted to the target, and load it; False when exactly that was live already."""
    import tempfile

    from servelab.triton.repository import STAGING_DIR, deploy_model

    with tempfile.TemporaryDirectory() as tmp:
        said = io.StringIO()
        with contextlib.redirect_stdout(said):  # what the deploy adapts for this target, shown if it deploys
            folder = deploy_model(name, Path(tmp), gpu=triton.stack.has_gpu, staging_dir=staging_dir or
                                  STAGING_DIR, onnx_backend=triton.stack.triton_has_backend("onnxruntime"))
        if _deployed_as(triton, name, folder) and _ready(triton.client(), name):
            return False  # the stack deployed and loaded exactly this already
        live = f"{MODEL_REPOSITORY}/{name}"
        print(f"deploying {source or f'models_staging/{name}'} -> {live} on the {triton.stack.target} target")
        adapted = [line for line in said.getvalue().splitlines() if line.startswith("  ")]  # not the tmp copy
        print("\n".join(adapted) or "  (the staged model as it is: nothing to adapt on this target)")
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            triton.stack.write_file(f"{live}/{path.relative_to(folder)}", path.read_bytes())
    triton.stack.reload_model(name)
    _wait_ready(triton, name)
    return True


def _deployed_as(triton: Triton, name: str, folder: Path) -> bool:
    """The live repository holds ``folder``'s config and code as they are. Files over 1 MB (the weights)
    are not read back: after rebuilding the model, delete ``models/<name>`` to have it redeployed."""
    for path in (p for p in folder.rglob("*") if p.is_file() and p.stat().st_size < 1_000_000
                 and "__pycache__" not in p.parts):  # bytecode carries the copy's mtime
        try:
            live = triton.stack.read_file(f"{MODEL_REPOSITORY}/{name}/{path.relative_to(folder)}")
        except (OSError, RuntimeError):
            return False
        if live != path.read_bytes():
            return False
    return True


def _wait_ready(triton: Triton, name: str, timeout: float = 120.0) -> None:
    from servelab.core.procs import wait_until

    client = triton.client()
    wait_until(lambda: _ready(client, name), f"model '{name}' to be ready on Triton at {triton.url}", timeout)


def _ready(client: Any, name: str) -> bool:
    try:
        return bool(client.is_model_ready(name))
    except Exception:  # connection refused while it restarts
        return False


def not_loaded(triton: Triton, name: str) -> str:
    """'' when ``name`` is loaded and ready; else one line: its state, what loads it (``Triton.hints``)."""
    if _ready(triton.client(), name):
        return ""
    index = triton.client().get_model_repository_index()
    state = next((f" ({m['state']}{': ' + m['reason'] if m.get('reason') else ''})" for m in index
                  if m.get("name") == name and m.get("state")), "")
    return f"{name} is not loaded on Triton{state}" + (f": {triton.hints[name]}" if name in triton.hints
                                                       else "")


def require_loaded(triton: Triton, name: str) -> None:
    """A cell that needs ``name`` serving says in one line (``StudentError``) what loads it."""
    if why := not_loaded(triton, name):
        raise StudentError(why)


def live_config(triton: Triton, name: str) -> Any:
    """The model's config.pbtxt in the live repository, parsed (a ModelConfig protobuf)."""
    from servelab.triton.config import parse_config

    return parse_config(triton.stack.read_file(f"{MODEL_REPOSITORY}/{name}/config.pbtxt").decode())


def show_staged_config(name: str) -> None:
    """The staged config.pbtxt as committed, every field explained in its comments."""
    show_code(f"models_staging/{name}/config.pbtxt")


def show_model_code(name: str) -> None:
    """The Python backend's whole model.py: ``initialize`` per instance, ``execute`` per list of requests."""
    show_code(f"models_staging/{name}/1/model.py")


def model_table(triton: Triton) -> pd.DataFrame:
    """The server's model table (what its log prints as READY): ``POST /v2/repository/index``."""
    print(f"$ curl -s -X POST {curl_header()} http://{triton.url}/v2/repository/index")
    index = triton.client().get_model_repository_index()
    return pd.DataFrame([{"model": m.get("name"), "version": m.get("version", ""),
                          "status": m.get("state", ""), "reason": m.get("reason", "")} for m in index])


@dataclass
class StackConfigFile:
    """A model's config.pbtxt in the live repository on the stack's host."""

    stack: Stack
    name: str

    @property
    def relpath(self) -> str:
        return f"{MODEL_REPOSITORY}/{self.name}/config.pbtxt"

    def read(self) -> str | None:
        try:
            return self.stack.read_file(self.relpath).decode()
        except (OSError, RuntimeError):
            return None

    def write(self, text: str) -> None:
        self.stack.write_file(self.relpath, text)


def apply_config(triton: Triton, name: str, cfg: Any, quiet: bool = False) -> Any:
    """Show the diff, then ``servelab.triton.config.apply_config`` through the stack: write, reload,
    read the live config back, restore the file when Triton refuses. Prints what is live and when."""
    from servelab.triton.config import apply_config as apply
    from servelab.triton.config import config_text, diff_configs, mc

    old, new = config_text(live_config(triton, name)), config_text(cfg)
    if not quiet:
        print(diff_configs(old, new, f"{name}/config.pbtxt") or f"{name}/config.pbtxt: unchanged")
    started = time.perf_counter()
    live = apply(triton.client(), name, StackConfigFile(triton.stack, name), cfg,
                 reload=triton.stack.reload_model)
    _wait_ready(triton, name)
    if not quiet:
        print(f"live after {time.perf_counter() - started:.1f} s (confirmed by the server): "
              + ", ".join(f"{g.count} × {mc.ModelInstanceGroup.Kind.Name(g.kind)}"
                          + (f" on GPUs {list(g.gpus)}" if g.gpus else "") for g in live.instance_group)
              + f"; dynamic batching {'on' if live.HasField('dynamic_batching') else 'off'}")
    return live


def set_instances(triton: Triton, name: str, count: int, gpus: Sequence[int] = (),
                  threads: str = "auto", quiet: bool = False, kind: str | None = None) -> None:
    """``count`` instances on each listed GPU (``kind`` KIND_GPU, the default where the stack has a GPU)
    or on the CPU (KIND_CPU); KIND_GPU on a target without GPUs becomes KIND_CPU, and says so.
    ``threads`` sets food_classifier's CPU_THREADS."""
    from servelab.triton.config import set_instances as set_count
    from servelab.triton.config import set_parameter
    from servelab.triton.instances import ort_threads

    cfg = live_config(triton, name)
    kind = kind or ("KIND_GPU" if triton.stack.has_gpu else "KIND_CPU")
    if kind == "KIND_GPU" and not triton.stack.has_gpu:
        print(f"no GPU on the {triton.stack.target} target: KIND_GPU becomes KIND_CPU (gpus dropped)")
        kind = "KIND_CPU"
    cfg = set_count(cfg, int(count), kind, [int(g) for g in gpus] if kind == "KIND_GPU" else ())
    if "CPU_THREADS" in cfg.parameters:
        cfg = set_parameter(cfg, "CPU_THREADS", threads)
    elif cfg.backend == "onnxruntime" and kind == "KIND_CPU":  # the Python backend's thread rule
        cfg = set_parameter(cfg, "intra_op_thread_count", str(ort_threads(threads, count)))
    apply_config(triton, name, cfg, quiet)


def instance_threads(triton: Triton, name: str) -> int | None:
    """The intra-op threads each instance of ``name`` runs with now (the tables' ``threads``)."""
    from servelab.core.cpu import cpu_cores
    from servelab.triton.config import mc
    from servelab.triton.instances import instance_threads as threads_of

    cfg = live_config(triton, name)
    cpu = sum(g.count for g in cfg.instance_group if g.kind != mc.ModelInstanceGroup.KIND_GPU) or 1
    on_gpu = any(g.kind == mc.ModelInstanceGroup.KIND_GPU for g in cfg.instance_group)
    parameters = {key: value.string_value for key, value in cfg.parameters.items()}
    return threads_of(cfg.backend, parameters, cpu, on_gpu, cpu_cores())


def set_dynamic_batching(triton: Triton, name: str,
                         preferred_batch_size: Sequence[int] = PREFERRED_BATCH_SIZES,
                         max_queue_delay_microseconds: int = MAX_QUEUE_DELAY_US, enabled: bool = True,
                         quiet: bool = False) -> None:
    """The model's ``dynamic_batching`` block, its fields named as in config.pbtxt (``enabled=False``
    removes the block); the diff is shown and the model reloaded."""
    from servelab.triton.config import set_dynamic_batching as set_batching

    cfg = set_batching(live_config(triton, name), enabled, [int(s) for s in preferred_batch_size],
                       int(max_queue_delay_microseconds))
    apply_config(triton, name, cfg, quiet)


def triton_try(triton: Triton, name: str, sample: int = 0) -> pd.DataFrame:
    """One sample photo through Triton's client: label and probability."""
    import base64

    import numpy as np
    import tritonclient.http as httpclient

    from servelab.core.labels import CLASSES
    from servelab.core.preprocess import preprocess_bytes, softmax
    from servelab.core.samples import sample_paths

    require_loaded(triton, name)
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
            batch: int = 1, extra: dict[str, Any] | None = None,
            stability_pct: float | None = None, images: int = 1) -> pd.DataFrame:
    """One perf_analyzer run with the server's statistics and utilisation, recorded under ``triton``
    (``stability_pct``: another band than the preset's for this level's windows). ``images``: how many
    distinct sample photos perf_analyzer sends in turn (1: every request the same image; the row's
    ``images`` says which).

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
                  "stability_percentage": stability_pct if stability_pct is not None
                  else p.stability_pct if rate is None else p.rate_stability_pct,
                  "max_trials": p.max_trials}
    load: dict[str, Any] = ({"concurrency": concurrency} if concurrency is not None
                            else {"request_rate": round(float(rate or 0), 1), "distribution": distribution})
    photos = _photos(images)
    columns = {"step": step, "images": len(photos), "threads": instance_threads(triton, name),
               "device": where_it_computes(triton, name)[0],  # the window criterion: effects.any_spread
               "stability_pct": settle.get("stability_percentage"), **(extra or {})}
    inputs = experiments.input_data_for(triton, name, photos, workdir=results_dir() / "perf-inputs")
    where = triton.stack.perf_options(inputs)
    def once(retried: str) -> pd.DataFrame:
        return normalise_triton(experiments.measure(
            triton, name, label or step, batch=batch, settle=settle,
            warmup_requests=max(clients, min(16, window // 4)), timeout=_perf_timeout(p),
            extra={**columns, "retried": retried}, workdir=results_dir() / "perf", **where, **load))

    try:
        return once("")
    except PerfAnalyzerError as exc:  # a stuck or failed run on a busy machine: once more, and say so
        reason = str(exc).splitlines()[0][:200]
        print(f"perf_analyzer failed ({reason}); trying once more")
        return once(reason)  # the row's "retried" names the first failure (the report lists these)


def _photos(images: int) -> list[Path]:
    """The first ``images`` sample photos: one (every request the same) or many distinct ones."""
    from servelab.core.samples import sample_paths

    found = sample_paths()
    if not isinstance(images, int) or not 1 <= images <= len(found):
        raise ValueError(f"images={images!r}: choose how many distinct sample photos perf_analyzer sends, "
                         f"1 to {len(found)}")
    return list(found[:images])


# perf_analyzer is killed after this long (one level, warm-up included): a hung run must not eat the budget
PERF_TIMEOUT_S = {"fixed": 150.0, "stable": 600.0}


QUICK_PERF_TIMEOUT_S = 150.0  # quick windows take seconds: a stuck run is retried inside the cell's limit


def _perf_timeout(p: LabParams) -> float:
    timeout = PERF_TIMEOUT_S[p.settle]
    return min(timeout, QUICK_PERF_TIMEOUT_S) if p.preset == "quick" else timeout


def measure_all(triton: Triton, name: str, p: LabParams, step: str,
                 runs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Several measurements of one step, each printing its command and its own bar; stored under ``triton``.
    (No bar around them: a command printed while a bar is open on stdout lands on the bar's line.)"""
    if why := not_loaded(triton, name):  # an empty table, so the cells that read it still run
        print(f"✗ nothing measured: {why}")
        return show_columns(pd.DataFrame(columns=TRITON_COLUMNS), TRITON_COLUMNS)
    frames = [measure(triton, name, p, step, **run) for run in runs]
    return show_columns(concat(*frames), TRITON_COLUMNS)


def plot_breakdown(df: pd.DataFrame, x: str = "concurrency", title: str = "") -> Any:
    print(read_breakdown(df, x))
    return as_image(fig_breakdown(df, x, title))


def concurrency_sweep(triton: Triton, name: str, p: LabParams, step: str,
                      levels: Sequence[int] | None = None) -> pd.DataFrame:
    """One measurement per concurrency level (default: the notebook's ``concurrency_levels``)."""
    levels = list(levels or p.concurrency_levels)
    return measure_all(triton, name, p, step,
                        [{"concurrency": c, "label": f"{name} c={c}"} for c in levels])

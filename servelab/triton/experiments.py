"""One call per lab measurement, for notebooks whose cells stay one-liners.

``configure`` is the "edit config.pbtxt and reload" step (diff shown, time to
live measured); ``measure`` is the "run perf_analyzer" step: for every load
level it snapshots the server's statistics, samples utilisation, runs
perf_analyzer, snapshots again, and appends one row per level to
``results/<experiment>.csv`` — perf_analyzer's client view, the server's
queue/compute breakdown and batch-size counts for just that level, the config
that was live, the load pattern, and the CPU/GPU utilisation (GPU: NVML sampled
by this process, and perf_analyzer's ``--collect-metrics`` figures beside it;
see ``gpu_utilisation``).

The server argument only needs ``.url`` (host:port as perf_analyzer sees it)
and ``.client()`` (a tritonclient HTTP client); GPU targets pass their own
handle and a ``runner`` that executes perf_analyzer where their stack runs it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from servelab.core.monitor import Utilisation
from servelab.core.notices import LabWarning
from servelab.results.store import append_rows
from servelab.triton import config as cfgmod
from servelab.triton.perf import (
    FIXED_COUNT,
    NOISY_CPU,
    PerfAnalyzerError,
    PerfResult,
    Runner,
    check_shapes,
    load_levels,
    perf,
)
from servelab.triton.perf_csv import perf_gpu_columns, records
from servelab.triton.perf_inputs import make_file_input_data, make_input_data, make_tensor_input_data
from servelab.triton.server import cache_dir
from servelab.triton.stats import run_stats

EXPERIMENT = "triton"
SETTLE_PRESETS: dict[str, dict[str, Any]] = {"noisy": NOISY_CPU, "fixed": FIXED_COUNT, "default": {}}


class TritonEndpoint(Protocol):
    """What ``measure`` needs from a server handle (TritonServer satisfies it)."""

    @property
    def url(self) -> str: ...

    def client(self) -> Any: ...


def input_data_for(server: TritonEndpoint, model: str, images: Sequence[Path] | None = None,
                   workdir: Path | None = None) -> Path:
    """perf_analyzer input data fitting ``model``'s input, one entry per image of ``images`` (default: the
    first sample photo): base64 image text for a BYTES input, the preprocessed tensor for an FP32 one,
    the file's bytes for a UINT8 one (as the lab's models take them)."""
    from servelab.core.samples import sample_paths

    metadata = server.client().get_model_metadata(model)
    first = metadata["inputs"][0]
    images = list(images or sample_paths()[:1])
    if not images:
        raise FileNotFoundError("no sample images: run python -m servelab.core.samples")
    workdir = Path(workdir or cache_dir() / "perf-inputs")
    out = workdir / f"{model}-{first['name']}-{len(images)}-{Path(images[0]).stem}.json"
    if first["datatype"] == "BYTES":
        return make_input_data(images, out, first["name"])
    if first["datatype"] == "FP32":
        return make_tensor_input_data(images, out, first["name"])
    if first["datatype"] == "UINT8":
        return make_file_input_data(images, out, first["name"])
    raise ValueError(f"no input-data recipe for {model}'s input {first['name']} ({first['datatype']})")


def live_summary(server: TritonEndpoint, model: str) -> dict[str, Any]:
    """The live config's experiment-relevant fields (instances, batching, backend)."""
    return cfgmod.summary(cfgmod.live_config(server.client(), model))


def _settle_options(settle: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(settle, str):
        if settle not in SETTLE_PRESETS:
            raise ValueError(f"settle must be one of {sorted(SETTLE_PRESETS)} or a dict of perf options")
        return dict(SETTLE_PRESETS[settle])
    return dict(settle)


WARMUP_TIMEOUT_S = 60.0  # a warm-up is a few seconds of load; more means it is stuck


def warm_up(server: TritonEndpoint, model: str, options: dict[str, Any], runner: Runner | None,
             requests: int, timeout: float, perf_url: str | None = None) -> str:
    """A short unrecorded run at the same load: first requests pay for lazy initialisation.

    One count window of at least two requests per client, not ``--request-count``: perf_analyzer
    2.51 hangs now and then in request-count mode at concurrency 16
    (docs/decisions/2026-11-23-perf-analyzer-warm-up-hang.md). It only warms the server, so it never
    costs a measurement: a short timeout, and a warning instead of a failure.
    Returns "" or why the warm-up was skipped (the row's ``warmup``).
    """
    warm = {k: v for k, v in options.items() if k not in
            ("measurement_mode", "measurement_request_count", "stability_percentage", "max_trials",
             "measurement_interval_ms", "request_count")}
    rate = warm.get("request_rate")
    clients = int(warm.get("concurrency") or 1)
    count = max(requests, 2 * clients)
    warm.update(measurement_mode="count_windows", max_trials=1,
                measurement_request_count=max(count, math.ceil(float(rate))) if rate else count)
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            perf(model, perf_url or server.url, "warm-up", runner=runner,
                 timeout=min(timeout, WARMUP_TIMEOUT_S), **warm)
    except PerfAnalyzerError as exc:
        reason = f"skipped: {str(exc).splitlines()[0][:200]}"
        warnings.warn(f"warm-up of {model} {reason}; the measurement follows without it", LabWarning,
                      stacklevel=2)
        return reason
    return ""


def _one_level(server: TritonEndpoint, model: str, label: str, level: float, mode: str,
               options: dict[str, Any], runner: Runner | None, timeout: float,
               config: dict[str, Any], perf_url: str | None = None,
               ) -> tuple[PerfResult, dict[str, Any], dict[str, Any]]:
    opts = dict(options)
    opts["concurrency" if mode == "concurrency" else "request_rate"] = (
        int(level) if mode == "concurrency" else level)
    pid = getattr(server, "pid", None)  # a TritonServer this process started has one; a Stack does not
    pids = [pid] if pid else []
    with run_stats(server.client(), model) as stats, Utilisation(pids=pids) as util:
        result = perf(model, perf_url or server.url, label, config=config, runner=runner, timeout=timeout,
                      **opts)
    return result, stats.delta, util.summary()


def gpu_utilisation(row: Mapping[str, Any], util: Mapping[str, Any]) -> dict[str, Any]:
    """The GPU columns of one result row, from both samplers on the servers' machine.

    ``util`` is ``Utilisation.summary()`` (NVML in this process); ``row`` a
    ``parse_perf_csv`` row, whose raw ``--collect-metrics`` cells give the
    ``perf_gpu*`` columns (Triton's own /metrics), numbered like NVML's GPUs
    where both know the UUIDs. NVML's figures stay the ``gpu{i}_*`` columns
    (and so ``gpu_util_pct``) when it sampled a GPU; otherwise perf_analyzer's fill
    ``gpu{i}_util_mean_pct`` (and, without NVML, ``gpu{i}_mem_max_mib``/``gpu_count``).
    ``gpu_util_source`` says which: "nvml", "perf_analyzer", or None when
    neither saw a GPU (a CPU host: no GPU figures at all, never a 0).
    """
    nvml_count = int(util.get("gpu_count") or 0)
    order = [u for i in range(nvml_count) if (u := util.get(f"gpu{i}_uuid"))]
    out: dict[str, Any] = perf_gpu_columns(row, order)
    unsampled = all(util.get(f"gpu{i}_util_mean_pct") is None for i in range(nvml_count))
    if nvml_count and unsampled and out.get("perf_gpu_count"):  # too short for NVML: Triton's own figure
        out["gpu_util_source"] = "perf_analyzer"
        for i in range(min(nvml_count, int(out["perf_gpu_count"]))):
            out[f"gpu{i}_util_mean_pct"] = out.get(f"perf_gpu{i}_util_mean_pct")
    elif nvml_count:
        out["gpu_util_source"] = "nvml"
    elif out:
        out["gpu_util_source"] = "perf_analyzer"
        out["gpu_count"] = out["perf_gpu_count"]
        for i in range(out["perf_gpu_count"]):
            for suffix in ("uuid", "util_mean_pct", "mem_max_mib"):
                out[f"gpu{i}_{suffix}"] = out[f"perf_gpu{i}_{suffix}"]
    else:
        out["gpu_util_source"] = None
    return out


def with_gpu_columns(frame: pd.DataFrame, util: Mapping[str, Any]) -> pd.DataFrame:
    """``frame`` (one perf run's rows) with ``gpu_utilisation``'s columns on every row."""
    rows = [{**row, **gpu_utilisation(row, util)} for row in records(frame)]
    out = pd.DataFrame(rows, columns=list(dict.fromkeys(k for row in rows for k in row))) if rows else frame
    out.attrs.update(frame.attrs)
    return out


def measure(server: TritonEndpoint, model: str, label: str, *,
            concurrency: int | Sequence[int] | None = None,
            request_rate: float | Sequence[float] | None = None, distribution: str = "constant",
            batch: int = 1, experiment: str = EXPERIMENT, input_data: Path | None = None,
            settle: str | Mapping[str, Any] = "noisy", warmup_requests: int = 20,
            runner: Runner | None = None, timeout: float = 300.0, record: bool = True,
            shapes: Mapping[str, Sequence[int]] | None = None, protocol: str = "http",
            extra: Mapping[str, Any] | None = None, perf_url: str | None = None,
            **perf_options: Any) -> pd.DataFrame:
    """Measure ``model`` at each load level; returns (and records) one row per level.

    ``concurrency``/``request_rate`` take a number, a list of levels, or a
    perf_analyzer range tuple ``(start, end[, step])``. ``settle`` is ``"noisy"``
    (count windows, wide stability band — what a shared CPU needs), ``"fixed"``
    (a fixed request count, no stability search) or a dict of perf options.
    ``extra`` adds columns to every row (e.g. ``{"step": "05_instances"}``).
    ``perf_url`` is where perf_analyzer reaches the server when it runs elsewhere
    than this client (inside the stack's jupyter service: ``triton_server:8000``).
    """
    asked = concurrency if concurrency is not None else request_rate
    if asked is None or (concurrency is not None and request_rate is not None):
        raise ValueError("give exactly one of concurrency= or request_rate=")
    mode = "concurrency" if concurrency is not None else "request_rate"
    levels = [float(x) for x in asked] if isinstance(asked, list) else load_levels(asked)
    check_shapes(server.client(), model, shapes)
    input_data = input_data or input_data_for(server, model)
    config = live_summary(server, model)
    options: dict[str, Any] = {"batch": batch, "input_data": input_data, "protocol": protocol,
                               "shapes": shapes, **_settle_options(settle), **perf_options}
    if mode == "request_rate":
        options["distribution"] = distribution
    frames = []
    for level in levels:
        warmup = ""
        if warmup_requests:
            warm = dict(options)
            warm["concurrency" if mode == "concurrency" else "request_rate"] = (
                int(level) if mode == "concurrency" else level)
            warmup = warm_up(server, model, warm, runner, warmup_requests, timeout, perf_url)
        result, stats, util = _one_level(server, model, label, level, mode, options, runner, timeout, config,
                                         perf_url)
        frame = result.frame.copy()
        for key, value in {**stats, **util, **(extra or {})}.items():
            frame[key] = [value] * len(frame)
        frame = with_gpu_columns(frame, util)  # NVML's GPU figures, else perf_analyzer's
        frame["instances"] = config["instances"]
        frame["dynamic_batching"] = config["dynamic_batching"]
        frame["command"] = result.command
        frame["warnings"] = "; ".join(result.warnings)
        frame["warmup"] = warmup  # "" when it ran; why it was skipped otherwise (the report lists these)
        frames.append(frame)
        if record:
            append_rows(experiment, records(frame))
    out = pd.concat(frames, ignore_index=True)
    out.attrs["stdout"] = "\n".join(f.attrs.get("stdout", "") for f in frames)
    return out


SUMMARY_COLUMNS = ["label", "load_mode", "load_value", "throughput_infer_s", "latency_p50_ms",
                   "latency_p99_ms", "server_queue_ms", "server_compute_infer_ms", "mean_batch_size",
                   "cpu_mean_pct", "settled"]


def show(frame: pd.DataFrame, columns: Sequence[str] = SUMMARY_COLUMNS) -> pd.DataFrame:
    """The columns a reader compares, rounded (for a notebook cell's output)."""
    return frame[[c for c in columns if c in frame.columns]].round(2)


def configure(server: Any, model: str, repository: Path | None = None, *,
              instances: int | Sequence[tuple] | None = None, kind: str | None = None,
              gpus: Sequence[int] = (), dynamic_batching: bool | None = None,
              preferred_batch_sizes: Sequence[int] = (), max_queue_delay_us: int = 0,
              parameters: Mapping[str, str] | None = None, show_diff: bool = True) -> dict[str, Any]:
    """Edit ``model``'s config.pbtxt in the live repository, reload it, and confirm it is live.

    ``instances`` is a count (with ``kind``/``gpus``; kind defaults to the
    current group's) or a list of ``(count, kind, gpus)`` groups. Returns the
    diff, the seconds until the new config was live, and the live summary.
    """
    repository = Path(repository or server.repository)
    model_dir = repository / model
    cfg = cfgmod.read_config(model_dir)
    if instances is not None:
        if isinstance(instances, int):
            group_kind = cfgmod.mc.ModelInstanceGroup.Kind
            current = cfg.instance_group[0].kind if cfg.instance_group else group_kind.Value("KIND_CPU")
            groups = [(instances, kind or group_kind.Name(current), gpus)]
        else:
            groups = list(instances)
        cfg = cfgmod.set_instance_groups(cfg, groups)
    if dynamic_batching is not None:
        cfg = cfgmod.set_dynamic_batching(cfg, dynamic_batching, preferred_batch_sizes, max_queue_delay_us)
    for key, value in (parameters or {}).items():
        cfg = cfgmod.set_parameter(cfg, key, value)
    old_text = cfgmod.config_text(cfgmod.read_config(model_dir))
    started = time.perf_counter()
    live = cfgmod.apply_config(server, model, model_dir, cfg)
    seconds = time.perf_counter() - started
    diff = cfgmod.diff_configs(old_text, cfgmod.config_text(cfg), f"{model}/{cfgmod.CONFIG_NAME}")
    if show_diff:
        print(diff or f"{model}: config unchanged")
        print(f"{model}: new config live after {seconds:.2f} s (confirmed via get_model_config)")
    return {"model": model, "diff": diff, "seconds_to_live": seconds, "live": cfgmod.summary(live)}

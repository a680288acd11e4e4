"""perf_analyzer as the lab runs it, with its results as data.

Split on purpose into three steps so every target can share two of them:
``perf_analyzer_argv`` builds the lab's command; a *runner* executes it (here a
local subprocess; the GPU targets pass one that runs inside a container or over
SSH) and hands back stdout and the ``-f`` CSV text; ``parse_perf_csv`` turns
that into a pandas DataFrame labelled with the experiment, model, config and
load pattern.

On a shared 2-core CPU perf_analyzer often cannot settle ("Failed to obtain
stable measurement") and then leaves the load level out of its CSV, or writes
no CSV at all. That is reported, not swallowed: the level gets a row with
``settled=False`` (throughput and mean latency from its last pass) and a
warning says what to change.

perf_analyzer measures its windows in whole seconds of polling (its throughput
is requests / ceil-ish(seconds)): a fixed-count run of 2–3 s can read up to
~30 % low. Size ``request_count``/``measurement_request_count`` so a level lasts
≥ 5 s when throughputs are to be compared closely; latencies are per request
and not affected.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

# µs columns of perf_analyzer's CSV → ms convenience columns
MS_COLUMNS = {
    "p50 latency": "latency_p50_ms",
    "p90 latency": "latency_p90_ms",
    "p95 latency": "latency_p95_ms",
    "p99 latency": "latency_p99_ms",
    "Avg latency": "latency_avg_ms",
    "Server Queue": "server_queue_ms",
    "Server Compute Input": "server_compute_input_ms",
    "Server Compute Infer": "server_compute_infer_ms",
    "Server Compute Output": "server_compute_output_ms",
    "Client Send": "client_send_ms",
    "Network+Server Send/Recv": "network_server_ms",
    "Client Recv": "client_recv_ms",
}
LOAD_COLUMNS = {"Concurrency": "concurrency", "Request Rate": "request_rate"}
RESULT_COLUMNS = ["label", "model", "load_mode", "load_value", "distribution", "batch_size",
                  "throughput_infer_s", "latency_p50_ms", "latency_p90_ms", "latency_p95_ms",
                  "latency_p99_ms", "latency_avg_ms", "server_queue_ms", "server_compute_input_ms",
                  "server_compute_infer_ms", "server_compute_output_ms", "settled", "config"]

# What a noisy shared 2-core CPU needs to settle (DESIGN.md): count windows and a wide band.
NOISY_CPU: dict[str, Any] = {
    "measurement_mode": "count_windows", "measurement_request_count": 50,
    "stability_percentage": 30, "max_trials": 6,
}
# With --collect-metrics --verbose-csv perf_analyzer (2.51: report_writer.cc WriteGpuMetrics,
# metrics.h, inference_profiler.cc MergeMetrics) appends four columns scraped from Triton's
# /metrics. Each holds one "<gpu_uuid>:<value>;" per GPU, ordered by UUID (a std::map), e.g.
# "GPU-9d2f…:0.83;GPU-c1a0…:0.1;"; all four are empty when Triton reports no GPU (a CPU host).
# column → (our per-GPU suffix, factor to our unit); what the value is:
GPU_METRIC_COLUMNS: dict[str, tuple[str, float]] = {
    # nv_gpu_utilization, a 0–1 fraction, averaged over the level's metric samples → percent
    "Avg GPU Utilization": ("util_mean_pct", 100.0),
    # nv_gpu_power_usage, watts, averaged
    "Avg GPU Power Usage": ("power_mean_w", 1.0),
    # nv_gpu_memory_used_bytes, bytes, the largest sample → MiB
    "Max GPU Memory Usage": ("mem_max_mib", 1.0 / 2**20),
    # nv_gpu_memory_total_bytes, bytes, the first sample → MiB
    "Total GPU Memory": ("mem_total_mib", 1.0 / 2**20),
}

# Fixed request count: no stability search at all (fast, for tests and quick looks).
FIXED_COUNT: dict[str, Any] = {"request_count": 100}


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer failed outright (not merely unsettled); the message has its output."""


class UnsettledWarning(UserWarning):
    """A load level did not give a stable measurement."""


def _range(value: int | float | Sequence[int | float]) -> str:
    """3, (1, 8) or (1, 8, 1) → perf_analyzer's start[:end[:step]]."""
    if isinstance(value, int | float):
        return f"{value:g}"
    return ":".join(f"{v:g}" for v in value)


def load_levels(value: int | float | Sequence[int | float]) -> list[float]:
    """The load levels a range asks for (to size the progress bar and find missing rows)."""
    if isinstance(value, int | float):
        return [float(value)]
    start, end, step = [*list(value), None, None][:3]
    end = start if end is None else end
    step = step or 1
    levels, level = [], float(start)
    while level <= float(end) + 1e-9:
        levels.append(level)
        level += float(step)
    return levels


def perf_analyzer_argv(model: str, url: str, *, protocol: str = "http", batch: int = 1,
                       concurrency: int | Sequence[int] | None = None,
                       request_rate: float | Sequence[float] | None = None,
                       distribution: str = "constant", input_data: str | Path | None = None,
                       shapes: Mapping[str, Sequence[int]] | None = None,
                       measurement_mode: str | None = "count_windows",
                       measurement_request_count: int | None = 50,
                       measurement_interval_ms: int | None = None,
                       stability_percentage: float | None = None, max_trials: int | None = None,
                       request_count: int | None = None, max_threads: int | None = None,
                       csv_path: str | Path = "perf.csv", collect_metrics: bool = False,
                       metrics_url: str | None = None, verbose: bool = True,
                       binary: str = "perf_analyzer", extra_args: Sequence[str] = ()) -> list[str]:
    """The lab's perf_analyzer command line.

    ``shapes`` must name the model's real inputs (``{"input": [3, 224, 224]}``);
    perf_analyzer silently ignores unknown names, so they are checked by
    ``check_shapes`` against the model's metadata when a client is at hand.
    ``request_count`` sends exactly that many requests per level and skips the
    stability search; otherwise ``measurement_mode``/``stability_percentage``/
    ``max_trials`` control settling. In request-rate mode ``max_threads``
    defaults to 16 so the client can keep the asked rate.
    """
    if (concurrency is None) == (request_rate is None):
        raise ValueError("give exactly one of concurrency= or request_rate=")
    if protocol not in ("http", "grpc"):
        raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}")
    if distribution not in ("constant", "poisson"):
        raise ValueError(f"distribution must be 'constant' or 'poisson', not {distribution!r}")
    if batch < 1:
        raise ValueError(f"batch size must be at least 1, not {batch}")
    if request_count is not None and len(load_levels(concurrency if concurrency is not None
                                                      else request_rate)) > 1:  # type: ignore[arg-type]
        raise ValueError("perf_analyzer takes request_count only with a single load level; "
                         "run one level per call or use count windows")
    if request_count is not None and request_rate is not None and request_count < max(
            load_levels(request_rate)):  # type: ignore[arg-type]
        raise ValueError(f"request_count ({request_count}) must be at least the request rate "
                         f"({request_rate}): perf_analyzer refuses fewer requests than one second's worth")
    argv = [binary, "-m", model, "-u", url, "-i", protocol, "-b", str(batch)]
    if concurrency is not None:
        argv += ["--concurrency-range", _range(concurrency)]
    else:
        argv += ["--request-rate-range", _range(request_rate),  # type: ignore[arg-type]
                 "--request-distribution", distribution,
                 "--max-threads", str(max_threads or 16)]
    if concurrency is not None and max_threads:
        argv += ["--max-threads", str(max_threads)]
    if input_data is not None:
        argv += ["--input-data", str(input_data)]
    for name, dims in (shapes or {}).items():
        argv += ["--shape", f"{name}:{','.join(str(int(d)) for d in dims)}"]
    if request_count is not None:
        argv += ["--request-count", str(request_count)]
    else:
        if measurement_mode:
            argv += ["--measurement-mode", measurement_mode]
            if measurement_mode == "count_windows" and measurement_request_count:
                argv += ["--measurement-request-count", str(measurement_request_count)]
        if measurement_interval_ms:
            argv += ["--measurement-interval", str(measurement_interval_ms)]
        if stability_percentage is not None:
            argv += ["--stability-percentage", f"{stability_percentage:g}"]
        if max_trials is not None:
            argv += ["--max-trials", str(max_trials)]
    argv += ["-f", str(csv_path)]
    if collect_metrics:
        argv += ["--verbose-csv", "--collect-metrics"]
        if metrics_url:
            argv += ["--metrics-url", metrics_url]
    if verbose:
        argv.append("-v")  # prints every pass: the progress bar and the unsettled fallback use it
    return argv + list(extra_args)


def check_shapes(client: Any, model: str, shapes: Mapping[str, Sequence[int]] | None) -> None:
    """Refuse ``--shape`` names the model does not have (perf_analyzer would ignore them silently)."""
    if not shapes:
        return
    names = {i["name"] for i in client.get_model_metadata(model)["inputs"]}
    unknown = sorted(set(shapes) - names)
    if unknown:
        raise ValueError(f"--shape names {unknown} are not inputs of '{model}' (its inputs: {sorted(names)})")


# ---------------------------------------------------------------- running
@dataclass
class RunOutput:
    """What a runner hands back: exit status, stdout (+stderr) and the -f CSV text ('' if none)."""

    argv: list[str]
    returncode: int
    stdout: str
    csv_text: str
    wall_s: float = 0.0


Runner = Callable[[list[str], str, float], RunOutput]
"""runner(argv, csv_path, timeout) → RunOutput; argv already writes its CSV to csv_path."""


def perf_analyzer_binary() -> str:
    """The perf_analyzer next to this Python (tritonclient's wheel puts it in the venv's bin)."""
    local = Path(sys.executable).parent / "perf_analyzer"
    return str(local) if local.is_file() else "perf_analyzer"


def perf_analyzer_env() -> dict[str, str]:
    """perf_analyzer links libcudart.so.12 even on a CPU host: PyPI's nvidia-cuda-runtime provides it."""
    import sysconfig

    lib = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cuda_runtime" / "lib"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(p for p in [str(lib), env.get("LD_LIBRARY_PATH", "")] if p)
    return env


_LEVEL_RE = re.compile(r"^\s*(Request concurrency|Request Rate):\s*([\d.]+)\s*(?:$|inference requests)")
_PASS_RE = re.compile(r"Pass \[(\d+)\] throughput: ([\d.]+) infer/sec\. Avg latency: (\d+) usec")


def local_runner(progress: bool = True, levels: int | None = None) -> Runner:
    """Run perf_analyzer here, streaming its output into a tqdm bar (one step per load level)."""

    def run(argv: list[str], csv_path: str, timeout: float) -> RunOutput:
        from tqdm.auto import tqdm

        Path(csv_path).unlink(missing_ok=True)
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=perf_analyzer_env(), start_new_session=True)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        lines: list[str] = []
        bar = tqdm(total=levels, desc=f"perf_analyzer {argv[argv.index('-m') + 1]}", unit="level",
                   disable=not progress, leave=False)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if (m := _LEVEL_RE.match(line)):
                    bar.update(1)
                    bar.set_postfix_str(f"{m.group(1).split()[-1].lower()} {m.group(2)}")
                elif (m := _PASS_RE.search(line)):
                    bar.set_postfix_str(f"pass {m.group(1)}: {float(m.group(2)):.1f} infer/s")
            proc.wait()
        finally:
            timer.cancel()
            bar.close()
            if proc.poll() is None:
                kill()
                proc.wait()
        stdout = "".join(lines)
        if killed.is_set():
            raise PerfAnalyzerError(f"perf_analyzer ran past its {timeout:.0f} s timeout and was killed; "
                                    f"last output:\n{stdout[-2000:]}")
        csv_file = Path(csv_path)
        csv_text = csv_file.read_text() if csv_file.is_file() else ""
        return RunOutput(argv, proc.returncode, stdout, csv_text, time.monotonic() - started)

    return run


# ---------------------------------------------------------------- parsing
def parse_levels(stdout: str) -> list[dict[str, Any]]:
    """Per load level in perf_analyzer's -v output: settled?, last pass throughput and mean latency."""
    levels: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        if (m := _LEVEL_RE.match(line)):
            mode = "concurrency" if m.group(1) == "Request concurrency" else "request_rate"
            levels.append({"load_mode": mode, "load_value": float(m.group(2)), "settled": True,
                           "passes": 0, "throughput": math.nan, "avg_latency_us": math.nan})
        elif levels and (m := _PASS_RE.search(line)):
            levels[-1].update(passes=int(m.group(1)), throughput=float(m.group(2)),
                              avg_latency_us=float(m.group(3)))
        elif levels and line.startswith("Failed to obtain stable measurement"):
            levels[-1]["settled"] = False
    return levels


def _ms(value: Any) -> float:
    return float(value) / 1000.0 if value is not None and value == value else math.nan


def parse_gpu_field(value: Any) -> dict[str, float]:
    """One GPU-metrics cell, ``"GPU-a:0.83;GPU-b:0.1;"`` → ``{"GPU-a": 0.83, "GPU-b": 0.1}``.

    An empty cell (pandas reads it as NaN), a missing one (None) or an entry
    that is not ``<uuid>:<number>`` gives nothing for that GPU, never a 0.
    """
    if not isinstance(value, str):
        return {}
    out: dict[str, float] = {}
    for entry in value.split(";"):
        uuid, sep, number = entry.strip().rpartition(":")
        if not sep or not uuid:
            continue
        try:
            figure = float(number)
        except ValueError:
            continue
        if math.isfinite(figure):
            out[uuid] = figure
    return out


def perf_gpu_columns(record: Mapping[str, Any], order: Sequence[str] = ()) -> dict[str, Any]:
    """perf_analyzer's GPU metrics of one CSV row as flat ``perf_gpu*`` columns; {} without any.

    Per GPU ``i``: ``perf_gpu{i}_uuid``, ``perf_gpu{i}_util_mean_pct`` (percent),
    ``perf_gpu{i}_power_mean_w``, ``perf_gpu{i}_mem_max_mib``,
    ``perf_gpu{i}_mem_total_mib`` (None where that figure is missing). For the
    run: ``perf_gpu_count``, ``perf_gpu_util_pct`` (mean over GPUs, as
    ``gpu_util_pct``), ``perf_gpu_power_w`` (total over GPUs) and
    ``perf_gpu_mem_max_mib`` (the fullest GPU's peak). GPUs are numbered in
    ``order`` (e.g. NVML's UUIDs by index) first, then in perf_analyzer's own
    order (by UUID), which need not be the driver's index order.
    """
    maps = {suffix: (parse_gpu_field(record.get(column)), factor)
            for column, (suffix, factor) in GPU_METRIC_COLUMNS.items()}
    found = {uuid for values, _ in maps.values() for uuid in values}
    if not found:
        return {}
    uuids = [u for u in dict.fromkeys(order) if u in found] + sorted(found - set(order))
    out: dict[str, Any] = {"perf_gpu_count": len(uuids)}
    for index, uuid in enumerate(uuids):
        out[f"perf_gpu{index}_uuid"] = uuid
        for suffix, (values, factor) in maps.items():
            out[f"perf_gpu{index}_{suffix}"] = round(values[uuid] * factor, 1) if uuid in values else None

    def present(suffix: str) -> list[float]:
        return [v for i in range(len(uuids)) if (v := out[f"perf_gpu{i}_{suffix}"]) is not None]

    util, power, memory = present("util_mean_pct"), present("power_mean_w"), present("mem_max_mib")
    out["perf_gpu_util_pct"] = round(sum(util) / len(util), 1) if util else None
    out["perf_gpu_power_w"] = round(sum(power), 1) if power else None
    out["perf_gpu_mem_max_mib"] = max(memory) if memory else None
    return out


def parse_perf_csv(text: str, label: str, model: str, config: Mapping[str, Any] | str | None = None,
                   load: Mapping[str, Any] | None = None, stdout: str = "") -> pd.DataFrame:
    """perf_analyzer's ``-f`` CSV (µs) → one row per load level, labelled; raw µs columns kept.

    GPU metrics (``--collect-metrics --verbose-csv``) become ``perf_gpu*``
    columns (``perf_gpu_columns``); the raw cells stay under their own names.

    ``load`` describes the load pattern (``distribution``, ``batch_size``, …);
    levels that appear in ``stdout`` as unsettled are added with
    ``settled=False`` and the numbers of their last pass.
    """
    import io

    load = dict(load or {})
    raw = pd.read_csv(io.StringIO(text)) if text.strip() else pd.DataFrame()
    rows: list[dict[str, Any]] = []
    for record in raw.to_dict("records"):
        mode_col = next((c for c in LOAD_COLUMNS if c in record), None)
        row: dict[str, Any] = {
            "load_mode": LOAD_COLUMNS[mode_col] if mode_col else load.get("load_mode"),
            "load_value": float(record[mode_col]) if mode_col else math.nan,
            "throughput_infer_s": float(record.get("Inferences/Second", math.nan)),
            "settled": True,
        }
        for source, target in MS_COLUMNS.items():
            if source in record:
                row[target] = _ms(record[source])
        if "latency_avg_ms" not in row:  # without --verbose-csv: the components add up to it
            parts = [k for k in ("Client Send", "Network+Server Send/Recv", "Server Queue",
                                 "Server Compute Input", "Server Compute Infer", "Server Compute Output",
                                 "Client Recv") if k in record]
            row["latency_avg_ms"] = sum(float(record[k]) for k in parts) / 1000.0 if parts else math.nan
        # perf_analyzer's own columns (µs) kept under their own names
        row.update({k: v for k, v in record.items() if k not in LOAD_COLUMNS and k != "Inferences/Second"})
        row.update(perf_gpu_columns(record))  # --collect-metrics: per GPU, in our units
        rows.append(row)
    seen = {(r["load_mode"], r["load_value"]) for r in rows}
    for level in parse_levels(stdout):
        if level["settled"] or (level["load_mode"], level["load_value"]) in seen:
            continue
        rows.append({"load_mode": level["load_mode"], "load_value": level["load_value"],
                     "throughput_infer_s": level["throughput"],
                     "latency_avg_ms": _ms(level["avg_latency_us"]), "settled": False})
    config_text = config if isinstance(config, str) else json.dumps(config or {}, sort_keys=True, default=str)
    for row in rows:
        row.update({"label": label, "model": model, "config": config_text,
                    "distribution": load.get("distribution") if row["load_mode"] == "request_rate" else None,
                    "batch_size": load.get("batch_size", 1)})
        row.update({k: v for k, v in load.items() if k not in row})
    frame = pd.DataFrame(rows)
    for column in RESULT_COLUMNS:
        if column not in frame.columns:
            frame[column] = math.nan
    ordered = RESULT_COLUMNS + [c for c in frame.columns if c not in RESULT_COLUMNS]
    frame = frame[ordered].sort_values("load_value", kind="stable").reset_index(drop=True)
    frame.attrs["stdout"] = stdout
    return frame


def unsettled_message(frame: pd.DataFrame) -> str | None:
    """A sentence for levels that did not settle, or None when all did."""
    bad = frame[~frame["settled"].astype(bool)]
    if bad.empty:
        return None
    levels = ", ".join(f"{m} {v:g}" for m, v in zip(bad["load_mode"], bad["load_value"], strict=True))
    return (f"perf_analyzer did not obtain a stable measurement for {levels}: their rows carry "
            "settled=False and the last pass's throughput/mean latency only. On a busy machine use a "
            "fixed request count (request_count=...) or a wider stability_percentage.")


@dataclass
class PerfResult:
    """One perf_analyzer run: the table, and everything needed to check it by hand."""

    frame: pd.DataFrame
    argv: list[str]
    stdout: str
    csv_text: str
    returncode: int
    wall_s: float
    warnings: list[str] = field(default_factory=list)

    @property
    def settled(self) -> bool:
        return bool(self.frame["settled"].astype(bool).all()) if not self.frame.empty else False

    @property
    def command(self) -> str:
        import shlex

        return " ".join(shlex.quote(a) for a in [Path(self.argv[0]).name, *self.argv[1:]])


def _asked_levels(argv: Sequence[str]) -> list[float]:
    for flag in ("--concurrency-range", "--request-rate-range"):
        if flag in argv:
            return load_levels([float(x) for x in argv[list(argv).index(flag) + 1].split(":")])
    return []


def run_perf_analyzer(argv: list[str], label: str, model: str, config: Mapping[str, Any] | str | None = None,
                      load: Mapping[str, Any] | None = None, runner: Runner | None = None,
                      timeout: float = 600.0, csv_path: str | None = None) -> PerfResult:
    """Run ``argv`` through ``runner`` (default: locally with a progress bar) and parse the result.

    Unsettled levels become ``settled=False`` rows plus a warning; a run that
    produced no row at all raises ``PerfAnalyzerError`` with perf_analyzer's output.
    """
    csv_path = csv_path or argv[argv.index("-f") + 1]
    runner = runner or local_runner(levels=len(_asked_levels(argv)) or None)
    out = runner(list(argv), csv_path, timeout)
    frame = parse_perf_csv(out.csv_text, label, model, config, load, out.stdout)
    if frame.empty:
        errors = [line for line in out.stdout.splitlines() if line.startswith(("Error", "error", "Failed"))]
        raise PerfAnalyzerError(f"perf_analyzer produced no measurement (exit {out.returncode}): "
                                + ("; ".join(errors) if errors else out.stdout[-3000:]))
    notes = []
    if (message := unsettled_message(frame)):
        notes.append(message)
    asked = _asked_levels(argv)
    missing = [v for v in asked if not any(abs(v - x) < 1e-6 for x in frame["load_value"])]
    if missing:
        notes.append(f"levels {', '.join(f'{v:g}' for v in missing)} were not measured: perf_analyzer "
                     "stops at the first level that does not settle")
    for note in notes:
        warnings.warn(note, UnsettledWarning, stacklevel=2)
    return PerfResult(frame, list(argv), out.stdout, out.csv_text, out.returncode, out.wall_s, notes)


def perf(model: str, url: str, label: str, *, config: Mapping[str, Any] | str | None = None,
         runner: Runner | None = None, timeout: float = 600.0, workdir: Path | None = None,
         **options: Any) -> PerfResult:
    """Build the command (``options`` as for ``perf_analyzer_argv``), run it, parse it."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="perf-"))
    workdir.mkdir(parents=True, exist_ok=True)
    csv_path = options.pop("csv_path", None) or str(workdir / f"{model}-{int(time.time() * 1000)}.csv")
    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)  # perf_analyzer does not make it
    options.setdefault("binary", perf_analyzer_binary())
    argv = perf_analyzer_argv(model, url, csv_path=csv_path, **options)
    load = {"batch_size": options.get("batch", 1),
            "distribution": options.get("distribution", "constant") if options.get("request_rate") else None,
            "protocol": options.get("protocol", "http")}
    return run_perf_analyzer(argv, label, model, config, load, runner, timeout, csv_path)


# ---------------------------------------------------------------- input data
def make_input_data(jpeg_paths: Path | Sequence[Path], out_json: Path,
                    input_name: str = "INPUT_IMAGE") -> Path:
    """perf_analyzer input data for food_classifier: base64 text of each image file, as Flask sends it.

    Several images make several entries; perf_analyzer cycles through them.
    """
    import base64

    paths = [jpeg_paths] if isinstance(jpeg_paths, str | Path) else list(jpeg_paths)
    data = [{input_name: [base64.b64encode(Path(p).read_bytes()).decode("ascii")]} for p in paths]
    out_json = Path(out_json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps({"data": data}))
    return out_json


def make_tensor_input_data(jpeg_paths: Path | Sequence[Path], out_json: Path,
                           input_name: str = "input") -> Path:
    """perf_analyzer input data for food_classifier_onnx: the preprocessed FP32 [3,224,224] tensor.

    Stored as base64 of the little-endian float32 bytes (exact, and 4× smaller than JSON numbers).
    """
    import base64

    from servelab.core.preprocess import preprocess_bytes

    paths = [jpeg_paths] if isinstance(jpeg_paths, str | Path) else list(jpeg_paths)
    data = []
    for p in paths:
        tensor = preprocess_bytes(Path(p).read_bytes()).astype("<f4")
        data.append({input_name: {"b64": base64.b64encode(tensor.tobytes()).decode("ascii"),
                                  "shape": list(tensor.shape)}})
    out_json = Path(out_json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps({"data": data}))
    return out_json

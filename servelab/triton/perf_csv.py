"""perf_analyzer's output as data: its ``-f`` CSV (with ``--verbose-csv`` and ``--collect-metrics``)
and its per-level stdout, parsed into one row per load level with the lab's column names.

A level perf_analyzer could not settle is missing from its CSV; ``parse_perf_csv`` then keeps a
row with ``settled=False`` from the stdout's last pass, and ``unsettled_message`` says what to change.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pandas as pd

from servelab.core.notices import LabWarning
from servelab.results.schema import relative_spread

# perf_analyzer's stdout: a level's header, and each measurement pass under it
LEVEL_RE = re.compile(r"^\s*(Request concurrency|Request Rate):\s*([\d.]+)\s*(?:$|inference requests)")
PASS_RE = re.compile(r"Pass \[(\d+)\] throughput: ([\d.]+) infer/sec\. Avg latency: (\d+) usec")

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
                  "server_compute_infer_ms", "server_compute_output_ms", "settled", "throughput_spread",
                  "latency_spread", "config"]


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


class UnsettledWarning(LabWarning):
    """A load level did not give a stable measurement (shown in a notebook as one plain line)."""


# perf_analyzer judges stability on its last three windows and reports their average
STABILITY_WINDOWS = 3


def parse_levels(stdout: str) -> list[dict[str, Any]]:
    """Per load level in perf_analyzer's -v output: settled?, last pass throughput and mean latency,
    and the spread of the last windows (``throughput_spread``/``latency_spread``: (max − min) / mean,
    None with a single window, as with ``--request-count``)."""
    levels: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        if (m := LEVEL_RE.match(line)):
            mode = "concurrency" if m.group(1) == "Request concurrency" else "request_rate"
            levels.append({"load_mode": mode, "load_value": float(m.group(2)), "settled": True,
                           "passes": 0, "throughput": math.nan, "avg_latency_us": math.nan,
                           "windows": []})
        elif levels and (m := PASS_RE.search(line)):
            levels[-1].update(passes=int(m.group(1)), throughput=float(m.group(2)),
                              avg_latency_us=float(m.group(3)))
            levels[-1]["windows"].append((float(m.group(2)), float(m.group(3))))
        elif levels and line.startswith("Failed to obtain stable measurement"):
            levels[-1]["settled"] = False
    for level in levels:
        last = level.pop("windows")[-STABILITY_WINDOWS:]
        level["throughput_spread"] = relative_spread(t for t, _ in last)
        level["latency_spread"] = relative_spread(lat for _, lat in last)
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


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """``frame.to_dict("records")``, typed with the str column names these frames have.

    pandas-stubs type the keys as Hashable; perf_analyzer's CSV headers and our columns are str.
    """
    return cast("list[dict[str, Any]]", frame.to_dict("records"))


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
    for record in records(raw):
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
    levels = parse_levels(stdout)
    for level in levels:
        if level["settled"] or (level["load_mode"], level["load_value"]) in seen:
            continue
        rows.append({"load_mode": level["load_mode"], "load_value": level["load_value"],
                     "throughput_infer_s": level["throughput"],
                     "latency_avg_ms": _ms(level["avg_latency_us"]), "settled": False})
    for row in rows:  # each level's window-to-window spread, the noise its verdicts allow for
        same = [lv for lv in levels if lv["load_mode"] == row["load_mode"]
                and abs(lv["load_value"] - row["load_value"]) < 1e-6]
        row["throughput_spread"] = same[-1]["throughput_spread"] if same else None
        row["latency_spread"] = same[-1]["latency_spread"] if same else None
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
    levels = ", ".join(f"{m.replace('_', ' ')} {v:g}"
                       for m, v in zip(bad["load_mode"], bad["load_value"], strict=True))
    models = ", ".join(sorted({str(m) for m in bad["model"]})) + " at " if "model" in bad else ""
    rows, them = ("its row carries", "it") if len(bad) == 1 else ("their rows carry", "them")
    # the notebooks' parameter for this kind of level: rate levels have their own criterion
    rated = set(bad["load_mode"].astype("str")) == {"request_rate"}
    wider = "rate_stability_pct" if rated else "stability_pct"
    return (f"perf_analyzer did not obtain a stable measurement for {models}{levels}: {rows} "
            f"settled=False and the last pass's throughput and mean latency. To settle {them} on a busy "
            "machine, give each window more requests, accept a wider spread or measure one fixed "
            f"window (in a notebook: the parameters window_requests, {wider}, settle='fixed'; in perf(): "
            "measurement_request_count, stability_percentage, request_count).")

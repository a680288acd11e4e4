"""perf_analyzer's --collect-metrics GPU figures → the results' GPU columns (no servers needed).

The CSV text is what perf_analyzer 2.51 writes with ``--verbose-csv
--collect-metrics``: the header is copied from a real run against the local
Triton; the GPU cells follow ``ReportWriter::WriteGpuMetrics`` (one
``<uuid>:<value>;`` per GPU, ordered by UUID; utilisation a 0–1 fraction,
power in W, memory in bytes; empty cells without a GPU).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from servelab.results.schema import normalise_triton
from servelab.triton.experiments import gpu_utilisation, with_gpu_columns
from servelab.triton.perf_csv import parse_gpu_field, parse_perf_csv, perf_gpu_columns

HEADER = ("Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
          "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,"
          "p90 latency,p95 latency,p99 latency,Avg latency,request/response,response wait,"
          "Avg GPU Utilization,Avg GPU Power Usage,Max GPU Memory Usage,Total GPU Memory")
TIMINGS = "4,412.5,1517,1016,368,135,9351,113,0,9893,12533,17202,64954,12503,1517,10963"
A = "GPU-9d2f0c4e-1111-2222-3333-444455556666"  # sorts first: perf_analyzer lists it first
B = "GPU-c1a0b7d2-7777-8888-9999-000011112222"
P100_BYTES = 17070817280  # 16280 MiB


def _csv(gpu_cells: str, header: str = HEADER, timings: str = TIMINGS) -> str:
    return f"{header}\n{timings},{gpu_cells}\n" if gpu_cells is not None else f"{header}\n{timings}\n"


def _row(text: str) -> dict:
    frame = parse_perf_csv(text, "x", "food_classifier_onnx")
    assert len(frame) == 1
    return frame.iloc[0].to_dict()


def _nan_or_none(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def test_one_gpu_in_percent_watts_and_mib() -> None:
    row = _row(_csv(f"{A}:0.833333;,{A}:31.52;,{A}:1073741824;,{A}:{P100_BYTES};"))
    assert row["perf_gpu_count"] == 1 and row["perf_gpu0_uuid"] == A
    assert row["perf_gpu0_util_mean_pct"] == 83.3  # a 0–1 fraction in the CSV
    assert row["perf_gpu0_power_mean_w"] == 31.5
    assert row["perf_gpu0_mem_max_mib"] == 1024.0
    assert row["perf_gpu0_mem_total_mib"] == 16280.0
    assert row["perf_gpu_util_pct"] == 83.3 and row["perf_gpu_power_w"] == 31.5
    assert row["perf_gpu_mem_max_mib"] == 1024.0
    assert row["Avg GPU Utilization"] == f"{A}:0.833333;"  # perf_analyzer's own cell kept as written
    assert row["throughput_infer_s"] == 412.5 and row["latency_avg_ms"] == pytest.approx(12.503)


def test_two_gpus_mean_total_and_peak() -> None:
    row = _row(_csv(f"{A}:0.83;{B}:0.1;,{A}:120.5;{B}:30;,{A}:2147483648;{B}:1e+09;,"
                    f"{A}:{P100_BYTES};{B}:{P100_BYTES};"))
    assert row["perf_gpu_count"] == 2
    assert (row["perf_gpu0_uuid"], row["perf_gpu1_uuid"]) == (A, B)
    assert (row["perf_gpu0_util_mean_pct"], row["perf_gpu1_util_mean_pct"]) == (83.0, 10.0)
    assert row["perf_gpu_util_pct"] == 46.5  # mean over GPUs, like gpu_util_pct
    assert row["perf_gpu_power_w"] == 150.5  # the node's GPUs together
    assert row["perf_gpu1_mem_max_mib"] == 953.7  # scientific notation read too
    assert row["perf_gpu_mem_max_mib"] == 2048.0  # the fullest GPU


def test_without_metrics_columns_there_are_no_gpu_columns() -> None:
    plain = HEADER.rsplit(",Avg GPU Utilization", 1)[0]
    row = _row(_csv(None, header=plain))
    assert not [k for k in row if "gpu" in k.lower()]


def test_a_cpu_host_gives_empty_cells_and_no_gpu_figures() -> None:
    # the real row perf_analyzer 2.51 wrote against a CPU-only Triton (no nv_gpu_* metrics)
    row = _row(_csv(",,,"))
    assert not [k for k in row if k.startswith("perf_gpu")]
    assert all(_nan_or_none(row[c]) for c in ("Avg GPU Utilization", "Total GPU Memory"))
    merged = gpu_utilisation(row, {"gpu_count": 0})
    assert merged == {"gpu_util_source": None}


def test_missing_and_partial_figures_are_none_never_zero() -> None:
    # utilisation for both GPUs, power for one, memory columns absent altogether
    header = HEADER.rsplit(",Max GPU Memory Usage", 1)[0]
    row = _row(_csv(f"{A}:0.5;{B}:0.25;,{B}:40;", header=header))
    assert row["perf_gpu_count"] == 2
    assert _nan_or_none(row["perf_gpu0_power_mean_w"]) and row["perf_gpu1_power_mean_w"] == 40.0
    assert _nan_or_none(row["perf_gpu0_mem_max_mib"]) and _nan_or_none(row["perf_gpu_mem_max_mib"])
    assert row["perf_gpu_power_w"] == 40.0 and row["perf_gpu_util_pct"] == 37.5


@pytest.mark.parametrize("cell, expected", [
    (f"{A}:0.83;{B}:0.1;", {A: 0.83, B: 0.1}),
    (f"{A}:0.83", {A: 0.83}),  # no trailing ';'
    ("", {}), (None, {}), (float("nan"), {}),
    (f"{A}:;{B}:x;:0.5;garbage;{A}:0.2;", {A: 0.2}),  # unreadable entries are skipped, not zeroed
    (f"{A}:nan;", {}),
])
def test_cell_parsing(cell, expected) -> None:
    assert parse_gpu_field(cell) == expected


def test_gpus_are_numbered_like_nvml_when_uuids_are_known() -> None:
    record = {"Avg GPU Utilization": f"{A}:0.83;{B}:0.1;"}
    numbered = perf_gpu_columns(record, order=[B, A])  # NVML index 0 is B
    assert numbered["perf_gpu0_uuid"] == B and numbered["perf_gpu0_util_mean_pct"] == 10.0
    assert perf_gpu_columns(record)["perf_gpu0_uuid"] == A  # perf_analyzer's own order: by UUID


NVML = {"gpu_count": 2, "gpu0_util_mean_pct": 12.0, "gpu0_util_max_pct": 30.0, "gpu0_mem_max_mib": 900.0,
        "gpu0_uuid": B, "gpu1_util_mean_pct": 80.0, "gpu1_util_max_pct": 95.0, "gpu1_mem_max_mib": 2000.0,
        "gpu1_uuid": A, "cpu_mean_pct": 40.0}
TWO_GPUS = _csv(f"{A}:0.83;{B}:0.1;,{A}:120;{B}:30;,{A}:2147483648;{B}:1073741824;,"
                f"{A}:{P100_BYTES};{B}:{P100_BYTES};")


def _measured(util: dict) -> pd.DataFrame:
    """What experiments.measure records for one level: perf's row, the samplers' summary, merged."""
    frame = parse_perf_csv(TWO_GPUS, "x", "food_classifier_onnx")
    for key, value in util.items():
        frame[key] = [value] * len(frame)
    return with_gpu_columns(frame, util)


def test_nvml_stays_the_gpu_figure_and_perf_analyzer_sits_beside_it() -> None:
    row = _measured(NVML).iloc[0]
    assert row["gpu_util_source"] == "nvml"
    assert (row["gpu0_util_mean_pct"], row["gpu1_util_mean_pct"]) == (12.0, 80.0)
    # perf_analyzer's GPUs numbered like NVML's: gpu0 is B for both
    assert row["perf_gpu0_uuid"] == B and row["perf_gpu0_util_mean_pct"] == 10.0
    assert row["perf_gpu1_util_mean_pct"] == 83.0 and row["perf_gpu_util_pct"] == 46.5
    report = normalise_triton(_measured(NVML)).iloc[0]
    assert report["gpu_util_pct"] == 46.0  # NVML's mean (12, 80)


def test_perf_analyzer_fills_the_gpu_columns_when_nvml_has_none() -> None:
    row = _measured({"gpu_count": 0, "cpu_mean_pct": 40.0}).iloc[0]
    assert row["gpu_util_source"] == "perf_analyzer" and row["gpu_count"] == 2
    assert (row["gpu0_util_mean_pct"], row["gpu1_util_mean_pct"]) == (83.0, 10.0)
    assert (row["gpu0_mem_max_mib"], row["gpu1_mem_max_mib"]) == (2048.0, 1024.0)
    assert row["gpu0_uuid"] == A
    report = normalise_triton(_measured({"gpu_count": 0})).iloc[0]
    assert report["gpu_util_pct"] == 46.5 == report["perf_gpu_util_pct"]


def test_a_cpu_run_reports_no_gpu_utilisation() -> None:
    frame = parse_perf_csv(_csv(",,,"), "x", "food_classifier_onnx")
    frame["gpu_count"] = 0
    merged = with_gpu_columns(frame, {"gpu_count": 0, "cpu_mean_pct": 40.0})
    assert merged.iloc[0]["gpu_count"] == 0
    assert not [c for c in merged if c.startswith(("perf_gpu", "gpu0"))]
    value = normalise_triton(merged).iloc[0]["gpu_util_pct"]
    assert _nan_or_none(value)  # absent, never 0


def test_each_level_records_the_spread_of_its_last_three_windows() -> None:
    """perf_analyzer judges stability on its last three windows: their spread is the level's noise;
    a level measured in one window (--request-count) has none."""
    stdout = ("Request concurrency: 4\n"
              "  Pass [1] throughput: 300 infer/sec. Avg latency: 20000 usec (std 1 usec). \n"
              "  Pass [2] throughput: 400 infer/sec. Avg latency: 10000 usec (std 1 usec). \n"
              "  Pass [3] throughput: 440 infer/sec. Avg latency: 9000 usec (std 1 usec). \n"
              "  Pass [4] throughput: 360 infer/sec. Avg latency: 11000 usec (std 1 usec). \n")
    row = parse_perf_csv(_csv(",,,"), "x", "m", stdout=stdout).iloc[0]
    assert row["throughput_spread"] == pytest.approx((440 - 360) / 400)  # passes 2-4, not the cold first
    assert row["latency_spread"] == pytest.approx((11000 - 9000) / 10000)
    one = parse_perf_csv(_csv(",,,"), "x", "m", stdout=stdout.split("  Pass [2]")[0]).iloc[0]
    assert one["throughput_spread"] is None or math.isnan(one["throughput_spread"])

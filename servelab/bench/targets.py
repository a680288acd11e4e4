"""The services' speed targets: each bound computed from the model alone (``model.py``), beside the figure.

``fastapi_all`` times the model, benchmarks each local service, times the model again and checks
``speed_targets``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from servelab.bench.client import LATENCY_COLUMNS, STAGE_TABLE, bench_fastapi, format_table
from servelab.bench.model import RAW_COLUMNS, bracket_raw, ceiling, raw_figure, run_raw


def speed_targets(raw: Sequence[dict[str, Any]], onnx: dict[str, dict[str, Any]],
                  pt: dict[str, dict[str, Any]], cores: int) -> list[dict[str, Any]]:
    """The services' speed targets, each with its bound (from this run's raw timings), the figure, pass/fail.

    ``onnx`` and ``pt`` map "sequential"/"concurrent" to a result of ``run_*``.
    """
    pre = raw_figure(raw, "preprocess")
    ort1, pt1 = raw_figure(raw, "onnxruntime"), raw_figure(raw, "pytorch")
    top = ceiling(raw, "onnx", cores)
    onnx_rps = onnx["concurrent"]["throughput_rps"]
    targets = [
        ("FastAPI-ONNX 16 clients throughput ≥ 0.9 × ceiling (req/s)", onnx_rps, 0.9 * top, ">="),
        ("FastAPI-ONNX 16 clients p99 ≤ 1.5 × 16 / throughput (ms)", onnx["concurrent"]["p99_ms"],
         1.5 * onnx["concurrent"]["concurrency"] / onnx_rps * 1000.0, "<="),
        ("FastAPI-PT 16 clients throughput ≥ 0.9 × raw PT batch-1 (req/s)",
         pt["concurrent"]["throughput_rps"], 0.9 * 1000.0 / pt1, ">="),
        ("FastAPI-ONNX sequential p50 ≤ 1.3 × (ORT batch 1 + preprocess) (ms)",
         onnx["sequential"]["median_ms"], 1.3 * (ort1 + pre), "<="),
        ("FastAPI-PT sequential p50 ≤ 1.3 × (PT batch 1 + preprocess) (ms)",
         pt["sequential"]["median_ms"], 1.3 * (pt1 + pre), "<="),
    ]
    rows = []
    for name, measured, bound, op in targets:
        ok = measured >= bound if op == ">=" else measured <= bound
        rows.append({"target": name, "measured": measured, "bound": bound, "pass": ok})
    rows.append({"target": "ceiling = 1 / (ORT ms/img at its fastest batch + preprocess ms/img / cores) "
                           "(req/s)", "measured": top, "bound": None, "pass": None})
    return rows


def fastapi_all(sequential: int, concurrent: int, concurrency: int, min_seconds: float) -> dict[str, Any]:
    """Raw timings, each local service in turn (started and stopped here), raw again, then the targets."""
    from servelab.core.cpu import cpu_cores
    from servelab.targets.services import start_fastapi

    before = run_raw(min_seconds=min_seconds)
    print(format_table(before, RAW_COLUMNS))
    services: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in ("onnx", "pt"):
        with start_fastapi(kind) as service:
            print(f"benchmarking fastapi_{kind} at {service.url}")
            services[kind] = bench_fastapi(service.url, sequential, concurrent, concurrency)
            for result in services[kind].values():
                result["service"] = f"fastapi_{kind}"
        print(format_table(list(services[kind].values()), ("service", *LATENCY_COLUMNS)))
        print(format_table(list(services[kind].values()), ("service", *STAGE_TABLE)))
    raw = bracket_raw(before, run_raw(min_seconds=min_seconds))
    print("the model alone, before and after the services (the bounds use the mean):")
    print(format_table(raw, ("what", "batch", "ms_before", "ms_after", "ms_per_image")))
    targets = speed_targets(raw, services["onnx"], services["pt"], cpu_cores())
    return {"raw": raw, "services": services, "targets": targets}

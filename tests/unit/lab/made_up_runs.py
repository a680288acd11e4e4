"""Made-up run data for the rules tests: small tables shaped as the lab records them, and ways to pick a
verdict from a list."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from servelab.lab import step10_report as step10
from servelab.report.effects import Check
from servelab.results.schema import RunData

EMPTY = pd.DataFrame()


def data(fastapi: list[dict] | None = None, triton: list[dict] | None = None) -> RunData:
    return RunData(pd.DataFrame(fastapi or []), EMPTY, pd.DataFrame(triton or []))


def status(checks: list[Check], words: str) -> str:
    """The status of the one check whose effect mentions ``words``."""
    [found] = [c for c in checks if words in c.effect]
    return found.status


def fastapi_rows(pt: tuple[float, float], onnx: tuple[float, float]) -> list[dict]:
    return [{"backend": b, "mode": m, "median_ms": v, "concurrency": 16 if m == "concurrent" else 1}
            for b, (seq, conc) in (("pt", pt), ("onnx", onnx))
            for m, v in (("sequential", seq), ("concurrent", conc))]


def sweep(p50: tuple[float, float], infer: tuple[float, float], queue_hi: float,
          step: str = "python_concurrency") -> list[dict]:
    return [{"step": step, "concurrency": c, "p50_ms": p, "compute_infer_ms": i, "queue_ms": q,
             "throughput": 50.0, "model": "food_classifier"}
            for c, p, i, q in ((1, p50[0], infer[0], 0.5), (16, p50[1], infer[1], queue_hi))]


def scaling(throughputs: list[float], threads: tuple[float, float] | None = None) -> list[dict]:
    rows = [{"step": "instance_scaling", "label": f"{i} instances", "throughput": t, "p50_ms": 10,
             "p99_ms": 20} for i, t in enumerate(throughputs, 1)]
    if threads:
        rows += [{"step": "threads_lesson", "thread_setting": name, "throughput": t}
                 for name, t in zip(("default", "split"), threads, strict=True)]
    return rows


def batching(constant: float, poisson: float, off: float, on: float, counts: dict[int, int],
             low: tuple[float, float] = (20, 30), spread: float | None = None) -> list[dict]:
    """Arrivals at rate 30, then batching off/on at rates 20 (p99 ``low``) and 60 (p99 ``off``/``on``)."""
    noise = {"latency_spread": spread}
    return [{"step": "arrivals", "distribution": "constant", "p99_ms": constant, "rate": 30, **noise},
            {"step": "arrivals", "distribution": "poisson", "p99_ms": poisson, "rate": 30, **noise},
            {"step": "dynamic_batching", "dynamic_batching": False, "rate": 20, "p99_ms": low[0], **noise},
            {"step": "dynamic_batching", "dynamic_batching": False, "rate": 60, "p99_ms": off,
             "batch_counts": json.dumps({"1": 100}), **noise},
            {"step": "dynamic_batching", "dynamic_batching": True, "rate": 20, "p99_ms": low[1], **noise},
            {"step": "dynamic_batching", "dynamic_batching": True, "rate": 60, "p99_ms": on,
             "batch_counts": json.dumps({str(k): v for k, v in counts.items()}), **noise}]


def write_run(folder: Path, fastapi: list[dict], triton: list[dict]) -> Path:
    folder.mkdir(parents=True)
    for name, rows in (("fastapi", fastapi), ("triton", triton)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def triton_run(triton: list[dict]) -> RunData:
    return RunData(EMPTY, EMPTY, pd.DataFrame(triton))


def one(checks: list, words: str):  # type: ignore[no-untyped-def]
    [found] = [c for c in checks if words in c.effect]
    return found


def instance_rows(default: dict, split: dict) -> list[dict]:
    """The instance steps (1, 2, 4 instances) and the threads lesson, as 05 records them."""
    rows = [{"step": "instance_scaling", "label": f"{n} on the CPU", "instances": f"{n}xKIND_CPU",
             "threads": 1, "throughput": t, "throughput_spread": 0.05, "settled": True}
            for n, t in ((1, 31.6), (2, 29.5), (4, 17.8))]
    rows += [{"step": "threads_lesson", "instances": "2xKIND_CPU", "throughput_spread": 0.05, **default},
             {"step": "threads_lesson", "instances": "2xKIND_CPU", "throughput_spread": 0.05, **split}]
    return rows


def backends() -> list[dict]:
    """The Python backend's and the ONNX backend's sweeps, then two ONNX instances, at 1, 8 and 16."""
    rows = []
    sweeps = (("python_vs_onnx", "food_classifier", "1xKIND_CPU", (34.2, 30.0, 29.0)),
              ("onnx_backend", "food_classifier_onnx", "1xKIND_CPU", (9.9, 11.0, 11.5)),
              ("onnx_scaling", "food_classifier_onnx", "2xKIND_CPU", (9.8, 17.4, 17.9)))
    for step, model, instances, infer in sweeps:
        for c, ms in zip((1, 8, 16), infer, strict=True):
            rows.append({"step": step, "model": model, "instances": instances, "concurrency": c,
                         "label": f"{model} c={c}", "compute_infer_ms": ms, "queue_ms": 5.0 * c,
                         "throughput": 1000 / ms, "p50_ms": ms * c, "p99_ms": ms * c * 1.5})
    return rows


def scaling_run(*rows: dict, series: list[dict] | None = None) -> RunData:
    return RunData(EMPTY, EMPTY, EMPTY, EMPTY, pd.DataFrame(list(rows)), pd.DataFrame(series or []))


def samples(label: str, cpu: float, start: float = 4.0, serve: float = 8.0, answered: float = 40.0,
            rate: float = 67.2, serving: float | None = None) -> list[dict]:
    """A step load's samples, one a second: 3 s low, 12 s high, 5 s low; a replica starting from ``start``
    to ``serve`` s after the step, the machine's CPU at ``cpu`` % throughout. ``answered`` a second during
    the high load (``serving`` once the added replica serves, when given); the backlog (in flight) grows by
    what is offered beyond what is answered."""
    out, in_flight = [], 2.0
    for t in range(1, 21):
        phase = 0 if t <= 3 else 1 if t <= 15 else 2
        since = t - 3
        scaled = since >= serve and label.startswith("autoscaled")
        ok = (serving if scaled and serving is not None else answered) if phase == 1 else 28.0
        offered = rate if phase == 1 else rate / 2.4
        in_flight = max(2.0, in_flight + offered - ok)
        out.append({"run": label, "t": float(t), "interval_s": 1.0, "phase": phase, "rate": offered, "ok": ok,
                    "replicas": 2 if scaled else 1,
                    "starting": int(start <= since < serve and label.startswith("autoscaled")),
                    "cpu_util_pct": cpu, "in_flight": in_flight, "ongoing_per_replica": 1.0, "p50_ms": 20.0,
                    "p99_ms": 40.0})
    return out


def step_row(label: str, policy: str, **values: object) -> dict:
    return {"kind": "step", "label": label, "policy": policy, "replicas_max": 1, "sample_interval_s": 1.0,
            "high_starts_s": 3.0, "high_seconds": 12.0, "cpu_count": 2, **values}


def step_load_run(cpu: float) -> RunData:
    """The step loads issue 41 read (2-core CPU, quick preset): autoscaled on queue depth p99 4,775 ms,
    backlog 249 → 241; on utilisation p99 2,948 ms; one fixed replica p99 1,460 ms, backlog 102; two
    fixed replicas beside them. ``cpu``: the machine's CPU while the second replica started."""
    queue = step_row("autoscaled 1-2 (queue depth)", "queue depth", replicas_max=2, decided_after_s=4.0,
                     scale_up_after_s=8.0, upscale_delay_s=1.0, look_back_period_s=1.0,
                     metrics_interval_s=0.5, backlog_at_up=249, backlog_end_high=241,
                     backlog_end_high_spread=0.03, p99_ms=4775.0, replica_seconds=30.0)
    util = step_row("autoscaled 1-2 (utilisation)", "utilisation", replicas_max=2, decided_after_s=5.0,
                    scale_up_after_s=9.0, backlog_end_high=180, backlog_end_high_spread=0.03, p99_ms=2948.0,
                    replica_seconds=29.0)
    one = step_row("fixed 1", "fixed", backlog_end_high=102, backlog_end_high_spread=0.05, p99_ms=1460.0,
                   replica_seconds=20.0)
    two = step_row("fixed 2", "fixed", replicas_max=2, backlog_end_high=20, backlog_end_high_spread=0.1,
                   p99_ms=700.0, replica_seconds=40.0)
    series = [*samples(queue["label"], cpu, serving=62.0), *samples(util["label"], cpu, start=5.0, serve=9.0),
              *samples("fixed 1", cpu, answered=55.0), *samples("fixed 2", cpu, answered=66.0)]
    return scaling_run(queue, util, one, two, series=series)


AUTOSCALING = ("starts a replica", "the backlog grows more slowly", "than on one fixed replica",
               "no later than", "replica-seconds")


def autoscaling_verdicts(run: RunData) -> list:
    """The model's autoscaling verdicts (not the device stand-in's)."""
    return [c for c in step10.rules(run) if any(words in c.effect for words in AUTOSCALING)
            and "stand-in" not in c.effect]

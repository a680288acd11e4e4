"""Which configuration of a FastAPI service gets closest to the model's ceiling, and where the rest goes.

``compare(kind, configs, rounds=3)`` alternates the model alone (``model.run_raw``: the ceiling)
with the local service under ``concurrency`` clients in each configuration (its settings, e.g.
``{"WORKERS": "2"}``), round after round, each round in the other order (a shared machine
drifts), and times the model once more at the end. Each service run is set against the mean of the
ceilings timed just before and after it. Per configuration it reports the median share of the
ceiling over the rounds (with its range), the throughput, and the mean of each stage of its
requests (``servelab.serving.stages``); ``best`` names the one closest to the ceiling.
"""
# why: docs/decisions/2026-11-28-fastapi-stages-and-workers.md

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from servelab.bench.client import format_table, run_concurrent
from servelab.bench.model import ENGINES, ceiling, run_raw
from servelab.serving.stages import OUTSIDE_COLUMN, SERVER_COLUMN, STAGE_COLUMNS

SUMMARY_COLUMNS = ("service", "config", "rounds", "throughput_rps", "ceiling_rps", "of_ceiling",
                   "of_ceiling_min", "of_ceiling_max")
BREAKDOWN_COLUMNS = ("config", "mean_ms", *STAGE_COLUMNS, OUTSIDE_COLUMN, "cpu_util_pct")


def label(config: Mapping[str, str]) -> str:
    """A configuration as the tables name it: ``WORKERS=2 PREPROCESS_WORKERS=2`` (``default``: none)."""
    return " ".join(f"{key}={value}" for key, value in config.items()) or "default"


def parse_config(text: str) -> dict[str, str]:
    """``"WORKERS=1 PREPROCESS_WORKERS=2"`` → its settings; ``ValueError`` naming what is not KEY=VALUE."""
    items = text.replace(",", " ").split()
    bad = [item for item in items if "=" not in item or not item.split("=", 1)[0]]
    if bad or not items:
        raise ValueError(f"a configuration is KEY=VALUE settings, e.g. 'WORKERS=1 PREPROCESS_WORKERS=2'; "
                         f"got {text!r}")
    return dict(item.split("=", 1) for item in items)


def _mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values)) if values else float("nan")


def summarise_runs(kind: str, runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration, in first-seen order: the median share of the ceiling over its runs (each run a
    ``run_concurrent`` result with ``config`` and ``ceiling_rps`` added), and its means."""
    rows = []
    for config in dict.fromkeys(r["config"] for r in runs):
        mine = [r for r in runs if r["config"] == config]
        shares = [r["throughput_rps"] / r["ceiling_rps"] for r in mine]
        row: dict[str, Any] = {
            "service": f"fastapi_{kind}", "config": config, "rounds": len(mine),
            "throughput_rps": statistics.median(r["throughput_rps"] for r in mine),
            "ceiling_rps": statistics.median(r["ceiling_rps"] for r in mine),
            "of_ceiling": statistics.median(shares), "of_ceiling_min": min(shares),
            "of_ceiling_max": max(shares)}
        for column in ("mean_ms", *STAGE_COLUMNS, SERVER_COLUMN, OUTSIDE_COLUMN, "cpu_util_pct"):
            values = [float(r[column]) for r in mine if r.get(column) is not None]
            row[column] = _mean(values)
        rows.append(row)
    return rows


def best(summary: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The configuration with the highest median share of the ceiling."""
    return max(summary, key=lambda row: row["of_ceiling"])


def compare(kind: str = "onnx", configs: Sequence[Mapping[str, str]] = ({"WORKERS": "1"}, {"WORKERS": "2"}),
            rounds: int = 3, requests: int = 1000, concurrency: int = 16, min_seconds: float = 3.0,
            progress: bool = True) -> dict[str, Any]:
    """Alternate the model alone and the service in each configuration; the runs, the summary, the best."""
    from servelab.core.cpu import cpu_cores
    from servelab.core.monitor import Utilisation
    from servelab.targets.services import start_fastapi

    cores = cpu_cores()
    timed = [run_raw(backends=(kind,), min_seconds=min_seconds)]
    runs: list[dict[str, Any]] = []
    for round_ in range(rounds):
        order = list(configs) if round_ % 2 == 0 else list(reversed(configs))
        measured = []
        for config in order:
            with start_fastapi(kind, env=config) as service, Utilisation() as util:
                result = run_concurrent(service.url, requests, concurrency, progress=progress)
            result.update(config=label(config), round=round_ + 1,
                          cpu_util_pct=util.summary().get("cpu_mean_pct"))
            measured.append(result)
            print(f"round {round_ + 1}: {label(config)}: {result['throughput_rps']:.1f} req/s", flush=True)
        timed.append(run_raw(backends=(kind,), min_seconds=min_seconds))
        around = (ceiling(timed[-2], kind, cores) + ceiling(timed[-1], kind, cores)) / 2
        for result in measured:
            result["ceiling_rps"] = around
        print(f"round {round_ + 1}: ceiling {around:.1f} req/s (the model alone, {ENGINES[kind]}, "
              "before and after)", flush=True)
        runs += measured
    summary = summarise_runs(kind, runs)
    return {"kind": kind, "cores": cores, "configs": [label(c) for c in configs], "raw": timed, "runs": runs,
            "summary": summary, "best": best(summary)}


def report(result: dict[str, Any]) -> str:
    """The comparison as the terminal shows it: shares of the ceiling, the stage breakdown, the best."""
    chosen = result["best"]
    shares = [{**row, **{c: f"{row[c]:.2f}" for c in ("of_ceiling", "of_ceiling_min", "of_ceiling_max")}}
              for row in result["summary"]]
    return "\n".join([
        format_table(shares, SUMMARY_COLUMNS),
        "where a request's time went (mean ms per request; outside_ms: client, network, HTTP server):",
        format_table(result["summary"], BREAKDOWN_COLUMNS),
        f"closest to the ceiling: {chosen['config']}, {chosen['of_ceiling']:.2f} of it "
        f"(median of {chosen['rounds']} rounds, "
        f"{chosen['of_ceiling_min']:.2f}-{chosen['of_ceiling_max']:.2f}), "
        f"{chosen['throughput_rps']:.1f} req/s against {chosen['ceiling_rps']:.1f}"])

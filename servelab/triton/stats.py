"""Triton's own statistics for one run: read before and after, keep the difference.

``/v2/models/<m>/versions/1/stats`` is cumulative since the model loaded, so a
run's numbers are the difference of two snapshots. ``execution_count`` below
``inference_count`` is the evidence that the server batched requests which the
clients sent one by one; ``batch_stats`` says how many executions ran at each
batch size.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

STAGES = ("queue", "compute_input", "compute_infer", "compute_output")


def snapshot(client: Any, model: str, version: str = "1") -> dict[str, Any]:
    """Cumulative statistics of one model version, flattened to plain numbers."""
    raw = client.get_inference_statistics(model, version)
    entries = [s for s in raw.get("model_stats", []) if s.get("name") == model]
    if not entries:
        raise RuntimeError(f"Triton has no statistics for model '{model}' version {version}: is it loaded?")
    return flatten(entries[0])


def flatten(stats: dict[str, Any]) -> dict[str, Any]:
    """One model's entry of a statistics reply (``model_stats[i]``) → plain cumulative numbers."""
    infer = stats.get("inference_stats", {})
    snap: dict[str, Any] = {
        "inference_count": int(stats.get("inference_count", 0)),
        "execution_count": int(stats.get("execution_count", 0)),
        "success_count": int(infer.get("success", {}).get("count", 0)),
        "fail_count": int(infer.get("fail", {}).get("count", 0)),
        "batches": {},
    }
    for stage in STAGES:
        snap[f"{stage}_ns"] = int(infer.get(stage, {}).get("ns", 0))
        snap[f"{stage}_count"] = int(infer.get(stage, {}).get("count", 0))
    for batch in stats.get("batch_stats", []):
        snap["batches"][int(batch["batch_size"])] = int(batch.get("compute_infer", {}).get("count", 0))
    return snap


def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What happened between two snapshots: counts, per-batch-size executions, mean times per request."""
    out: dict[str, Any] = {k: after[k] - before[k] for k in
                           ("inference_count", "execution_count", "success_count", "fail_count")}
    sizes = sorted(set(before["batches"]) | set(after["batches"]))
    batches = {s: after["batches"].get(s, 0) - before["batches"].get(s, 0) for s in sizes}
    out["batch_executions"] = {s: n for s, n in batches.items() if n > 0}
    out["executions_batch_gt1"] = sum(n for s, n in batches.items() if s > 1)
    out["mean_batch_size"] = (out["inference_count"] / out["execution_count"]
                              if out["execution_count"] else float("nan"))
    for stage in STAGES:
        count = after[f"{stage}_count"] - before[f"{stage}_count"]
        nanos = after[f"{stage}_ns"] - before[f"{stage}_ns"]
        out[f"stats_{stage}_ms"] = nanos / count / 1e6 if count else float("nan")
    return out


class RunStats:
    """Filled in when the ``with run_stats(...)`` block ends."""

    def __init__(self) -> None:
        self.before: dict[str, Any] = {}
        self.after: dict[str, Any] = {}
        self.delta: dict[str, Any] = {}


@contextlib.contextmanager
def run_stats(client: Any, model: str, version: str = "1") -> Iterator[RunStats]:
    """``with run_stats(client, m) as s: ...`` → ``s.delta`` holds just that block's statistics."""
    result = RunStats()
    result.before = snapshot(client, model, version)
    yield result
    result.after = settled_snapshot(client, model, version)
    result.delta = delta(result.before, result.after)


def settled_snapshot(client: Any, model: str, version: str = "1",
                     interval_s: float = 0.1, timeout_s: float = 3.0) -> dict[str, Any]:
    """A snapshot read again until two reads ``interval_s`` apart agree (or ``timeout_s`` passes).

    Triton counts a request after the backend's execute returns, which can be
    after its client already holds the reply: one read at the end of a block
    can miss the block's last requests.
    """
    deadline = time.monotonic() + timeout_s
    latest = snapshot(client, model, version)
    while time.monotonic() < deadline:
        time.sleep(interval_s)
        again = snapshot(client, model, version)
        if again == latest:
            break
        latest = again
    return latest


def batch_table(stats_delta: dict[str, Any]) -> Any:
    """Executions per batch size as a small DataFrame (for a notebook cell)."""
    import pandas as pd

    rows = [{"batch_size": s, "executions": n, "inferences": s * n}
            for s, n in sorted(stats_delta.get("batch_executions", {}).items())]
    return pd.DataFrame(rows, columns=["batch_size", "executions", "inferences"])

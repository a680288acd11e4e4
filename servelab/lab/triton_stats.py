"""Triton's statistics API as notebooks 04 and 07 show it: the command, then the reply's counts and
nanosecond totals decoded into milliseconds per request; the change between two reads."""

from __future__ import annotations

from typing import Any

import pandas as pd

SHOWN_STAGES = ("success", "queue", "compute_infer")


def stats_json(triton: Any, name: str) -> dict[str, Any]:
    """``GET /v2/models/<name>/stats`` on ``triton`` (a ``triton_steps.Triton``): print the command, the
    counts, and each stage's total as the reply has it (ns) beside its mean per request in ms; return the
    model's whole entry. Counts are cumulative since the model loaded: ``inference_count`` images,
    ``execution_count`` forward passes, ``batch_stats`` executions per batch size."""
    import httpx

    url = f"http://{triton.url}/v2/models/{name}/stats"
    print(f"$ curl -s {url}")
    reply = httpx.get(url, timeout=30.0, trust_env=False)  # the server's own host: never via a proxy
    if reply.status_code != 200:
        raise RuntimeError(f"{url} answered HTTP {reply.status_code}: {reply.text[:300]} (is {name} loaded?)")
    model = next((m for m in reply.json().get("model_stats", []) if m.get("name") == name), None)
    if model is None:
        raise RuntimeError(f"{url} has no statistics for {name}: is it loaded?")
    print(stats_text(model))
    return model


def stats_text(model: dict[str, Any]) -> str:
    """The lines ``stats_json`` prints for one model's entry of the reply."""
    stages = model.get("inference_stats", {})
    lines = [f"inference_count {model.get('inference_count', 0)}, execution_count "
             f"{model.get('execution_count', 0)} (since the model loaded); times are the reply's totals "
             "in ns:",
             f"  {'stage':<14}{'count':>8}{'total ns':>16}   per request (total / count)"]
    for stage in SHOWN_STAGES:
        count, ns = (int(stages.get(stage, {}).get(k, 0)) for k in ("count", "ns"))
        each = f"{ns / count / 1e6:.2f} ms" if count else "-"
        lines.append(f"  {stage:<14}{count:>8}{ns:>16,}   {each}")
    for batch in model.get("batch_stats", []):
        infer = batch.get("compute_infer", {})
        count, ns = int(infer.get("count", 0)), int(infer.get("ns", 0))
        lines.append(f"  batch_stats: batch size {batch.get('batch_size')}: {count} executions"
                     + (f", compute_infer {ns / count / 1e6:.2f} ms each" if count else ""))
    return "\n".join(lines)


def stats_change(before: dict[str, Any], after: dict[str, Any], say: bool = True) -> pd.DataFrame:
    """What happened between two ``stats_json`` replies: requests, executions, executions per batch size
    (the line saying it printed unless ``say=False``: a later cell reading the same change)."""
    from servelab.triton.stats import batch_table, delta, flatten

    change = delta(flatten(before), flatten(after))
    if say:
        print(f"between the two calls (everything the model ran between them, warm-ups included): "
          f"{change['inference_count']} inferences in {change['execution_count']} executions (mean batch "
          f"size {change['mean_batch_size']:.1f} over them all); "
          f"{change['executions_batch_gt1']} executions carried more than one image")
    return batch_table(change)

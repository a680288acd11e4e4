"""Notebook 10's Triton counterpart of load shedding: the ONNX model behind Triton's dynamic batcher
with and without ``default_queue_policy { max_queue_size, timeout_action: REJECT }``, hit by one burst
of concurrent requests. Measured once per run; what was seen: docs/decisions/2026-11-23-ray-serve.md
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from servelab.lab.params import LabParams
from servelab.lab.tables import record
from servelab.results.schema import SCALING

MODEL = "food_classifier_onnx"


def queue_policy_config(cfg: Any, max_queue_size: int | None, timeout_us: int) -> Any:
    """``cfg`` with dynamic batching on, and with the rejecting queue policy when ``max_queue_size``."""
    from tritonclient.grpc import model_config_pb2 as mc

    out = mc.ModelConfig()
    out.CopyFrom(cfg)
    out.dynamic_batching.SetInParent()
    out.dynamic_batching.ClearField("default_queue_policy")
    if max_queue_size is not None:
        policy = out.dynamic_batching.default_queue_policy
        policy.max_queue_size = max_queue_size
        policy.timeout_action = mc.ModelQueuePolicy.REJECT
        policy.default_timeout_microseconds = timeout_us
    return out


def burst(url: str, requests: int, image: np.ndarray, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """``requests`` single-image requests sent at once; each one's outcome and latency."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    def one(i: int) -> dict[str, Any]:
        client = httpclient.InferenceServerClient(url, network_timeout=timeout_s,
                                                  connection_timeout=timeout_s)
        tensor = httpclient.InferInput("input", [1, *image.shape], "FP32")
        tensor.set_data_from_numpy(image[None].astype(np.float32))
        t = time.perf_counter()
        try:
            client.infer(MODEL, [tensor])
            outcome, message = "ok", ""
        except InferenceServerException as exc:
            outcome, message = "rejected", exc.message()
        finally:
            client.close()
        return {"i": i, "outcome": outcome, "message": message[:200],
                "latency_ms": round((time.perf_counter() - t) * 1000, 1)}

    with ThreadPoolExecutor(requests) as pool:
        return list(pool.map(one, range(requests)))


def measure(p: LabParams, requests: int = 32, max_queue_size: int = 4,
            timeout_us: int = 100_000) -> list[dict[str, Any]]:
    """Bring up the target's Triton with the ONNX model (as 06 and 07 do), send the burst without and
    with the queue policy (each a config change, shown as a diff); one summary row each (recorded with
    the run's scaling rows, kind "triton_queue"). The model's config is put back and Triton stopped."""
    from servelab.core.preprocess import preprocess_bytes
    from servelab.core.samples import sample_paths
    from servelab.lab.stack import open_stack
    from servelab.lab.triton_steps import apply_config, live_config, triton_down, triton_up

    image = preprocess_bytes(Path(sample_paths()[0]).read_bytes())
    stack = open_stack(p)
    rows = []
    try:
        triton = triton_up(stack, [MODEL])
        base = live_config(triton, MODEL)
        try:
            for limit in (None, max_queue_size):
                apply_config(triton, MODEL, queue_policy_config(base, limit, timeout_us))
                burst(triton.url, 2, image)  # warm-up
                rows.append(_summary(burst(triton.url, requests, image), limit, requests))
        finally:
            apply_config(triton, MODEL, base, quiet=True)
    finally:
        triton_down(stack)
    record(SCALING, rows)
    for row in rows:
        print(f"{row['label']}: {row['ok']} answered (p99 {row['p99_ms']} ms), {row['rejected']} refused"
              + "".join(f"; {v['count']} by {cause_words(k, explain=True)}, answered after p99 "
                        f"{v['p99_ms']} ms" for k, v in row["rejected_by"].items()))
    return rows


# Triton's two refusals, by the words of its message: at once when the queue is full, or after the
# waiting limit. Each cause's short name (the report's) and what it means (the notebook's).
CAUSES = {"Exceeds maximum queue size": ("the queue size", "refused on arrival"),
          "Request timeout expired": ("the waiting limit", "refused once it had waited its timeout, and a "
                                      "CPU busy with the burst answers later still")}


def cause_words(message: str, explain: bool = False) -> str:
    """A refusal cause in words: "the queue size" (with ``explain``: "the queue size ('Exceeds maximum
    queue size': refused on arrival)"); a message the lab does not know, quoted."""
    if message not in CAUSES:
        return repr(message)
    name, meaning = CAUSES[message]
    return f"{name} ('{message}': {meaning})" if explain else name


def _summary(answers: list[dict[str, Any]], limit: int | None, requests: int) -> dict[str, Any]:
    ok = [a["latency_ms"] for a in answers if a["outcome"] == "ok"]
    refused = [a["latency_ms"] for a in answers if a["outcome"] == "rejected"]
    message = next((a["message"] for a in answers if a["outcome"] == "rejected"), None)
    by: dict[str, list[float]] = {}
    for a in answers:
        if a["outcome"] == "rejected":
            cause = next((c for c in CAUSES if c in a["message"]), a["message"][:80])
            by.setdefault(cause, []).append(a["latency_ms"])
    return {"kind": "triton_queue", "label": f"Triton queue {'unbounded' if limit is None else limit}",
            "max_queue_size": limit, "requests": requests, "ok": len(ok), "rejected": len(refused),
            "p99_ms": round(float(np.percentile(ok, 99)), 1) if ok else None,
            "rejected_p99_ms": round(float(np.percentile(refused, 99)), 1) if refused else None,
            "message": message,
            "rejected_by": {c: {"count": len(v), "p99_ms": round(float(np.percentile(v, 99)), 1)}
                            for c, v in by.items()}}

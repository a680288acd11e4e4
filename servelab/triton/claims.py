"""Three claims about Triton the lab makes, checked on the local target: ``python -m servelab.triton.claims``.

1. A config change (instance count, dynamic batching) is live within seconds.
2. food_classifier with 2 CPU instances (one forward pass per batch, threads
   shared out among instances) against the plain implementation (one forward
   pass per request, torch's default threads) at concurrency 8.
3. Dynamic batching on the ONNX model at concurrency 16: mean batch size.

Rows go to ``results/triton_claims.csv``; a short summary is printed.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from servelab.results.store import append_rows
from servelab.triton.experiments import configure, measure, show
from servelab.triton.repository import deploy_all
from servelab.triton.server import TritonServer

EXPERIMENT = "triton_claims"
PLAIN = {"EXECUTION": "per_request", "CPU_THREADS": "default"}
TUNED = {"EXECUTION": "batch", "CPU_THREADS": "auto"}


def reload_times(server: TritonServer, rounds: int) -> list[dict[str, Any]]:
    """Seconds from 'apply' to 'confirmed live' for the lab's config changes."""
    rows = []
    for _ in range(rounds):
        for model in ("food_classifier", "food_classifier_onnx"):
            for change, kwargs in (("instances 1->2", {"instances": 2}), ("instances 2->1", {"instances": 1}),
                                   ("dynamic batching on", {"dynamic_batching": True,
                                                            "preferred_batch_sizes": [4, 8],
                                                            "max_queue_delay_us": 1000}),
                                   ("dynamic batching off", {"dynamic_batching": False})):
                result = configure(server, model, show_diff=False, **kwargs)
                rows.append({"claim": "config_live_s", "model": model, "change": change,
                             "seconds_to_live": round(result["seconds_to_live"], 2)})
    return rows


def instances_vs_plain(server: TritonServer, requests: int) -> list[dict[Hashable, Any]]:
    """Throughput and p99 at concurrency 8: plain per-request/default threads vs 2 tuned instances."""
    rows = []
    for label, instances, params in (("plain, 1 instance, default threads", 1, PLAIN),
                                     ("plain, 2 instances, default threads", 2, PLAIN),
                                     ("batched, 1 instance, auto threads", 1, TUNED),
                                     ("batched, 2 instances, auto threads", 2, TUNED)):
        configure(server, "food_classifier", instances=instances, parameters=params, show_diff=False)
        frame = measure(server, "food_classifier", label, concurrency=8, settle="fixed",
                        request_count=requests, warmup_requests=16, experiment=EXPERIMENT,
                        extra={"claim": "instances_vs_plain"})
        print(show(frame).to_string(index=False))
        rows.append(frame.iloc[0].to_dict())
    configure(server, "food_classifier", instances=1, parameters=TUNED, show_diff=False)
    return rows


def dynamic_batching(server: TritonServer, requests: int) -> list[dict[Hashable, Any]]:
    rows = []
    model = "food_classifier_onnx"
    for enabled in (False, True):
        configure(server, model, dynamic_batching=enabled, preferred_batch_sizes=[4, 8] if enabled else (),
                  max_queue_delay_us=1000 if enabled else 0, show_diff=False)
        frame = measure(server, model, f"dynamic batching {'on' if enabled else 'off'}", concurrency=16,
                        settle="fixed", request_count=requests, warmup_requests=16, experiment=EXPERIMENT,
                        extra={"claim": "dynamic_batching"})
        print(show(frame).to_string(index=False))
        rows.append(frame.iloc[0].to_dict())
    configure(server, model, dynamic_batching=False, show_diff=False)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m servelab.triton.claims",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="repeats of the reload timing")
    parser.add_argument("--requests", type=int, default=160, help="requests per perf_analyzer run")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="triton-claims-") as tmp:
        repository = Path(tmp) / "models"
        deploy_all(repository, gpu=False)
        with TritonServer(repository) as server:
            for model in ("food_classifier", "food_classifier_onnx"):
                server.load(model)
            timings = reload_times(server, args.rounds)
            append_rows(EXPERIMENT, timings)
            for row in timings:
                print(f"{row['model']:22s} {row['change']:22s} live in {row['seconds_to_live']:.2f} s")
            compare = instances_vs_plain(server, args.requests)
            batching = dynamic_batching(server, args.requests)
    plain = max(r["throughput_infer_s"] for r in compare if r["label"].startswith("plain"))
    tuned = next(r for r in compare if r["label"] == "batched, 2 instances, auto threads")
    print(f"\nslowest reload: {max(r['seconds_to_live'] for r in timings):.2f} s")
    print(f"2 tuned instances: {tuned['throughput_infer_s']:.1f} infer/s, "
          f"p99 {tuned['latency_p99_ms']:.0f} ms; best plain: {plain:.1f} infer/s "
          f"-> {tuned['throughput_infer_s'] / plain:.2f}x")
    print(f"dynamic batching at concurrency 16: mean batch size {batching[1]['mean_batch_size']:.2f} "
          f"(off: {batching[0]['mean_batch_size']:.2f})")


if __name__ == "__main__":
    main()

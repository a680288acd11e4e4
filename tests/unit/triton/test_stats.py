"""Triton's statistics around a block: the end read waits for counts that land after the replies."""

from __future__ import annotations

from typing import Any

from servelab.triton.stats import run_stats


class LaggingServer:
    """Stands in for tritonclient's ``get_inference_statistics``: counts show up some reads late."""

    def __init__(self) -> None:
        self.counted = 0
        self.pending = 0
        self.reads_until_counted = 0

    def serve(self, requests: int, late_by_reads: int) -> None:
        self.pending += requests
        self.reads_until_counted = late_by_reads

    def get_inference_statistics(self, model: str, version: str) -> dict[str, Any]:
        if self.pending and self.reads_until_counted == 0:
            self.counted += self.pending
            self.pending = 0
        elif self.pending:
            self.reads_until_counted -= 1
        return {"model_stats": [{
            "name": model, "inference_count": self.counted, "execution_count": self.counted,
            "inference_stats": {"success": {"count": self.counted, "ns": 0}},
            "batch_stats": [{"batch_size": 1, "compute_infer": {"count": self.counted}}],
        }]}


def test_requests_counted_after_their_replies_are_in_the_delta() -> None:
    server = LaggingServer()
    with run_stats(server, "food_classifier") as stats:
        server.serve(4, late_by_reads=1)
    assert stats.delta["inference_count"] == 4
    assert stats.delta["success_count"] == 4


def test_a_block_without_requests_reads_zero() -> None:
    server = LaggingServer()
    with run_stats(server, "food_classifier") as stats:
        pass
    assert stats.delta["inference_count"] == 0

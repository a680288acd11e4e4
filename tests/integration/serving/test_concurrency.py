"""Distinct photos sent at once get the answer each gets alone: the FastAPI services under load.

Both services run with the micro-batcher on (``MAX_BATCH`` 8) and two
inference workers, the settings where an answer could land on the wrong
request: a batch's rows handed back in another order, a row of one batch
given to a request of another, two workers sharing a buffer. The eleven
sample photos are drawn one per class and the stand-in model tells them apart,
so a swapped answer shows up as a wrong label or probability. The test first
proves that (every pair differs by far more than the tolerance), then sends
all eleven at once behind a barrier, in a new order each round, and checks
from the service's own ``/metrics`` and threads that batches of more than one
image did form and that the second worker did run some of them.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from pathlib import Path

import httpx
import pytest

from servelab.targets.services import Service, start_fastapi

# two decoding threads: with one, the fast ONNX engine keeps up with the arrivals and
# batches of more than one image form only now and then (measured: 0-5 of 44 images)
SETTINGS = {"MAX_BATCH": "8", "INFER_WORKERS": "2", "PREPROCESS_WORKERS": "2"}
ROUNDS = 4  # rounds always sent; up to MAX_ROUNDS until batching and the second worker are seen
MAX_ROUNDS = 12
TOLERANCE = 1e-4  # an answer under load vs. alone: label equal, probability within this
WORKER_BUSY_S = 0.020  # CPU the second worker must use: several forward passes, not just wake-ups
DISTINCT = 1e-3  # two photos' alone-answers differ by at least this (10x the tolerance) when labels tie
Answer = tuple[str, float]


def assert_pairwise_distinct(answers: list[Answer], names: list[str]) -> None:
    """Every two answers differ (label, or probability by ``DISTINCT``): a swap cannot go unseen."""
    for (i, a), (j, b) in combinations(enumerate(answers), 2):
        assert a[0] != b[0] or abs(a[1] - b[1]) >= DISTINCT, (
            f"{names[i]} and {names[j]} get the same answer alone ({a} vs {b}): "
            "a swap between them could not be detected")


def assert_same_answers(got: list[Answer], alone: list[Answer], names: list[str], when: str) -> None:
    wrong = [f"{names[i]}: alone {alone[i]}, {when} {got[i]}" for i in range(len(alone))
             if got[i][0] != alone[i][0] or abs(got[i][1] - alone[i][1]) > TOLERANCE]
    assert not wrong, "answers not matched to their requests:\n" + "\n".join(wrong)


def metric(text: str, name: str, labels: str = "") -> float:
    """One sample of a Prometheus text exposition, e.g. ``inference_batch_size_bucket{le="1.0"}``."""
    pattern = rf"^{re.escape(name)}{re.escape(labels)} (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    assert found, f"/metrics has no {name}{labels}"
    return float(found.group(1))


def batch_counts(service: Service) -> tuple[float, float]:
    """(forward passes so far, of which single-image ones) from the service's histogram."""
    text = httpx.get(f"{service.url}/metrics", timeout=10).text
    return (metric(text, "inference_batch_size_count"),
            metric(text, "inference_batch_size_bucket", '{le="1.0"}'))


def thread_cpu_seconds(pid: int, thread_name: str) -> float:
    """CPU time used so far by the thread the service named ``thread_name`` (``top -H`` shows it).

    From ``/proc/<pid>/task/<tid>/schedstat`` (nanoseconds on a CPU, measured at
    every switch): a worker that only wakes up to find nothing to do adds
    microseconds; one that runs forward passes adds milliseconds per image.
    """
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().strip() == thread_name:
                return int((task / "schedstat").read_text().split()[0]) / 1e9
        except OSError:  # a thread that ended while we looked
            continue
    raise AssertionError(f"process {pid} has no thread named {thread_name!r}")


@pytest.fixture(scope="module", params=["pt", "onnx"])
def batching_service(request: pytest.FixtureRequest, artifact_dir: Path) -> Iterator[Service]:
    service = start_fastapi(request.param, env=SETTINGS, log_dir=artifact_dir / "foundation-logs")
    yield service
    service.stop()


def predict(client: httpx.Client, image_b64: str) -> Answer:
    response = client.post("/predict", json={"image": image_b64})
    assert response.status_code == 200, response.text
    body = response.json()
    return body["prediction"], float(body["probability"])


def test_concurrent_answers_are_each_requests_own(batching_service: Service, sample_b64: list[str]) -> None:
    names = [f"food_{i:02d}" for i in range(len(sample_b64))]
    health = httpx.get(f"{batching_service.url}/health", timeout=10).json()
    assert health["max_batch"] == 8 and health["infer_workers"] == 2, health
    with httpx.Client(base_url=batching_service.url, timeout=60,
                      limits=httpx.Limits(max_connections=len(sample_b64))) as client:
        alone = [predict(client, image) for image in sample_b64]  # one at a time: batches of one
        assert_pairwise_distinct(alone, names)

        passes_before, singles_before = batch_counts(batching_service)
        pid = batching_service.process.pid
        worker1_before = thread_cpu_seconds(pid, "inference-1")
        order = list(range(len(sample_b64)))
        shuffle = random.Random(15)
        barrier = threading.Barrier(len(order), timeout=30)

        def send(index: int) -> tuple[int, Answer]:
            barrier.wait()  # all requests leave together, so the batcher finds a backlog
            return index, predict(client, sample_b64[index])

        def exercised() -> tuple[bool, bool]:
            passes, singles = batch_counts(batching_service)
            return singles - singles_before < passes - passes_before, \
                thread_cpu_seconds(pid, "inference-1") - worker1_before >= WORKER_BUSY_S

        with ThreadPoolExecutor(len(order)) as pool:
            for round_no in range(MAX_ROUNDS):
                shuffle.shuffle(order)
                got = dict(pool.map(send, order))
                assert_same_answers([got[i] for i in range(len(order))], alone, names,
                                    f"concurrent (round {round_no + 1}, order {order})")
                if round_no + 1 >= ROUNDS and all(exercised()):
                    break

    batched, worker1_ran = exercised()
    passes = batch_counts(batching_service)[0]
    assert batched, (
        f"{round_no + 1} rounds of {len(order)} images ran in {passes - passes_before:.0f} forward passes, "
        f"all single: no batch of two or more formed, so the test proved nothing about batching")
    assert worker1_ran, \
        "the second inference worker ran nothing: INFER_WORKERS=2 was not exercised"

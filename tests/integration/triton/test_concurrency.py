"""Distinct photos sent at once get the answer each gets alone: both Triton models, dynamic batching on.

With dynamic batching Triton hands one ``execute`` several clients' requests;
the model concatenates them, runs one forward pass and must split the rows
back in the same order, a request of two images taking two rows and a broken
image taking none (Python model). The eleven sample photos (one per class)
get answers that differ pairwise by far more than the tolerance, so a row
given to the wrong request shows. Each round sends every request at once
behind a barrier, in a new order; Triton's statistics must show that batches
of more than one request formed, or the round proved nothing.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servelab.core.preprocess import preprocess_bytes, top1
from servelab.triton.experiments import configure
from servelab.triton.stats import run_stats

PYTHON_MODEL = "food_classifier"
ONNX_MODEL = "food_classifier_onnx"
ROUNDS = 3
QUEUE_DELAY_US = 50_000  # long enough for a barrier's worth of requests to meet in one batch
TOLERANCE = 1e-4
DISTINCT = 1e-3
BROKEN = b"%%% not an image %%%"
PAIR = (3, 8)  # one request carries these two photos: it takes two rows of a batch
Answer = tuple[str, float]


def assert_pairwise_distinct(answers: list[Answer]) -> None:
    for (i, a), (j, b) in combinations(enumerate(answers), 2):
        assert a[0] != b[0] or abs(a[1] - b[1]) >= DISTINCT, (
            f"food_{i:02d} and food_{j:02d} get the same answer alone ({a} vs {b}): "
            "a swap between them could not be detected")


def close_enough(got: list[Answer], expected: list[Answer]) -> bool:
    return len(got) == len(expected) and all(
        g[0] == e[0] and abs(g[1] - e[1]) <= TOLERANCE for g, e in zip(got, expected, strict=True))


def classify_python(client: Any, items: list[bytes], tri: Any) -> list[Answer]:
    labels, probs = tri.classify(client, items)
    return [(label, float(p)) for label, p in zip(labels, probs, strict=True)]


def classify_onnx(client: Any, tensors: np.ndarray, tri: Any) -> list[Answer]:
    logits = client.infer(ONNX_MODEL, [tri.tensor_input(tensors)]).as_numpy("output")
    return [top1(row) for row in logits]


@pytest.fixture(scope="module")
def photos(samples: list[Path]) -> list[Path]:
    assert len(samples) == 11, f"expected the 11 sample photos (one per class), found {len(samples)}"
    return samples


@pytest.fixture
def dynamic_batching(triton: Any) -> Iterator[Callable[[str], None]]:
    """``on(model)`` turns dynamic batching on; every model turned on is turned off again after the test."""
    turned_on: list[str] = []

    def on(model: str) -> None:
        turned_on.append(model)
        result = configure(triton, model, dynamic_batching=True, max_queue_delay_us=QUEUE_DELAY_US,
                           show_diff=False)
        assert result["live"]["dynamic_batching"], result

    yield on
    for model in turned_on:
        configure(triton, model, dynamic_batching=False, show_diff=False)


def send_rounds(triton: Any, model: str, requests: list[Any],
                ask: Callable[[Any, Any], list[Answer]]) -> tuple[list[list[list[Answer] | str]], dict]:
    """Every request at once, ``ROUNDS`` times in a new order: the replies in request order per round.

    A reply is the list of answers, or ``"error: ..."``. Each sender has its
    own client (tritonclient.http is not thread-safe).
    """
    barrier = threading.Barrier(len(requests), timeout=60)
    shuffle = random.Random(15)

    def send(index: int) -> tuple[int, list[Answer] | str]:
        client = triton.new_client()
        try:
            barrier.wait()
            return index, ask(client, requests[index])
        except threading.BrokenBarrierError:
            raise
        except Exception as exc:  # the model's error for a bad request is the answer to check
            return index, f"error: {exc}"
        finally:
            client.close()

    rounds = []
    order = list(range(len(requests)))
    with run_stats(triton.client(), model) as stats, ThreadPoolExecutor(len(requests)) as pool:
        for _ in range(ROUNDS):
            shuffle.shuffle(order)
            replies = dict(pool.map(send, order))
            rounds.append([replies[i] for i in range(len(requests))])
    return rounds, stats.delta


def assert_rounds_match(rounds: list[list[Any]], expected: list[Any], names: list[str]) -> None:
    wrong = []
    for number, replies in enumerate(rounds, 1):
        for name, got, want in zip(names, replies, expected, strict=True):
            if isinstance(want, str):
                ok = isinstance(got, str) and want in got
            else:
                ok = not isinstance(got, str) and close_enough(got, want)
            if not ok:
                wrong.append(f"round {number}, {name}: alone {want}, concurrent {got}")
    assert not wrong, "answers not matched to their requests:\n" + "\n".join(wrong)


def assert_batched(delta: dict, requests: int) -> None:
    assert delta["executions_batch_gt1"] > 0, (
        f"{ROUNDS} rounds of {requests} requests never formed a batch of two or more: {delta}")


def test_python_model_answers_each_request_under_dynamic_batching(triton, photos, tri,
                                                                  dynamic_batching) -> None:
    client = triton.client()
    items = [tri.b64(path) for path in photos]
    alone = [classify_python(client, [item], tri)[0] for item in items]  # batching off: one at a time
    assert_pairwise_distinct(alone)

    requests = [*([item] for item in items), [items[PAIR[0]], items[PAIR[1]]], [BROKEN]]
    expected: list[Any] = [*([answer] for answer in alone), [alone[PAIR[0]], alone[PAIR[1]]], "bad image"]
    names = [*(p.name for p in photos), f"pair {PAIR}", "broken image"]

    dynamic_batching(PYTHON_MODEL)
    rounds, delta = send_rounds(triton, PYTHON_MODEL, requests, lambda c, r: classify_python(c, r, tri))
    assert_rounds_match(rounds, expected, names)
    assert_batched(delta, len(requests))


def test_onnx_model_answers_each_request_under_dynamic_batching(triton, photos, tri,
                                                                dynamic_batching) -> None:
    client = triton.client()
    tensors = [preprocess_bytes(path.read_bytes())[np.newaxis] for path in photos]
    alone = [classify_onnx(client, tensor, tri)[0] for tensor in tensors]
    assert_pairwise_distinct(alone)

    requests = [*tensors, np.concatenate([tensors[PAIR[0]], tensors[PAIR[1]]])]
    expected = [*([answer] for answer in alone), [alone[PAIR[0]], alone[PAIR[1]]]]
    names = [*(p.name for p in photos), f"pair {PAIR}"]

    dynamic_batching(ONNX_MODEL)
    rounds, delta = send_rounds(triton, ONNX_MODEL, requests, lambda c, r: classify_onnx(c, r, tri))
    assert_rounds_match(rounds, expected, names)
    assert_batched(delta, len(requests))

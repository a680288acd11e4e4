"""Three ways a client gets a photo's answer from Triton, measured with the client's own share of the work.

- ``python``: ``food_classifier`` (Python backend): the client base64-encodes the file; label and
  probability come back;
- ``client``: ``food_classifier_onnx``: the client decodes, resizes and normalises the photo itself and
  sends the FP32 tensor, then applies softmax to the 11 logits (06, GourmetGram's ``triton_onnx``);
- ``ensemble``: ``food_classifier_ensemble``: the client sends the file's bytes; ``food_preprocess`` →
  ``food_classifier_onnx`` → ``food_postprocess`` run inside Triton; label and probability come back.

``answer`` sends one photo; ``measure`` runs a closed loop of ``concurrency`` clients over distinct
photos, each doing its share per request as a real client would (that is what perf_analyzer, which sends
ready-made inputs, cannot show), and returns the client's view (throughput, p50/p99, bytes on the wire
per request, the client's CPU per request, each with its spread over the run's thirds) and the server's
per model: queue and compute of the pipeline's model and of each member of an ensemble. Requests are
HTTP/1.1 on one keep-alive connection per client (``http.client``), with bodies in Triton's binary
tensor format as tritonclient builds them: the bytes counted are the bodies sent and received.
"""

from __future__ import annotations

import base64
import http.client
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from servelab.triton.stats import STAGES, delta, settled_snapshot, snapshot

REQUEST_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Pipeline:
    """One way to get an answer: the model asked, and the client's work before and after."""

    name: str
    model: str
    title: str
    send: Callable[[bytes], list[Any]]  # the file's bytes → tritonclient inputs (the client's work before)
    outputs: tuple[str, ...]
    read: Callable[[Any], tuple[str, float]]  # an InferResult → (label, probability) (the work after)


def _python_inputs(image: bytes) -> list[Any]:
    import tritonclient.http as httpclient

    text = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[base64.b64encode(image)]], dtype=object), binary_data=True)
    return [text]


def _tensor_inputs(image: bytes) -> list[Any]:
    import tritonclient.http as httpclient

    from servelab.core.preprocess import preprocess_bytes

    tensor = preprocess_bytes(image)[np.newaxis].astype(np.float32)
    pixels = httpclient.InferInput("input", list(tensor.shape), "FP32")
    pixels.set_data_from_numpy(tensor, binary_data=True)
    return [pixels]


def _file_inputs(image: bytes) -> list[Any]:
    import tritonclient.http as httpclient

    data = np.frombuffer(image, dtype=np.uint8)[np.newaxis]
    file = httpclient.InferInput("IMAGE", list(data.shape), "UINT8")
    file.set_data_from_numpy(data, binary_data=True)
    return [file]


def _read_label(result: Any) -> tuple[str, float]:
    label = np.asarray(result.as_numpy("FOOD_LABEL")).reshape(-1)[0]
    probability = float(np.asarray(result.as_numpy("PROBABILITY")).reshape(-1)[0])
    return (label.decode() if isinstance(label, bytes) else str(label)), probability


def _read_logits(result: Any) -> tuple[str, float]:
    from servelab.core.preprocess import top1

    return top1(result.as_numpy("output")[0])


PIPELINES = {
    "python": Pipeline("python", "food_classifier", "Python backend (the JPEG as base64 text)",
                       _python_inputs, ("FOOD_LABEL", "PROBABILITY"), _read_label),
    "client": Pipeline("client", "food_classifier_onnx", "ONNX model, the client preprocesses",
                       _tensor_inputs, ("output",), _read_logits),
    "ensemble": Pipeline("ensemble", "food_classifier_ensemble", "ensemble (the JPEG's bytes)",
                         _file_inputs, ("FOOD_LABEL", "PROBABILITY"), _read_label),
}


class PipelineError(RuntimeError):
    """Triton refused a request (or could not be reached); the message carries its reason."""


class Client:
    """One keep-alive HTTP connection to Triton at ``url`` (host:port) that sends pipelines' requests."""

    def __init__(self, url: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        host, _, port = url.split("://", 1)[-1].rstrip("/").partition(":")
        self.url = url
        self.conn = http.client.HTTPConnection(host, int(port or 8000), timeout=timeout)

    def infer(self, pipeline: Pipeline, image: bytes) -> tuple[tuple[str, float], int, int]:
        """The client's work, one request and its answer: ((label, probability), bytes sent, bytes back)."""
        import tritonclient.http as httpclient

        outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in pipeline.outputs]
        body, json_size = httpclient.InferenceServerClient.generate_request_body(
            pipeline.send(image), outputs=outputs)
        headers = {"Content-Type": "application/octet-stream"}
        if json_size is not None:
            headers["Inference-Header-Content-Length"] = str(json_size)
        path = f"/v2/models/{pipeline.model}/infer"
        for attempt in range(2):  # the server may have closed an idle keep-alive connection
            try:
                self.conn.request("POST", path, body=body, headers=headers)
                response = self.conn.getresponse()
                answer = response.read()
                break
            except (http.client.HTTPException, ConnectionError) as exc:
                self.conn.close()
                if attempt:
                    raise PipelineError(f"Triton at {self.url}: {type(exc).__name__}: {exc}") from None
        if response.status != 200:
            said = answer[:300].decode(errors="replace")
            raise PipelineError(f"{pipeline.model} answered HTTP {response.status}: {said}")
        length = response.getheader("Inference-Header-Content-Length")
        result = httpclient.InferResult.from_response_body(answer, header_length=int(length) if length
                                                           else None)
        return pipeline.read(result), len(body), len(answer)

    def close(self) -> None:
        self.conn.close()


def answer(url: str, pipeline: str, image: bytes) -> dict[str, Any]:
    """One photo through ``pipeline``: its answer, the bytes each way and the time it took."""
    chosen, client = PIPELINES[pipeline], Client(url)
    try:
        started = time.perf_counter()
        (label, probability), sent, back = client.infer(chosen, image)
        ms = (time.perf_counter() - started) * 1000
    finally:
        client.close()
    return {"pipeline": pipeline, "model": chosen.model, "prediction": label, "probability": probability,
            "request_bytes": sent, "response_bytes": back, "ms": ms}


def members(client: Any, model: str) -> list[str]:
    """The models an ensemble's steps run, in order ([] for a model that is not an ensemble)."""
    from servelab.triton.config import live_config

    cfg = live_config(client, model)
    return [step.model_name for step in cfg.ensemble_scheduling.step] if cfg.platform == "ensemble" else []


def server_times(change: dict[str, Any]) -> dict[str, Any]:
    """A model's statistics over a run (``stats.delta``) as the tables show them: mean queue and compute
    (input + infer + output) per request, and how many requests and executions it counted."""
    compute = [change.get(f"stats_{stage}_ms") for stage in STAGES if stage != "queue"]
    return {"queue_ms": change.get("stats_queue_ms"),
            "compute_ms": sum(c for c in compute if c is not None and c == c) if compute else None,
            "compute_infer_ms": change.get("stats_compute_infer_ms"),
            "inference_count": change.get("inference_count"),
            "execution_count": change.get("execution_count")}


def _third_spread(values: Sequence[float]) -> float | None:
    from servelab.results.schema import relative_spread

    return relative_spread([float(v) for v in values]) if len(values) == 3 else None


def measure(url: str, triton_client: Any, pipeline: str, photos: Sequence[Path], requests: int,
            concurrency: int = 1, warmup: int = 4, progress: bool = True) -> dict[str, Any]:
    """``requests`` requests in all from ``concurrency`` clients, each sending its next photo (the
    ``photos`` in turn) as soon as its answer is read; the client's work counted in each latency and in
    the client's CPU (this process's CPU time, per request). ``triton_client`` (tritonclient's) reads the
    server's statistics before and after, of the model and of every member of an ensemble."""
    from servelab.core.progress import bar

    chosen = PIPELINES[pipeline]
    images = [Path(p).read_bytes() for p in photos]
    if not images:
        raise PipelineError("no photos to send: data/samples/ is empty (python -m servelab.core.samples)")
    if requests < 3 * concurrency:
        raise ValueError(f"{requests} requests from {concurrency} clients: give at least 3 per client")
    warm = Client(url)
    try:
        for i in range(max(warmup, concurrency)):
            warm.infer(chosen, images[i % len(images)])
    finally:
        warm.close()
    models = [chosen.model, *members(triton_client, chosen.model)]
    before = {m: snapshot(triton_client, m) for m in models}
    lock, issued, done = threading.Lock(), [0], []  # done: (finished at, latency s, sent, back)
    failures: list[str] = []
    cpu_marks: list[float] = []
    progress_bar = bar(total=requests, desc=f"{pipeline}, {concurrency} client(s)", unit="req",
                       disable=not progress, mininterval=1.0)

    def next_index() -> int | None:
        with lock:
            if issued[0] >= requests:
                return None
            issued[0] += 1
            return issued[0] - 1

    def loop() -> None:
        client = Client(url)
        try:
            while (index := next_index()) is not None:
                started = time.perf_counter()
                try:
                    _, sent, back = client.infer(chosen, images[index % len(images)])
                except PipelineError as exc:
                    with lock:
                        failures.append(str(exc))
                    continue
                finished = time.perf_counter()
                with lock:
                    done.append((finished, finished - started, sent, back))
                    if len(done) in (requests // 3, 2 * requests // 3):
                        cpu_marks.append(time.process_time())
                progress_bar.update(1)
        finally:
            client.close()

    threads = [threading.Thread(target=loop, name=f"{pipeline}-client-{i}") for i in range(concurrency)]
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=REQUEST_TIMEOUT_S * requests)
    wall, cpu_end = time.perf_counter() - wall_start, time.process_time()
    progress_bar.close()
    after = {m: settled_snapshot(triton_client, m) for m in models}
    if not done:
        raise PipelineError(f"every request to {chosen.model} failed: {failures[0] if failures else '?'}")
    server = {m: server_times(delta(before[m], after[m])) for m in models}
    return summarise(chosen, concurrency, done, failures, wall, wall_start, [cpu_start, *cpu_marks, cpu_end],
                     server, len(images))


def summarise(chosen: Pipeline, concurrency: int, done: list[tuple[float, float, int, int]],
              failures: list[str], wall: float, wall_start: float, cpu_marks: list[float],
              server: dict[str, dict[str, Any]], photos: int) -> dict[str, Any]:
    """The client's figures of one run, each with its spread over the run's three thirds (by finishing
    order): throughput, latency, the client's CPU per request; then the server's, model by model."""
    done = sorted(done)
    ms = np.array([d[1] for d in done]) * 1000
    thirds = np.array_split(np.arange(len(done)), 3)
    ends = [wall_start, *(done[int(part[-1])][0] for part in thirds if len(part))]
    rates = [len(part) / (ends[i + 1] - ends[i]) for i, part in enumerate(thirds)
             if len(part) and ends[i + 1] > ends[i]]
    cpu = [(b - a) * 1000 / len(part) for a, b, part in zip(cpu_marks, cpu_marks[1:], thirds, strict=False)
           if len(part)]
    own = server.get(chosen.model, {})
    return {
        "pipeline": chosen.name, "model": chosen.model, "label": f"{chosen.title}, c={concurrency}",
        "load_mode": "concurrency", "load_value": concurrency, "requests": len(done) + len(failures),
        "errors": len(failures), "photos": photos,
        "throughput_infer_s": len(done) / wall if wall > 0 else float("nan"),
        "throughput_spread": _third_spread(rates),
        "latency_p50_ms": float(np.percentile(ms, 50)), "latency_p99_ms": float(np.percentile(ms, 99)),
        "latency_spread": _third_spread([float(np.median(ms[p])) for p in thirds if len(p)]),
        "client_cpu_ms": (cpu_marks[-1] - cpu_marks[0]) * 1000 / len(done) if done else None,
        "client_cpu_ms_spread": _third_spread(cpu) if len(cpu_marks) == 4 else None,
        "request_bytes": float(np.mean([d[2] for d in done])),
        "response_bytes": float(np.mean([d[3] for d in done])),
        "server_queue_ms": own.get("queue_ms"), "server_compute_infer_ms": own.get("compute_infer_ms"),
        "server_compute_ms": own.get("compute_ms"),
        "members": {m: times for m, times in server.items() if m != chosen.model},
        "failures": "; ".join(dict.fromkeys(failures))[:500],
    }

"""Clients for the serving backends GourmetGram can call.

Each backend turns the bytes of an image file into (label, probability); the
app does not care which one answers. Any way the remote service can fail —
refused connection, timeout, 5xx, a malformed answer — becomes one
``BackendUnavailable``, because to a user they all mean the same thing: try
again later. Clients are built once per process and reused (a connection per
upload would dominate latency), and they recover on their own when the
service comes back.
"""

from __future__ import annotations

import base64
import contextlib
import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import numpy as np

from flask_app.settings import Settings
from servelab.core.preprocess import preprocess_bytes, top1

TITLES = {"fastapi": "FastAPI", "triton": "Triton (Python backend)", "triton_onnx": "Triton (ONNX)",
          "triton_ensemble": "Triton (ensemble)"}
HEALTH_BUDGET = 1.5  # seconds for all health probes of one GET /health


class BackendUnavailable(RuntimeError):
    """The prediction service is down, too slow or answered with an error."""


@dataclass(frozen=True)
class Prediction:
    """One answer, with what a user needs to trust it: who answered and how fast."""

    label: str
    probability: float
    backend: str
    elapsed_ms: float

    @property
    def backend_title(self) -> str:
        return TITLES[self.backend]

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["prediction"] = data.pop("label")
        return data


class Backend(ABC):
    """A serving backend: classify image bytes and say whether it is reachable."""

    name: str = ""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._probe = httpx.Client()

    def predict(self, image: bytes) -> Prediction:
        """Classify ``image`` (the bytes of an image file), timing the round trip."""
        start = time.perf_counter()
        label, probability = self._classify(image)
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        return Prediction(label, float(probability), self.name, round(elapsed_ms, 1))

    def health(self) -> dict[str, Any]:
        """Whether every health URL of the backend answers 2xx right now.

        All probes share one short budget: GET /health is what ready-waits poll
        (with a 2 s timeout), so it must answer quickly even when the backend hangs.
        """
        detail = "ok"
        deadline = time.monotonic() + min(HEALTH_BUDGET, self.settings.request_timeout)
        for url in self.health_urls():
            try:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise httpx.TimeoutException("health budget spent")
                status = self._probe.get(url, timeout=remaining).status_code
            except httpx.HTTPError as exc:
                detail = f"{url}: {type(exc).__name__}"
                break
            if not 200 <= status < 300:
                detail = f"{url}: HTTP {status}"
                break
        return {"backend": self.name, "backend_url": self.settings.backend_url,
                "model": self.settings.model_name or None,
                "backend_reachable": detail == "ok", "backend_detail": detail}

    @abstractmethod
    def _classify(self, image: bytes) -> tuple[str, float]:
        """Send ``image`` to the service; raise ``BackendUnavailable`` on any failure."""

    @abstractmethod
    def health_urls(self) -> list[str]:
        """HTTP URLs that answer 2xx when the backend can serve predictions."""


class FastAPIBackend(Backend):
    """POST the image as base64 JSON to ``FASTAPI_SERVER_URL/predict``."""

    name = "fastapi"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        # httpx.Client is thread-safe and drops pooled connections the server closed,
        # so a restarted service is reached again without rebuilding the client.
        self._client = httpx.Client(base_url=settings.fastapi_url, timeout=settings.request_timeout,
                                    transport=httpx.HTTPTransport(retries=1))

    def _classify(self, image: bytes) -> tuple[str, float]:
        payload = {"image": base64.b64encode(image).decode("ascii")}
        try:
            response = self._client.post("/predict", json=payload)
        except httpx.HTTPError as exc:
            raise BackendUnavailable(f"{self.settings.fastapi_url}: {_describe(exc)}") from exc
        if response.status_code != 200:
            raise BackendUnavailable(
                f"{self.settings.fastapi_url}/predict answered HTTP {response.status_code}: "
                f"{response.text[:200]}"
            )
        try:
            body = response.json()
            return str(body["prediction"]), float(body["probability"])
        except (ValueError, KeyError, TypeError) as exc:
            raise BackendUnavailable(f"unexpected answer from FastAPI: {response.text[:200]}") from exc

    def health_urls(self) -> list[str]:
        return [f"{self.settings.fastapi_url}/health"]


class _TritonBackend(Backend):
    """Shared plumbing for both Triton models: one tritonclient, owned by one thread.

    ``tritonclient.http`` is built on gevent and is not thread-safe, while
    gunicorn serves requests from several threads; so the client is created and
    used only inside a single-thread executor. Requests to Triton are therefore
    serialised per process, which is what one client with one connection does
    anyway. After any failure the client is dropped and the next call builds a
    fresh one, so a restarted server is reached without restarting the app.
    """

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._host = _strip_scheme(settings.triton_url)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.name}-client")
        self._client: Any = None

    def _classify(self, image: bytes) -> tuple[str, float]:
        future = self._executor.submit(self._infer_in_worker, image)
        # the client's own timeouts fire first; this only guards against a wedged worker
        try:
            return future.result(timeout=3 * self.settings.request_timeout + 5)
        except FutureTimeout as exc:
            raise BackendUnavailable(f"Triton at {self._host} did not answer in time") from exc

    def _infer_in_worker(self, image: bytes) -> tuple[str, float]:
        import gevent

        try:
            return self._infer(self._get_client(), image)
        except (Exception, gevent.Timeout) as exc:  # any failure of the remote call means "unavailable"
            self._drop_client()
            raise BackendUnavailable(f"Triton at {self._host}, model "
                                     f"{self.settings.model_name!r}: {_describe(exc)}") from None

    def _get_client(self) -> Any:
        if self._client is None:
            import tritonclient.http as httpclient

            timeout = self.settings.request_timeout
            self._client = httpclient.InferenceServerClient(
                self._host, connection_timeout=timeout, network_timeout=timeout)
        return self._client

    def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            # closing a broken client may fail too; it is discarded either way
            with contextlib.suppress(Exception):
                client.close()

    @abstractmethod
    def _infer(self, client: Any, image: bytes) -> tuple[str, float]:
        """One inference call on ``client`` (runs in the client's thread)."""

    def health_urls(self) -> list[str]:
        base = f"http://{self._host}/v2"
        return [f"{base}/health/ready", f"{base}/models/{self.settings.model_name}/ready"]


class TritonBackend(_TritonBackend):
    """The Python-backend model: base64 image text in, label and probability out."""

    name = "triton"

    def _infer(self, client: Any, image: bytes) -> tuple[str, float]:
        import tritonclient.http as httpclient

        encoded = np.array([[base64.b64encode(image).decode("ascii")]], dtype=object)
        request = httpclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
        request.set_data_from_numpy(encoded, binary_data=True)
        outputs = [httpclient.InferRequestedOutput("FOOD_LABEL", binary_data=True),
                   httpclient.InferRequestedOutput("PROBABILITY", binary_data=True)]
        result = client.infer(self.settings.model_name, [request], outputs=outputs)
        label = np.asarray(result.as_numpy("FOOD_LABEL")).reshape(-1)[0]
        probability = np.asarray(result.as_numpy("PROBABILITY")).reshape(-1)[0]
        return (label.decode("utf-8") if isinstance(label, bytes) else str(label)), float(probability)


class TritonOnnxBackend(_TritonBackend):
    """The ONNX model: preprocess here, send the tensor, softmax the 11 logits here."""

    name = "triton_onnx"

    def _infer(self, client: Any, image: bytes) -> tuple[str, float]:
        import tritonclient.http as httpclient

        batch = preprocess_bytes(image)[np.newaxis]  # the model batches: shape [1, 3, 224, 224]
        request = httpclient.InferInput("input", list(batch.shape), "FP32")
        request.set_data_from_numpy(batch, binary_data=True)
        outputs = [httpclient.InferRequestedOutput("output", binary_data=True)]
        result = client.infer(self.settings.model_name, [request], outputs=outputs)
        return top1(result.as_numpy("output")[0])


class TritonEnsembleBackend(TritonBackend):
    """The ensemble: the image file's bytes as they came in, label and probability out (the server
    decodes, normalises and applies softmax: ``models_staging/food_classifier_ensemble``)."""

    name = "triton_ensemble"

    def _infer(self, client: Any, image: bytes) -> tuple[str, float]:
        import tritonclient.http as httpclient

        data = np.frombuffer(image, dtype=np.uint8)[np.newaxis]  # one file per request: [1, bytes]
        request = httpclient.InferInput("IMAGE", list(data.shape), "UINT8")
        request.set_data_from_numpy(data, binary_data=True)
        outputs = [httpclient.InferRequestedOutput("FOOD_LABEL", binary_data=True),
                   httpclient.InferRequestedOutput("PROBABILITY", binary_data=True)]
        result = client.infer(self.settings.model_name, [request], outputs=outputs)
        label = np.asarray(result.as_numpy("FOOD_LABEL")).reshape(-1)[0]
        probability = np.asarray(result.as_numpy("PROBABILITY")).reshape(-1)[0]
        return (label.decode("utf-8") if isinstance(label, bytes) else str(label)), float(probability)


BACKEND_CLASSES: dict[str, type[Backend]] = {
    "fastapi": FastAPIBackend, "triton": TritonBackend, "triton_onnx": TritonOnnxBackend,
    "triton_ensemble": TritonEnsembleBackend,
}


def make_backend(settings: Settings) -> Backend:
    """The client for the backend ``settings`` names."""
    return BACKEND_CLASSES[settings.backend](settings)


def _strip_scheme(url: str) -> str:
    """tritonclient wants ``host:port``; accept ``http://host:port`` too."""
    return url.split("://", 1)[-1].rstrip("/")


def _describe(exc: BaseException) -> str:
    """A short, user-safe reason: the error type and its first line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__

"""The Food-11 ONNX model as a Ray Serve deployment: POST the image file's bytes to ``/``; the answer
is the label, its probability, the request's ``X-Request-Id`` and the replica that served it.
A body that is not an image gets a 400 with the reason.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from servelab.core.gpu import ort_has_cuda, ort_providers
from servelab.core.labels import CLASSES
from servelab.core.model import ONNX_INPUT, ONNX_OUTPUT
from servelab.core.paths import REPO_ROOT
from servelab.core.preprocess import ImageError, preprocess_bytes, softmax

MODEL = REPO_ROOT / "artifacts" / "food11.onnx"


@serve.deployment(name="food11")
class Food11:
    """One replica: one ONNX Runtime session with one intra-op thread (replicas share the cores), on
    the GPU Ray gave the replica when it asked for ``num_gpus`` (CUDA provider), else on the CPU; or, with
    ``device_ms``, a device stand-in: each forward pass waits that long off the CPU (what a GPU's would
    cost the cores) and answers the model's label for the photo, computed once per photo."""

    def __init__(self, model: str = str(MODEL), threads: int = 1, device_ms: float | None = None) -> None:
        import onnxruntime as ort
        import ray

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        gpus = ray.get_gpu_ids()  # Ray sets CUDA_VISIBLE_DEVICES to the replica's share
        if gpus and not ort_has_cuda(ort):
            missing = ("onnxruntime-gpu (as docker/Dockerfile.jupyter installs it)"
                       if "CUDAExecutionProvider" not in ort.get_available_providers()
                       else "a GPU the driver shows this process (the container's GPU overlay, libcuda)")
            raise RuntimeError(f"this replica was given GPU {gpus} but onnxruntime {ort.__version__} cannot "
                               f"use it: it needs {missing}; or set num_gpus 0")
        providers = ort_providers(ort) if gpus else ["CPUExecutionProvider"]
        self.session = ort.InferenceSession(model, options, providers=providers)
        # where it really runs: ONNX Runtime falls back to the CPU when the CUDA provider fails to load
        self.device = "GPU" if self.session.get_providers()[0] == "CUDAExecutionProvider" else "CPU"
        if gpus and self.device != "GPU":
            raise RuntimeError(f"this replica was given GPU {gpus} but ONNX Runtime's CUDA provider did not "
                               "load (see the replica's log: a CUDA or cuDNN library missing?)")
        replica_id = serve.get_replica_context().replica_id
        self.replica, self.actor = replica_id.unique_id, replica_id.to_full_id_str()
        # one request computes at a time, off the event loop: the replica keeps answering Serve's
        # health checks and reporting its queue while it computes
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="food11")
        # the device stand-in (``device_ms``): the forward pass is a wait of that many ms off the CPU, as on
        # a GPU, with the model's own answer for each photo, computed once (the load sends a few photos)
        self.device_ms = device_ms
        self.answers: dict[int, np.ndarray] = {}
        if device_ms is not None:
            self.device = f"stand-in ({device_ms:g} ms)"

    def predict(self, body: bytes) -> np.ndarray:
        image = preprocess_bytes(body)
        if self.device_ms is None:
            return softmax(self.session.run([ONNX_OUTPUT], {ONNX_INPUT: image[None]})[0])[0]
        key = hash(body)
        if key not in self.answers:
            self.answers[key] = softmax(self.session.run([ONNX_OUTPUT], {ONNX_INPUT: image[None]})[0])[0]
        time.sleep(self.device_ms / 1000)
        return self.answers[key]

    async def __call__(self, request: Request) -> JSONResponse:
        rid = request.headers.get("x-request-id", "")
        body = await request.body()
        try:
            probs = await asyncio.get_running_loop().run_in_executor(self.worker, self.predict, body)
        except ImageError as exc:
            return JSONResponse({"error": str(exc), "request_id": rid}, status_code=400)
        best = int(probs.argmax())
        return JSONResponse({"label": CLASSES[best], "probability": round(float(probs[best]), 4),
                             "request_id": rid, "replica": self.replica, "pid": os.getpid(),
                             "actor": self.actor, "device": self.device})


def app(**init: Any) -> Any:
    """The application ``serve.run`` deploys (``init``: the replica's constructor arguments)."""
    return Food11.bind(**init)  # type: ignore[attr-defined]  # a Deployment, made by @serve.deployment

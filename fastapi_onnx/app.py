"""FastAPI inference service, ONNX Runtime engine: ``uvicorn fastapi_onnx.app:app``.

Runs ``food11.onnx`` (built by ``python -m servelab.core.model build``) with the
CUDAExecutionProvider when present, else on the CPU. No torch anywhere on this
path: the container image does not even install it. ``MAX_BATCH`` defaults to
1. On the CPU the inference workers run single-threaded side by side, and there
a batch saves nothing per image but widens the latency spread (2-core lab CPU,
16 clients: 197-203 req/s with p99 1.30-1.34 x the mean at 1, against 193-197
req/s and 1.56-1.70 x at 4 and 8). On a GPU onnxruntime-gpu pays ~0.9 s whenever the
batch size changes, so batches there are padded to ``MAX_BATCH``, and padding
every pass to 16 cost more than it saved (H100, 16 clients: 449 req/s and p99
88 ms padded to 16, against 615 req/s and p99 47 ms at batch 1). Everything
shared with the PyTorch service (validation, limits, metrics, the
micro-batcher and why it exists) is in ``servelab/serving.py``.
"""

from pathlib import Path

from servelab.serving import Settings, create_app, engine_uses_gpu

settings = Settings.from_env(default_model_path=Path(__file__).resolve().parent / "food11.onnx",
                             default_max_batch=1, gpu=engine_uses_gpu("onnx"),
                             gpu_max_batch=1)
app = create_app("onnx", settings, title="Food-11 classifier (ONNX Runtime)")

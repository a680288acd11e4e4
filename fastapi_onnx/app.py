"""FastAPI inference service, ONNX Runtime engine: ``uvicorn fastapi_onnx.app:app``.

Runs ``food11.onnx`` (built by ``python -m servelab.model build``) with the
CUDAExecutionProvider when present, else on the CPU. No torch anywhere on this
path: the container image does not even install it. On the CPU batching
defaults to 8 (``MAX_BATCH``): ONNX Runtime is cheaper per image in a batch,
and with two inference workers smaller batches keep the latency tail short
(measured). On a GPU it defaults to 1: onnxruntime-gpu pays ~0.9 s whenever the
batch size changes, so batches there are padded to ``MAX_BATCH``, and padding
every pass to 16 cost more than it saved (H100, 16 clients: 449 req/s and p99
88 ms padded to 16, against 615 req/s and p99 47 ms at batch 1). Everything
shared with the PyTorch service (validation, limits, metrics, the
micro-batcher and why it exists) is in ``servelab/serving.py``.
"""

from pathlib import Path

from servelab.serving import Settings, create_app, engine_uses_gpu

settings = Settings.from_env(default_model_path=Path(__file__).resolve().parent / "food11.onnx",
                             default_max_batch=8, gpu=engine_uses_gpu("onnx"),
                             gpu_max_batch=1)
app = create_app("onnx", settings, title="Food-11 classifier (ONNX Runtime)")

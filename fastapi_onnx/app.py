"""FastAPI inference service, ONNX Runtime engine: ``uvicorn fastapi_onnx.app:app``.

Runs ``food11.onnx`` (built by ``python -m servelab.model build``) with the
CUDAExecutionProvider when present, else on the CPU. No torch anywhere on this
path: the container image does not even install it. Batching defaults to 8
(``MAX_BATCH``): ONNX Runtime is cheaper per image in a batch, and with two
inference workers smaller batches keep the latency tail short (measured). Everything
shared with the PyTorch service (validation, limits, metrics, the
micro-batcher and why it exists) is in ``servelab/serving.py``.
"""

from pathlib import Path

from servelab.serving import Settings, create_app

settings = Settings.from_env(default_model_path=Path(__file__).resolve().parent / "food11.onnx",
                             default_max_batch=8)
app = create_app("onnx", settings, title="Food-11 classifier (ONNX Runtime)")

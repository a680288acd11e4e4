"""FastAPI inference service, ONNX Runtime engine: ``python -m servelab.serving.serve fastapi_onnx.app:app``.

Serves ``food11.onnx`` (built by ``python -m servelab.core.model build``) with
ONNX Runtime's CUDAExecutionProvider when it can run the GPU, else on the CPU.
No torch anywhere on this path: the container image does not even install it.
The model is loaded when the server starts, not when this module is imported.
Everything shared with the PyTorch service (settings, micro-batcher, HTTP
layer, /health, /metrics) is in ``servelab/serving/``.
"""

from pathlib import Path

from servelab.serving.app import create_app
from servelab.serving.engines import engine_uses_gpu
from servelab.serving.settings import Settings


def settings() -> Settings:
    """The environment over this service's defaults: ``MAX_BATCH`` 1 on a CPU and on a GPU."""
    # why: docs/decisions/2026-11-22-fastapi-max-batch-per-device.md
    return Settings.from_env(default_model_path=Path(__file__).resolve().parent / "food11.onnx",
                             default_max_batch=1, gpu=engine_uses_gpu("onnx"), gpu_max_batch=1)


app = create_app("onnx", "Food-11 classifier (ONNX Runtime)", settings)

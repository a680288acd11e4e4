"""FastAPI inference service, PyTorch engine: ``python -m servelab.serving.serve fastapi_pt.app:app``.

Serves the MobileNetV2 state_dict ``food11.pth`` (built by ``python -m
servelab.core.model build``) with PyTorch eager, on CUDA when torch can run the
GPU, else on the CPU. The model is loaded when the server starts, not when
this module is imported. Everything shared with the ONNX service (settings,
micro-batcher, HTTP layer, /health, /metrics) is in ``servelab/serving/``.
"""

from pathlib import Path

from servelab.serving.app import create_app
from servelab.serving.engines import engine_uses_gpu
from servelab.serving.settings import Settings


def settings() -> Settings:
    """The environment over this service's defaults: ``MAX_BATCH`` 2 on a CPU, 16 on a GPU."""
    # why: docs/decisions/2026-11-22-fastapi-max-batch-per-device.md
    return Settings.from_env(default_model_path=Path(__file__).resolve().parent / "food11.pth",
                             default_max_batch=2, gpu=engine_uses_gpu("pt"))


app = create_app("pt", "Food-11 classifier (PyTorch)", settings)

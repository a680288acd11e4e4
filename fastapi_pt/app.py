"""FastAPI inference service, PyTorch engine: ``uvicorn fastapi_pt.app:app``.

Runs the MobileNetV2 state_dict ``food11.pth`` (built by ``python -m
servelab.model build``) on CUDA when available, else on the CPU with
``INFER_THREADS`` intra-op threads. Batching defaults to 4 (``MAX_BATCH``):
measured on the 2-core lab CPU, PyTorch eager is ~20 % cheaper per image at
batch 2-4 than at batch 1 but ~50 % dearer at batch 16 (cache-bound); on a
GPU, where batch 16 costs little more than batch 1, set ``MAX_BATCH=16``.
Everything shared with the ONNX service (validation, limits, metrics, the
micro-batcher and why it exists) is in ``servelab/serving.py``.
"""

from pathlib import Path

from servelab.serving import Settings, create_app

settings = Settings.from_env(default_model_path=Path(__file__).resolve().parent / "food11.pth",
                             default_max_batch=4)
app = create_app("pt", settings, title="Food-11 classifier (PyTorch)")

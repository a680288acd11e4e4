"""FastAPI inference service, PyTorch engine: ``uvicorn fastapi_pt.app:app``.

Runs the MobileNetV2 state_dict ``food11.pth`` (built by ``python -m
servelab.core.model build``) on CUDA when torch can run the GPU, else on the CPU
with one inference worker per core: a lone request gets ``INFER_THREADS``
intra-op threads (every core), and under load each worker runs on one.
Batching defaults to 2 (``MAX_BATCH``): measured on the 2-core lab CPU with 16
clients, 2 gave the most throughput (1 and 4 less); batch 16 is ~50 % dearer
per image than batch 1 there (cache-bound). On a GPU, where batch 16 costs
little more than batch 1, the default is ``MAX_BATCH=16`` and one worker
(H100, 16 clients: 452 req/s against 167 at batch 1).
Everything shared with the ONNX service (validation, limits, metrics, the
micro-batcher and why it exists) is in ``servelab/serving.py``.
"""

from pathlib import Path

from servelab.serving import Settings, create_app, engine_uses_gpu

settings = Settings.from_env(default_model_path=Path(__file__).resolve().parent / "food11.pth",
                             default_max_batch=2, gpu=engine_uses_gpu("pt"))
app = create_app("pt", settings, title="Food-11 classifier (PyTorch)")

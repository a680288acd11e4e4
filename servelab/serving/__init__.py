"""What both FastAPI inference services share; ``fastapi_pt/app.py`` and ``fastapi_onnx/app.py`` only
pick an engine and its defaults.

- ``settings``: ``Settings`` read from the environment, ``SettingsError``.
- ``engines``: the PyTorch and ONNX Runtime engines, which device each runs on, warm-up.
- ``batcher``: ``MicroBatcher``, decoding in a pool and forward passes on inference threads.
- ``stages``: where a /predict request's time goes (its stopwatch, the Server-Timing header).
- ``metrics``: the Prometheus metrics (every worker process's, with ``WORKERS`` > 1).
- ``http``: middlewares (metrics and stages, body limit), request/response schemas, error → status mapping.
- ``app``: ``create_app``; the model loads in the app's lifespan, never at import.
- ``serve``: the launcher (``python -m servelab.serving.serve APP``): the port checked, ``WORKERS``.

Imports ``servelab.core`` only; nothing here imports torch at module level.
Why the defaults are what they are: ``docs/decisions/2026-11-22-fastapi-*``,
``docs/decisions/2026-11-28-fastapi-stages-and-workers.md``.
"""

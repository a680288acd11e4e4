"""What both FastAPI inference services share; ``fastapi_pt/app.py`` and ``fastapi_onnx/app.py`` only
pick an engine and its defaults.

- ``settings``: ``Settings`` read from the environment, ``SettingsError``.
- ``engines``: the PyTorch and ONNX Runtime engines, which device each runs on, warm-up.
- ``batcher``: ``MicroBatcher``, decoding in a pool and forward passes on inference threads.
- ``metrics``: the Prometheus metrics.
- ``http``: middlewares (metrics, body limit), request/response schemas, error → status mapping.
- ``app``: ``create_app``; the model loads in the app's lifespan, never at import.

Imports ``servelab.core`` only; nothing here imports torch at module level.
Why the defaults are what they are: ``docs/decisions/2026-11-22-fastapi-*``.
"""

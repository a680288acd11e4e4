"""Benchmarks of the FastAPI services and of the model alone (``python -m servelab.bench ...``).

- ``fastapi --url URL``: N sequential requests from one client, then M from 16 concurrent clients;
  median, p95, p99 latency, throughput, and the mean of each stage of the service's requests
  (``client.py``).
- ``raw``: the model without a server (ONNX Runtime and PyTorch at batch 1 and 16, plus decode +
  preprocessing per image), the ceiling a service here can approach (``model.py``).
- ``fastapi-all``: all of it against local services, the model timed before and after them, and the
  services' speed targets as PASS/FAIL (``targets.py``).
- ``ceiling``: one service in several configurations (``WORKERS``), alternating with the model alone:
  each one's share of the ceiling, its stage breakdown, and the configuration that gets closest
  (``closest.py``).

The functions return dicts, for notebooks and ``servelab.results.store.append_rows``.
"""

from servelab.bench.client import (
    BenchError,
    Connection,
    format_table,
    request_bodies,
    run_concurrent,
    run_sequential,
    summarise,
)
from servelab.bench.model import bracket_raw, ceiling, raw_figure, run_raw, time_preprocess
from servelab.bench.targets import fastapi_all, speed_targets

__all__ = ["BenchError", "Connection", "bracket_raw", "ceiling", "fastapi_all", "format_table", "raw_figure",
           "request_bodies", "run_concurrent", "run_raw", "run_sequential", "speed_targets", "summarise",
           "time_preprocess"]

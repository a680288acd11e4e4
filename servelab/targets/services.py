"""Start the lab's web services as local processes (the ``local`` target).

The same app modules run in the containers of the GPU targets; here they run
under uvicorn (through ``servelab.serving.serve``, as the images' CMD) / gunicorn
on 127.0.0.1 with a free port, a log file under ``results/logs`` and a ready-wait
that names what it waited for.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab.core.paths import REPO_ROOT
from servelab.core.procs import ManagedProcess, free_port, wait_until
from servelab.results.store import results_dir

FASTAPI_APPS = {"pt": "fastapi_pt.app:app", "onnx": "fastapi_onnx.app:app"}
FLASK_APP = "flask_app.app:create_app()"
FLASK_CONFIG = "flask_app/gunicorn_conf.py"  # settings and port checked before any worker starts


@dataclass
class Service:
    """A running local service: its process and the base URL it answers on."""

    name: str
    url: str
    process: ManagedProcess
    backend: str = ""  # GourmetGram only: the backend it was started against (PREDICT_BACKEND)
    upstream: str = ""  # GourmetGram only: that backend's URL
    workers: int | None = None  # FastAPI only: the worker processes asked for (None: its default)

    def stop(self) -> None:
        self.process.stop()

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _log_path(name: str, log_dir: Path | None) -> Path:
    return Path(log_dir or results_dir() / "logs") / f"{name}.log"


def _start(name: str, argv: list[str], port: int, env: Mapping[str, str] | None,
           log_dir: Path | None, timeout: float) -> Service:
    """Launch ``argv`` and wait for its /health; a service that never gets ready is stopped."""
    proc = ManagedProcess(name, argv, _log_path(f"{name}-{port}", log_dir), env=env, cwd=REPO_ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        proc.wait_http(f"{url}/health", timeout)
    except BaseException:
        proc.stop()
        raise
    return Service(name, url, proc)


def start_fastapi(kind: str, port: int | None = None, env: Mapping[str, str] | None = None,
                  log_dir: Path | None = None, timeout: float = 120.0, workers: int | None = None) -> Service:
    """Start ``fastapi_pt`` (kind "pt") or ``fastapi_onnx`` ("onnx") and wait until every one of its
    ``workers`` processes (None: the service's default, ``$WORKERS`` or 1) has loaded the model."""
    if kind not in FASTAPI_APPS:
        raise ValueError(f"unknown FastAPI service {kind!r}; choose one of {sorted(FASTAPI_APPS)}")
    port = port or free_port()
    name = f"fastapi_{kind}"
    argv = [sys.executable, "-m", "servelab.serving.serve", FASTAPI_APPS[kind], "--host", "127.0.0.1",
            "--port", str(port), "--no-access-log", *(["--workers", str(workers)] if workers else [])]
    service = _start(name, argv, port, env, log_dir, timeout)
    service.workers = workers
    try:
        _wait_for_workers(service, timeout)
    except BaseException:
        service.stop()
        raise
    return service


def _wait_for_workers(service: Service, timeout: float) -> None:
    """Wait until /metrics counts as many worker processes with the model loaded as /health says it runs
    (the first ready worker answers /health while the others may still be loading)."""
    import json
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # our own host: never a proxy

    def get(path: str) -> str:
        with opener.open(f"{service.url}{path}", timeout=5) as response:
            return str(response.read().decode())

    wanted = int(json.loads(get("/health")).get("processes", 1))

    def ready() -> bool:
        try:
            text = get("/metrics")
        except OSError:
            return False
        return sum(s.value for f in text_string_to_metric_families(text) if f.name == "service_workers_ready"
                   for s in f.samples) >= wanted

    wait_until(ready, f"{service.name}'s {wanted} worker processes to load the model", timeout,
               alive=service.process.exit_problem)


def start_flask(env: Mapping[str, str] | None = None, port: int | None = None,
                log_dir: Path | None = None, timeout: float = 60.0, workers: int = 1) -> Service:
    """Start GourmetGram under gunicorn (configured by ``env``; ``workers`` processes of 4 threads)
    and wait for /health."""
    port = port or free_port()
    argv = [sys.executable, "-m", "gunicorn", "-c", str(REPO_ROOT / FLASK_CONFIG),
            "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--threads", "4",
            "--chdir", str(REPO_ROOT), FLASK_APP]
    return _start("flask", argv, port, env, log_dir, timeout)

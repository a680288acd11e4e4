"""Target ``local``: the services as plain processes on 127.0.0.1 — uvicorn, the Triton server
binary, gunicorn — started by ``servelab.targets.services`` and ``servelab.triton.server``;
commands run in the project root on this machine."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from servelab.core.paths import REPO_ROOT, shown
from servelab.targets.base import (
    FASTAPI_APPS,
    LAB_MODELS,
    MODEL_REPOSITORY,
    SERVICE_PORTS,
    STACK_SERVICES,
    CommandResult,
    Stack,
    as_bytes,
    check_flask_backend,
    check_service,
    check_stack,
    port_of,
    run_local,
    safe_relpath,
)


def _said_started(argv: Sequence[str], url: str, env: dict[str, str] | None = None) -> None:
    """Print the command a service was started with (what ``docker compose up`` is on a GPU host)."""
    prefix = "".join(f"{key}={shlex.quote(value)} " for key, value in (env or {}).items())
    print(f"$ {shown(prefix + shlex.join(str(a) for a in argv))}\n  -> ready at {url}")


class LocalStack(Stack):
    """Services as local processes; commands run in the project root on this machine. Triton's models
    go on this host's GPUs when it has any (``servelab.core.gpu.gpu_count``; ``gpus`` overrides,
    ``SERVELAB_GPUS=0`` keeps them on KIND_CPU), as they do on the node. ``triton_flags``: tritonserver
    flags after the lab's own (``servelab.triton.command``)."""

    target = "local"

    def __init__(self, root: Path = REPO_ROOT, repository: Path | None = None,
                 fastapi_app: str | None = None, log_dir: Path | None = None,
                 models: Sequence[str] = LAB_MODELS, ready_timeout: float = 180.0,
                 flask_backend: str = "triton", gpus: int | None = None,
                 triton_flags: Sequence[str] = ()) -> None:
        from servelab.core.gpu import gpu_count

        self.gpu_count = gpu_count() if gpus is None else int(gpus)
        self.has_gpu = self.gpu_count > 0
        self.root = Path(root)
        self.repository = Path(repository) if repository else self.root / MODEL_REPOSITORY
        self.choose(fastapi_app or os.environ.get("FASTAPI_APP", "fastapi_pt"))
        self.log_dir = log_dir
        self.models = tuple(models)
        self.ready_timeout = ready_timeout
        self.triton_flags = tuple(triton_flags)
        self.choose(flask_backend=flask_backend)  # on the triton stack: triton | triton_onnx
        self._services: dict[str, Any] = {}  # service name → Service (url, stop) or TritonServer

    # -- lifecycle
    def up(self, stack: str, services: Sequence[str] | None = None, timeout: float = 600.0, *,
           fastapi_app: str | None = None, flask_backend: str | None = None,
           fastapi_workers: int | None = None) -> None:
        """Start the stack's processes that are not running yet (restarting what another app, worker count
        or backend was chosen for)."""
        self.choose(fastapi_app, flask_backend, fastapi_workers)
        wanted = set(services or STACK_SERVICES[check_stack(stack)])
        for service in wanted:
            check_service(service)
        running = self._services.get("fastapi_server")
        if running is not None and "fastapi_server" in wanted and \
                (running.name, running.workers) != (self.fastapi_app, self.fastapi_workers):
            self._stop("fastapi_server")  # another FastAPI app or worker count was asked for
        if stack == "fastapi" and "fastapi_server" in wanted and "fastapi_server" not in self._services:
            from servelab.targets.services import start_fastapi

            self._services["fastapi_server"] = start_fastapi(
                FASTAPI_APPS[self.fastapi_app], log_dir=self.log_dir,
                timeout=min(timeout, self.ready_timeout), workers=self.fastapi_workers)
            _said_started(self._services["fastapi_server"].process.argv, self._services["fastapi_server"].url)
        if stack == "triton" and "triton_server" in wanted and "triton_server" not in self._services:
            self._services["triton_server"] = self._start_triton(timeout)
        if "flask" in wanted:
            self._start_flask(stack, timeout)
        elif self._flask_upstream_moved():
            flask_stack = "fastapi" if self._services["flask"].backend == "fastapi" else "triton"
            self._start_flask(flask_stack, timeout)  # its server was restarted on another port

    def _flask_upstream_moved(self) -> bool:
        flask = self._services.get("flask")
        if flask is None:
            return False
        upstream = self._services.get("fastapi_server" if flask.backend == "fastapi" else "triton_server")
        return upstream is not None and upstream.url != flask.upstream

    def _start_triton(self, timeout: float) -> Any:
        """Deploy the staged models into the live repository (CPU-adapted without a GPU), start Triton,
        load them."""
        from servelab.triton.repository import deploy_all
        from servelab.triton.server import TritonServer

        deploy_all(self.repository, gpu=self.has_gpu, names=self.models,
                   onnx_backend=self.triton_has_backend("onnxruntime"))  # the wheel's Triton: the runner
        log = Path(self.log_dir) / "tritonserver.log" if self.log_dir else None
        server = TritonServer(self.repository, log_path=log, server_flags=self.triton_flags)
        server.start(timeout=min(timeout, self.ready_timeout))
        _said_started(server.argv(), server.url)
        try:
            for name in self.models:
                server.client().load_model(name)
        except BaseException:
            server.stop()
            raise
        return server

    def _start_flask(self, stack: str, timeout: float) -> None:
        """GourmetGram pointed at this stack's backend (restarted when it pointed at the other one)."""
        backend = "fastapi" if stack == "fastapi" else check_flask_backend(self.flask_backend)
        current = self._services.get("flask")
        upstream = self._services.get("fastapi_server" if backend == "fastapi" else "triton_server")
        if current is not None and current.backend == backend and upstream is not None \
                and current.upstream == upstream.url:
            return
        if current is not None:
            self._stop("flask")
        if upstream is None:
            raise RuntimeError(f"flask needs the {stack} stack's server: bring it up first")
        env = ({"PREDICT_BACKEND": "fastapi", "FASTAPI_SERVER_URL": upstream.url} if backend == "fastapi"
               else {"PREDICT_BACKEND": backend, "TRITON_SERVER_URL": upstream.url})
        from servelab.targets.services import start_flask

        service = start_flask(env=env, log_dir=self.log_dir, timeout=min(timeout, self.ready_timeout))
        _said_started(service.process.argv, service.url, env)
        service.backend = backend
        service.upstream = upstream.url
        self._services["flask"] = service

    def _stop(self, service: str) -> None:
        handle = self._services.pop(service, None)
        if handle is not None:
            handle.stop()

    def down(self, stack: str | None = None, timeout: float = 120.0) -> None:
        """Stop the stack's processes (every process this stack started when ``stack`` is None)."""
        services = list(self._services) if stack is None else list(STACK_SERVICES[check_stack(stack)])
        flask = self._services.get("flask")
        flask_stack = "fastapi" if getattr(flask, "backend", None) == "fastapi" else "triton"
        if stack is not None and flask is not None and flask_stack != stack:
            services.remove("flask")  # GourmetGram is pointed at the other stack: leave it
        for service in ("flask", *[s for s in services if s != "flask"]):
            if service in services:
                self._stop(service)

    @property
    def running(self) -> list[str]:
        """Names of the services this stack has running now."""
        return sorted(self._services)

    def service(self, name: str) -> Any:
        """The running process handle of ``name`` (a ``Service`` or a ``TritonServer``: url, pid, stop)."""
        if name not in self._services:
            raise RuntimeError(f"{name} is not running on the local target: call up() first")
        return self._services[name]

    # -- addresses
    def url(self, service: str, port: str = "http") -> str:
        port_of(SERVICE_PORTS, service, port)
        handle = self._services.get(service)
        if handle is None:
            raise RuntimeError(f"{service} is not running on the local target: call up() first")
        if service == "triton_server":
            if port == "metrics":
                return handle.metrics_url.removesuffix("/metrics")
            return f"http://{handle.grpc_url if port == 'grpc' else handle.url}"
        return str(handle.url)

    # -- host actions
    def run(self, argv: Sequence[str], service: str | None = None,
            timeout: float | None = None) -> CommandResult:
        """Run in the project root; with ``service`` too (every local service shares this host)."""
        env = dict(os.environ)
        if service is not None:
            check_service(service)
            # as in the Jupyter image: perf_analyzer on PATH, its libcudart found
            from servelab.triton.perf import perf_analyzer_env

            env = perf_analyzer_env()
            env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        return run_local(argv, self.root, timeout, env)

    def _path(self, relpath: str) -> Path:
        return self.root / safe_relpath(relpath)

    def write_file(self, relpath: str, content: bytes | str) -> None:
        path = self._path(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(as_bytes(content))

    def read_file(self, relpath: str) -> bytes:
        return self._path(relpath).read_bytes()

    def reload_model(self, name: str, config_json: str | None = None) -> None:
        triton = self._services.get("triton_server")
        if triton is None:
            raise RuntimeError("no Triton server on the local target: call up('triton') first")
        triton.client().load_model(name, config=config_json)

    def fetch(self, remote_relpath: str, local_path: Path) -> Path:
        src, dest = self._path(remote_relpath), Path(local_path)
        if not src.is_file():
            raise FileNotFoundError(f"no result file {src}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.resolve() != dest.resolve():
            shutil.copyfile(src, dest)
        return dest

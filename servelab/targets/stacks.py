"""The implementations of ``servelab.targets.base.Stack``.

- ``LocalStack`` (target ``local``): plain processes on 127.0.0.1 — uvicorn,
  the Triton server binary, gunicorn — started by ``servelab.targets.services`` and
  ``servelab.triton.server``.
- ``ComposeStack`` (target ``docker``): ``docker compose`` with the files in
  ``docker/`` on the host the kernel runs on. On the Chameleon node that is the
  student's Jupyter container (``docker/docker-compose-jupyter.yaml``), so the
  ``chameleon`` target has no stack here: see ``NODE_NOTEBOOKS``.

Paths are the same on every target, relative to the project root: the live
Triton repository is ``models/`` and results are written under ``results/``.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from servelab.core.paths import REPO_ROOT
from servelab.targets.base import CommandResult, Stack

STACKS = ("fastapi", "triton")
MODEL_REPOSITORY = "models"
LAB_MODELS = ("food_classifier", "food_classifier_onnx")
FASTAPI_APPS = {"fastapi_pt": "pt", "fastapi_onnx": "onnx"}
COMPOSE_FILES = {"fastapi": "docker/docker-compose-fastapi.yaml",
                 "triton": "docker/docker-compose-triton.yaml"}
# what each compose stack runs (keep in step with the compose files; a test checks it)
STACK_SERVICES = {"fastapi": ("fastapi_server", "flask"),
                  "triton": ("triton_server", "flask")}
# container ports, as the services reach each other on the compose network
SERVICE_PORTS: dict[str, dict[str, int]] = {
    "fastapi_server": {"http": 8000},
    "triton_server": {"http": 8000, "grpc": 8001, "metrics": 8002},
    "flask": {"http": 5000},
}
# ports published on the host (what a browser or the bench on the host uses)
HOST_PORTS: dict[str, dict[str, int]] = {
    "fastapi_server": {"http": 8000},
    "triton_server": {"http": 8000, "grpc": 8001, "metrics": 8002},
    "flask": {"http": 80},
}


def _check_stack(stack: str) -> str:
    if stack not in STACKS:
        raise ValueError(f"unknown stack {stack!r}: choose one of {', '.join(STACKS)}")
    return stack


FLASK_TRITON_BACKENDS = ("triton", "triton_onnx")


def _check_flask_backend(backend: str) -> str:
    if backend not in FLASK_TRITON_BACKENDS:
        raise ValueError(f"flask_backend={backend!r}: on the triton stack GourmetGram calls "
                         f"{' or '.join(FLASK_TRITON_BACKENDS)}")
    return backend


def _check_service(service: str) -> str:
    if service not in SERVICE_PORTS:
        raise ValueError(f"unknown service {service!r}: choose one of {', '.join(SERVICE_PORTS)}")
    return service


def _port(table: Mapping[str, Mapping[str, int]], service: str, port: str) -> int:
    ports = table[_check_service(service)]
    if port not in ports:
        raise ValueError(f"service {service} has no {port!r} port: choose one of {', '.join(ports)}")
    return ports[port]


def _safe_relpath(relpath: str) -> str:
    """``relpath`` normalised, refused when it leaves the project root (a typo must not write to /etc)."""
    norm = posixpath.normpath(str(relpath).replace("\\", "/"))
    if norm.startswith(("/", "../")) or norm in ("..", "."):
        raise ValueError(f"{relpath!r} is not a path inside the project root")
    return norm


def _as_bytes(content: bytes | str) -> bytes:
    return content.encode() if isinstance(content, str) else bytes(content)


def _run_local(argv: Sequence[str], cwd: Path, timeout: float | None,
               env: Mapping[str, str] | None = None) -> CommandResult:
    """Run ``argv`` in ``cwd``; a timeout becomes a TimeoutError naming the command."""
    try:
        done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None, check=False)
    except subprocess.TimeoutExpired as exc:
        raise TimeoutError(f"timed out after {timeout:.0f} s running: {shlex.join(argv)}") from exc
    return CommandResult(list(argv), done.returncode, done.stdout, done.stderr)


# --------------------------------------------------------------------------- local
class LocalStack(Stack):
    """Services as local processes; commands run in the project root on this machine."""

    target = "local"
    has_gpu = False

    def __init__(self, root: Path = REPO_ROOT, repository: Path | None = None,
                 fastapi_app: str | None = None, log_dir: Path | None = None,
                 models: Sequence[str] = LAB_MODELS, ready_timeout: float = 180.0,
                 flask_backend: str = "triton") -> None:
        self.root = Path(root)
        self.repository = Path(repository) if repository else self.root / MODEL_REPOSITORY
        self.fastapi_app = fastapi_app or os.environ.get("FASTAPI_APP", "fastapi_pt")
        if self.fastapi_app not in FASTAPI_APPS:
            raise ValueError(f"FASTAPI_APP={self.fastapi_app!r}: choose one of {', '.join(FASTAPI_APPS)}")
        self.log_dir = log_dir
        self.models = tuple(models)
        self.ready_timeout = ready_timeout
        self.flask_backend = _check_flask_backend(flask_backend)  # on the triton stack: triton | triton_onnx
        self._services: dict[str, Any] = {}  # service name → Service (url, stop) or TritonServer

    # -- lifecycle
    def up(self, stack: str, services: Sequence[str] | None = None, timeout: float = 600.0) -> None:
        """Start the stack's processes that are not running yet (jupyter is this kernel: nothing to start)."""
        wanted = set(services or STACK_SERVICES[_check_stack(stack)])
        for service in wanted:
            _check_service(service)
        running = self._services.get("fastapi_server")
        if running is not None and "fastapi_server" in wanted and running.name != self.fastapi_app:
            self._stop("fastapi_server")  # the other FastAPI app was asked for (fastapi_app changed)
        if stack == "fastapi" and "fastapi_server" in wanted and "fastapi_server" not in self._services:
            from servelab.targets.services import start_fastapi

            self._services["fastapi_server"] = start_fastapi(
                FASTAPI_APPS[self.fastapi_app], log_dir=self.log_dir,
                timeout=min(timeout, self.ready_timeout))
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
        """Deploy the staged models into the live repository (CPU-adapted), start Triton, load them."""
        from servelab.triton.repository import deploy_all
        from servelab.triton.server import TritonServer

        deploy_all(self.repository, gpu=False, names=self.models)
        log = Path(self.log_dir) / "tritonserver.log" if self.log_dir else None
        server = TritonServer(self.repository, log_path=log).start(timeout=min(timeout, self.ready_timeout))
        try:
            for name in self.models:
                server.client().load_model(name)
        except BaseException:
            server.stop()
            raise
        return server

    def _start_flask(self, stack: str, timeout: float) -> None:
        """GourmetGram pointed at this stack's backend (restarted when it pointed at the other one)."""
        backend = "fastapi" if stack == "fastapi" else _check_flask_backend(self.flask_backend)
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
        service.backend = backend  # type: ignore[attr-defined]
        service.upstream = upstream.url  # type: ignore[attr-defined]
        self._services["flask"] = service

    def _stop(self, service: str) -> None:
        handle = self._services.pop(service, None)
        if handle is not None:
            handle.stop()

    def down(self, stack: str | None = None, timeout: float = 120.0) -> None:
        """Stop the stack's processes (every process this stack started when ``stack`` is None)."""
        services = list(self._services) if stack is None else list(STACK_SERVICES[_check_stack(stack)])
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

    # -- addresses
    def url(self, service: str, port: str = "http") -> str:
        _port(SERVICE_PORTS, service, port)
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
            _check_service(service)
            # as in the Jupyter image: perf_analyzer on PATH, its libcudart found
            from servelab.triton.perf import perf_analyzer_env

            env = perf_analyzer_env()
            env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        return _run_local(argv, self.root, timeout, env)

    def _path(self, relpath: str) -> Path:
        return self.root / _safe_relpath(relpath)

    def write_file(self, relpath: str, content: bytes | str) -> None:
        path = self._path(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_as_bytes(content))

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


# --------------------------------------------------------------------------- compose
class Transport(Protocol):
    """Where compose commands run and files live (this host; a recording stand-in in tests)."""

    host: str

    def run(self, argv: Sequence[str], timeout: float | None) -> CommandResult: ...
    def put(self, relpath: str, content: bytes) -> None: ...
    def get(self, relpath: str) -> bytes: ...
    def get_file(self, relpath: str, local_path: Path) -> None: ...


class LocalTransport:
    """Commands as subprocesses in ``root``; files under ``root``."""

    def __init__(self, root: Path = REPO_ROOT, host: str = "localhost") -> None:
        self.root = Path(root)
        self.host = host

    def run(self, argv: Sequence[str], timeout: float | None) -> CommandResult:
        return _run_local(argv, self.root, timeout)

    def put(self, relpath: str, content: bytes) -> None:
        path = self.root / _safe_relpath(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)

    def get(self, relpath: str) -> bytes:
        return (self.root / _safe_relpath(relpath)).read_bytes()

    def get_file(self, relpath: str, local_path: Path) -> None:
        src = self.root / _safe_relpath(relpath)
        if src.resolve() != Path(local_path).resolve():
            shutil.copyfile(src, local_path)


def owner_ids(root: Path) -> dict[str, str]:
    """``HOST_UID``/``HOST_GID``: the checkout owner's ids, which every container that writes into
    the checkout runs as (the compose files refuse to start without them)."""
    st = os.stat(root)
    return {"HOST_UID": str(st.st_uid), "HOST_GID": str(st.st_gid)}


class ComposeStack(Stack):
    """``docker compose`` stacks from ``docker/`` on the host this kernel runs on (target ``docker``).

    The kernel is the student's Jupyter container on the GPU host (or a shell
    on it): the stacks' published ports are ``localhost:8000`` etc., so every
    client, perf_analyzer included, runs on the same machine as the servers.
    Each stack is its own compose project (``servelab-fastapi``,
    ``servelab-triton``); both publish port 8000, so bringing one up first
    brings the other down. The Jupyter server is a third project that neither
    touches. ``--wait`` makes ``up`` return only when every healthcheck passes.
    """

    target = "docker"
    has_gpu = True

    def __init__(self, transport: Transport | None = None, root: Path = REPO_ROOT,
                 fastapi_app: str | None = None, stack: str | None = None,
                 env: Mapping[str, str] | None = None, flask_backend: str = "triton") -> None:
        self.root = Path(root)
        self.transport: Transport = transport or LocalTransport(self.root)
        self.flask_backend = _check_flask_backend(flask_backend)  # FLASK_BACKEND in the triton stack
        self.fastapi_app = fastapi_app or os.environ.get("FASTAPI_APP", "fastapi_pt")
        if self.fastapi_app not in FASTAPI_APPS:
            raise ValueError(f"FASTAPI_APP={self.fastapi_app!r}: choose one of {', '.join(FASTAPI_APPS)}")
        self.env = dict(env or {})
        self.current = _check_stack(stack) if stack else None  # set by up(); pass it in a new kernel

    # -- the commands
    def compose(self, stack: str, *args: str) -> list[str]:
        """The ``docker compose`` argv for ``stack`` (variables as an ``env`` prefix, as a shell shows it)."""
        variables = {"FASTAPI_APP": self.fastapi_app,
                     "FLASK_BACKEND": _check_flask_backend(self.flask_backend),
                     **owner_ids(self.root), **self.env}
        prefix = ["env", *(f"{key}={value}" for key, value in sorted(variables.items()))]
        return [*prefix, "docker", "compose", "-p", f"servelab-{_check_stack(stack)}",
                "-f", COMPOSE_FILES[stack], *args]

    def _run(self, argv: Sequence[str], timeout: float | None) -> CommandResult:
        return self.transport.run(argv, timeout)

    def prepare_models_argv(self) -> list[str]:
        """The lab's ``cp -r models_staging/x models/``, for models not in the live repository yet."""
        names = " ".join(LAB_MODELS)
        script = (f"mkdir -p {MODEL_REPOSITORY} && for m in {names}; do "
                  f"[ -e {MODEL_REPOSITORY}/$m ] || cp -r models_staging/$m {MODEL_REPOSITORY}/; done")
        return ["sh", "-c", script]

    def up(self, stack: str, services: Sequence[str] | None = None, timeout: float = 600.0) -> None:
        _check_stack(stack)
        for service in services or ():
            if service not in STACK_SERVICES[stack]:
                raise ValueError(f"the {stack} stack has no service {service!r}: "
                                 f"it has {', '.join(STACK_SERVICES[stack])}")
        for other in STACKS:
            if other != stack:
                self._run(self.compose(other, "down"), 300).check()
        if stack == "triton":  # made by this kernel's user (the checkout owner) before Triton mounts it
            self._run(self.prepare_models_argv(), 60).check()
        argv = self.compose(stack, "up", "--build", "-d", "--wait", "--wait-timeout", str(int(timeout)),
                            *(services or ()))
        self._run(argv, timeout + 1800).check()  # the first build downloads images: allow for it
        self.current = stack

    def down(self, stack: str | None = None, timeout: float = 120.0) -> None:
        for name in [_check_stack(stack)] if stack else list(STACKS):
            self._run(self.compose(name, "down", "--timeout", str(int(min(timeout, 60)))), timeout).check()
        if stack is None or stack == self.current:
            self.current = None

    def _stack_of(self, service: str) -> str:
        for stack in STACKS:
            if service in STACK_SERVICES[stack] and service != "flask":
                return stack
        if self.current is None:
            raise RuntimeError(f"no stack is up to run {service} in: call up('fastapi'|'triton') first, "
                               "or pass stack=... when the stack was started from another kernel")
        return self.current

    def exec_argv(self, service: str, argv: Sequence[str]) -> list[str]:
        """``docker compose exec -T`` (no TTY: output is captured) of ``argv`` in ``service``."""
        return self.compose(self._stack_of(_check_service(service)), "exec", "-T", service, *argv)

    def run(self, argv: Sequence[str], service: str | None = None,
            timeout: float | None = None) -> CommandResult:
        full = list(argv) if service is None else self.exec_argv(service, argv)
        return self._run(full, timeout)

    # -- addresses
    def url(self, service: str, port: str = "http") -> str:
        return f"http://{self.transport.host}:{_port(HOST_PORTS, service, port)}"

    def service_address(self, service: str, port: str = "http") -> str:
        return f"{service}:{_port(SERVICE_PORTS, service, port)}"

    def perf_options(self, input_data: Path | None = None) -> dict[str, Any]:
        """As on every target, plus the GPU metrics perf_analyzer collects from Triton's metrics port."""
        metrics = self.url("triton_server", "metrics").split("://", 1)[-1]
        return {**super().perf_options(input_data), "collect_metrics": True,
                "metrics_url": f"{metrics}/metrics"}

    # -- files and models
    def write_file(self, relpath: str, content: bytes | str) -> None:
        self.transport.put(_safe_relpath(relpath), _as_bytes(content))

    def read_file(self, relpath: str) -> bytes:
        return self.transport.get(_safe_relpath(relpath))

    def reload_model(self, name: str, config_json: str | None = None) -> None:
        """Load ``name`` again through Triton's model-control API (HTTP, from this kernel)."""
        import tritonclient.http as httpclient

        self.current = self.current or "triton"
        address = self.url("triton_server").split("://", 1)[-1]
        client = httpclient.InferenceServerClient(address, network_timeout=300.0, connection_timeout=30.0)
        client.load_model(name, config=config_json or None)

    def fetch(self, remote_relpath: str, local_path: Path) -> Path:
        dest = Path(local_path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.transport.get_file(_safe_relpath(remote_relpath), dest)
        return dest


NODE_NOTEBOOKS = ("notebook 01 (reserve), 02 (launch) and 08 (tear down) run with target='chameleon' "
                  "from Chameleon's Jupyter; notebooks 03-07 run on the node, in the Jupyter server that "
                  "notebook 02 started and printed the URL of, with target='docker', so that every client "
                  "and every utilisation sample runs next to the servers (measuring across the network "
                  "measures the network). The instructor's headless run does both: ./lab run --target "
                  "chameleon")


def make(target: str, **options: Any) -> Stack:
    """The ``Stack`` for ``target`` ("local", "docker"); ``options`` go to its constructor.

    "chameleon" has no stack of its own: the experiments run on the node as "docker"
    (``NODE_NOTEBOOKS``); asking for one raises a ParameterError that says so.
    """
    from servelab.lab.params import ParameterError

    classes: dict[str, type[Stack]] = {"local": LocalStack, "docker": ComposeStack}
    if target == "chameleon":
        raise ParameterError(f"target='chameleon' drives no services from here: {NODE_NOTEBOOKS}")
    if target not in classes:
        raise ValueError(f"unknown target {target!r}: choose one of {', '.join(classes)}")
    return classes[target](**options)

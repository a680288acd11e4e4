"""The one interface behind which the targets differ, and the vocabulary they share.

A notebook asks for ``servelab.targets.get_stack(target)`` and then only calls
these methods; what "bring up the Triton stack" means — local processes
(``targets.local``) or ``docker compose`` on the GPU host (``targets.docker``)
— lives in the implementations, never in ``if target`` branches elsewhere.

Service names are the Compose service names: ``fastapi_server``,
``triton_server``, ``flask``. Clients (the benchmarks, perf_analyzer, the
utilisation sampler) run where the kernel runs, which on every target is the
machine that runs the servers.
"""

from __future__ import annotations

import posixpath
import shlex
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.core.notices import SaidPlainly

TARGETS = ("local", "docker", "chameleon")


class TargetError(SaidPlainly, ValueError):
    """A target or stack asked for that cannot be had here; the message says what to do instead."""
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


def check_stack(stack: str) -> str:
    if stack not in STACKS:
        raise ValueError(f"unknown stack {stack!r}: choose one of {', '.join(STACKS)}")
    return stack


FLASK_TRITON_BACKENDS = ("triton", "triton_onnx", "triton_ensemble")


def check_flask_backend(backend: str) -> str:
    if backend not in FLASK_TRITON_BACKENDS:
        raise ValueError(f"flask_backend={backend!r}: on the triton stack GourmetGram calls "
                         f"{' or '.join(FLASK_TRITON_BACKENDS)}")
    return backend


def check_service(service: str) -> str:
    if service not in SERVICE_PORTS:
        raise ValueError(f"unknown service {service!r}: choose one of {', '.join(SERVICE_PORTS)}")
    return service


def port_of(table: Mapping[str, Mapping[str, int]], service: str, port: str) -> int:
    ports = table[check_service(service)]
    if port not in ports:
        raise ValueError(f"service {service} has no {port!r} port: choose one of {', '.join(ports)}")
    return ports[port]


def safe_relpath(relpath: str) -> str:
    """``relpath`` normalised, refused when it leaves the project root (a typo must not write to /etc)."""
    norm = posixpath.normpath(str(relpath).replace("\\", "/"))
    if norm.startswith(("/", "../")) or norm in ("..", "."):
        raise ValueError(f"{relpath!r} is not a path inside the project root")
    return norm


def as_bytes(content: bytes | str) -> bytes:
    return content.encode() if isinstance(content, str) else bytes(content)


def run_local(argv: Sequence[str], cwd: Path, timeout: float | None,
               env: Mapping[str, str] | None = None) -> CommandResult:
    """Run ``argv`` in ``cwd``; a timeout becomes a TimeoutError naming the command."""
    try:
        done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None, check=False)
    except subprocess.TimeoutExpired as exc:
        raise TimeoutError(f"timed out after {timeout:.0f} s running: {shlex.join(argv)}") from exc
    return CommandResult(list(argv), done.returncode, done.stdout, done.stderr)


@dataclass
class CommandResult:
    """What a command run on a target's host (or in one of its services) gave back."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> CommandResult:
        if self.returncode != 0:
            raise RuntimeError(
                f"command failed ({self.returncode}): {' '.join(self.argv)}\n{self.stderr[-2000:]}"
            )
        return self


class Stack(ABC):
    """Start/stop a set of services and act on the host they run on."""

    target: str = ""
    has_gpu: bool = False
    gpu_count: int = 0  # GPUs the stack's engines may use (the GPU plans of the notebooks follow it)
    root: Path  # the project root on the services' host
    fastapi_app: str  # which FastAPI service the fastapi stack runs: fastapi_pt | fastapi_onnx
    flask_backend: str  # what GourmetGram calls on the triton stack: triton | triton_onnx
    fastapi_workers: int | None = None  # its worker processes (WORKERS); None: the service's default
    triton_flags: tuple[str, ...] = ()  # server flags after the lab's own (servelab.triton.command)

    def choose(self, fastapi_app: str | None = None, flask_backend: str | None = None,
               fastapi_workers: int | None = None) -> None:
        """Set the FastAPI app (and its worker processes) and GourmetGram's Triton backend that ``up``
        starts from now on."""
        if fastapi_workers is not None:
            whole = isinstance(fastapi_workers, int) and not isinstance(fastapi_workers, bool)
            if not whole or fastapi_workers < 1:
                raise ValueError(f"WORKERS={fastapi_workers!r}: the FastAPI service's worker processes "
                                 "must be a whole number of at least 1")
            self.fastapi_workers = fastapi_workers
        if fastapi_app is not None:
            if fastapi_app not in FASTAPI_APPS:
                raise ValueError(f"FASTAPI_APP={fastapi_app!r}: choose one of {', '.join(FASTAPI_APPS)}")
            self.fastapi_app = fastapi_app
        if flask_backend is not None:
            self.flask_backend = check_flask_backend(flask_backend)

    @abstractmethod
    def up(self, stack: str, services: Sequence[str] | None = None, timeout: float = 600.0, *,
           fastapi_app: str | None = None, flask_backend: str | None = None,
           fastapi_workers: int | None = None) -> None:
        """Bring up ``stack`` ("fastapi" or "triton"), optionally only some services, and wait ready;
        ``fastapi_app``/``flask_backend``/``fastapi_workers`` choose the app, GourmetGram's backend and
        the FastAPI service's worker processes first (``choose``)."""

    @abstractmethod
    def down(self, stack: str | None = None, timeout: float = 120.0) -> None:
        """Stop ``stack`` (all stacks when None)."""

    @abstractmethod
    def url(self, service: str, port: str = "http") -> str:
        """Base URL of ``service`` as seen by the clients the lab runs (bench, perf_analyzer)."""

    def service_address(self, service: str, port: str = "http") -> str:
        """``host:port`` of ``service`` as the stack's other services reach it (GourmetGram → its
        server): the compose network on the compose targets (``triton_server:8000``); else ``url``'s."""
        return self.url(service, port).split("://", 1)[-1]

    def perf_options(self, input_data: Path | None = None) -> dict[str, Any]:
        """Keyword arguments for ``servelab.triton.experiments.measure``: perf_analyzer runs here,
        next to the kernel, against ``url("triton_server")``; ``input_data`` is its JSON input."""
        return {"input_data": input_data} if input_data is not None else {}

    @abstractmethod
    def run(self, argv: Sequence[str], service: str | None = None,
            timeout: float | None = None) -> CommandResult:
        """Run a command on the services' host, or inside ``service`` (``docker compose exec`` there)."""

    @abstractmethod
    def write_file(self, relpath: str, content: bytes | str) -> None:
        """Write a file under the project root on the host (e.g. a model's config.pbtxt)."""

    @abstractmethod
    def read_file(self, relpath: str) -> bytes:
        """Read a file under the project root on the host."""

    def wait_for_images(self, stack: str, services: Sequence[str] = ()) -> None:
        """Wait for the images ``stack`` needs while they are still being built or pulled (the compose
        targets: ``servelab.core.image_builds``); nothing to wait for elsewhere."""
        return

    def triton_has_backend(self, backend: str) -> bool:
        """Does the running Triton server have ``backend`` (e.g. "onnxruntime")? Not the local one:
        the wheel's Triton has only the Python backend."""
        return False

    @abstractmethod
    def reload_model(self, name: str, config_json: str | None = None) -> None:
        """Ask the live Triton server to (re)load ``name``, optionally with a config override."""

    @abstractmethod
    def fetch(self, remote_relpath: str, local_path: Path) -> Path:
        """Copy a result file from the host to this machine."""

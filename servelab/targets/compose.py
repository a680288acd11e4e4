"""Target ``docker``: the ``docker compose`` stacks in ``docker/`` on the host the kernel runs on.

On the Chameleon node that is the student's Jupyter container
(``docker/docker-compose-jupyter.yaml``), so the ``chameleon`` target has no
stack of its own (``NODE_NOTEBOOKS`` says where its notebooks run).
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from servelab.core.paths import REPO_ROOT
from servelab.targets.base import (
    COMPOSE_FILES,
    HOST_PORTS,
    LAB_MODELS,
    MODEL_REPOSITORY,
    SERVICE_PORTS,
    STACK_SERVICES,
    STACKS,
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
        return run_local(argv, self.root, timeout)

    def put(self, relpath: str, content: bytes) -> None:
        path = self.root / safe_relpath(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)

    def get(self, relpath: str) -> bytes:
        return (self.root / safe_relpath(relpath)).read_bytes()

    def get_file(self, relpath: str, local_path: Path) -> None:
        src = self.root / safe_relpath(relpath)
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
        self.choose(flask_backend=flask_backend)  # FLASK_BACKEND in the triton stack
        self.choose(fastapi_app or os.environ.get("FASTAPI_APP", "fastapi_pt"))
        self.env = dict(env or {})
        self.current = check_stack(stack) if stack else None  # set by up(); pass it in a new kernel

    # -- the commands
    def compose(self, stack: str, *args: str) -> list[str]:
        """The ``docker compose`` argv for ``stack`` (variables as an ``env`` prefix, as a shell shows it)."""
        variables = {"FASTAPI_APP": self.fastapi_app,
                     "FLASK_BACKEND": check_flask_backend(self.flask_backend),
                     **owner_ids(self.root), **self.env}
        prefix = ["env", *(f"{key}={value}" for key, value in sorted(variables.items()))]
        return [*prefix, "docker", "compose", "-p", f"servelab-{check_stack(stack)}",
                "-f", COMPOSE_FILES[stack], *args]

    def _run(self, argv: Sequence[str], timeout: float | None) -> CommandResult:
        return self.transport.run(argv, timeout)

    def prepare_models_argv(self) -> list[str]:
        """The lab's ``cp -r models_staging/x models/``, for models not in the live repository yet."""
        names = " ".join(LAB_MODELS)
        script = (f"mkdir -p {MODEL_REPOSITORY} && for m in {names}; do "
                  f"[ -e {MODEL_REPOSITORY}/$m ] || cp -r models_staging/$m {MODEL_REPOSITORY}/; done")
        return ["sh", "-c", script]

    def up(self, stack: str, services: Sequence[str] | None = None, timeout: float = 600.0, *,
           fastapi_app: str | None = None, flask_backend: str | None = None) -> None:
        self.choose(fastapi_app, flask_backend)
        check_stack(stack)
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
        print("$ " + shlex.join(argv))
        self._run(argv, timeout + 1800).check()  # the first build downloads images: allow for it
        self.current = stack

    def down(self, stack: str | None = None, timeout: float = 120.0) -> None:
        for name in [check_stack(stack)] if stack else list(STACKS):
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
        return self.compose(self._stack_of(check_service(service)), "exec", "-T", service, *argv)

    def run(self, argv: Sequence[str], service: str | None = None,
            timeout: float | None = None) -> CommandResult:
        full = list(argv) if service is None else self.exec_argv(service, argv)
        return self._run(full, timeout)

    # -- addresses
    def url(self, service: str, port: str = "http") -> str:
        return f"http://{self.transport.host}:{port_of(HOST_PORTS, service, port)}"

    def service_address(self, service: str, port: str = "http") -> str:
        return f"{service}:{port_of(SERVICE_PORTS, service, port)}"

    def perf_options(self, input_data: Path | None = None) -> dict[str, Any]:
        """As on every target, plus the GPU metrics perf_analyzer collects from Triton's metrics port."""
        metrics = self.url("triton_server", "metrics").split("://", 1)[-1]
        return {**super().perf_options(input_data), "collect_metrics": True,
                "metrics_url": f"{metrics}/metrics"}

    # -- files and models
    def write_file(self, relpath: str, content: bytes | str) -> None:
        self.transport.put(safe_relpath(relpath), as_bytes(content))

    def read_file(self, relpath: str) -> bytes:
        return self.transport.get(safe_relpath(relpath))

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
        self.transport.get_file(safe_relpath(remote_relpath), dest)
        return dest


NODE_NOTEBOOKS = ("notebook 01 (reserve), 02 (launch) and 08 (tear down) run with target='chameleon' "
                  "from Chameleon's Jupyter; notebooks 03-07 and 09 run on the node, in the Jupyter server "
                  "that notebook 02 started and printed the URL of, with target='docker', so that every "
                  "client and every utilisation sample runs next to the servers (measuring across the "
                  "network measures the network). The instructor's headless run does both: "
                  "./lab run --target chameleon")

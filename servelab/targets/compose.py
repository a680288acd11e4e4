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

from servelab.core import image_builds
from servelab.core.compose import explain_up_failure, file_args, gpu_runtime, up_args
from servelab.core.lab_steps import LAB_STEPS, and_list
from servelab.core.paths import ON_THE_NODE, REPO_ROOT, shown
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
from servelab.triton.command import FLAGS_VARIABLE


def engine_gpus(gpu: bool) -> int:
    """GPUs the containers get, as the plans count them: what the driver shows this process (the
    Jupyter container is given every GPU, as Triton's is); 1 where the engine has the NVIDIA runtime but
    this process sees none, and it says so. (``SERVELAB_DOCKER_GPU`` decides whether there are GPUs.)"""
    if not gpu:
        return 0
    from servelab.core.gpu import cuda_device_count

    count = cuda_device_count()
    if count == 0:
        print("the Docker engine has the NVIDIA runtime, but this process sees no GPU: the GPU plans assume "
              "1 GPU (run the notebooks in the lab's Jupyter container, which is given the GPUs)")
    return count or 1


TRITON_BACKENDS = "/opt/tritonserver/backends"  # where NGC's image keeps them (tritonserver's default)


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
    touches. ``--wait`` makes ``up`` return only when every healthcheck passes;
    ``up`` never builds (``servelab.core.compose``: images are built before the
    notebooks run). ``gpu``: whether containers get GPUs (default: ask the engine). ``triton_flags``:
    tritonserver flags after the lab's own, passed as ``TRITON_SERVER_FLAGS`` (``servelab.triton.command``).
    """

    target = "docker"

    def __init__(self, transport: Transport | None = None, root: Path = REPO_ROOT,
                 fastapi_app: str | None = None, stack: str | None = None,
                 env: Mapping[str, str] | None = None, flask_backend: str = "triton",
                 gpu: bool | None = None, triton_flags: Sequence[str] = ()) -> None:
        self.root = Path(root)
        self.transport: Transport = transport or LocalTransport(self.root)
        if gpu is None:
            gpu = gpu_runtime(lambda argv: self._said(self.transport.run(argv, 30)))
        self.has_gpu = gpu
        self.gpu_count = engine_gpus(gpu)
        self._backends: list[str] | None = None  # the Triton image's backends, once asked
        self.choose(flask_backend=flask_backend)  # FLASK_BACKEND in the triton stack
        self.choose(fastapi_app or os.environ.get("FASTAPI_APP", "fastapi_pt"))
        self.env = dict(env or {})
        self.triton_flags = tuple(triton_flags)
        self.current = check_stack(stack) if stack else None  # set by up(); pass it in a new kernel

    # -- the commands
    def compose(self, stack: str, *args: str) -> list[str]:
        """The ``docker compose`` argv for ``stack`` (variables as an ``env`` prefix, as a shell shows it)."""
        variables = {"FASTAPI_APP": self.fastapi_app,
                     **({"WORKERS": str(self.fastapi_workers)} if self.fastapi_workers else {}),
                     "FLASK_BACKEND": check_flask_backend(self.flask_backend),
                     **({FLAGS_VARIABLE: shlex.join(self.triton_flags)} if self.triton_flags else {}),
                     **owner_ids(self.root), **self.env}
        prefix = ["env", *(f"{key}={value}" for key, value in sorted(variables.items()))]
        return [*prefix, "docker", "compose", "-p", f"servelab-{check_stack(stack)}",
                *file_args(COMPOSE_FILES[stack], self.has_gpu), *args]

    def _run(self, argv: Sequence[str], timeout: float | None) -> CommandResult:
        return self.transport.run(argv, timeout)

    @staticmethod
    def _said(result: CommandResult) -> tuple[int, str]:
        return result.returncode, result.stdout + result.stderr

    def prepare_models(self) -> None:
        """The lab's models in the live repository before Triton starts (it loads them at start): each
        staged model not there yet is deployed adapted to this host, as the notebooks deploy it
        (KIND_CPU without GPUs; the Python-backend ONNX runner where the image has no onnxruntime)."""
        import tempfile

        from servelab.triton.repository import deploy_model

        missing = [name for name in LAB_MODELS if not self._exists(f"{MODEL_REPOSITORY}/{name}/config.pbtxt")]
        if not missing:
            return
        onnx = self.triton_has_backend("onnxruntime")
        with tempfile.TemporaryDirectory() as tmp:
            for name in missing:
                folder = deploy_model(name, Path(tmp), gpu=self.has_gpu, onnx_backend=onnx, quiet=True)
                print(f"deploying models_staging/{name} -> {MODEL_REPOSITORY}/{name} before Triton starts "
                      f"({'GPU' if self.has_gpu else 'KIND_CPU: no GPU runtime on this Docker host'}"
                      f"{'' if onnx else '; no onnxruntime backend in this image: Python-backend runner'})")
                for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                    live = f"{MODEL_REPOSITORY}/{name}/{path.relative_to(folder)}"
                    self.transport.put(live, path.read_bytes())

    def _read(self, relpath: str) -> bytes | None:
        try:
            return self.transport.get(relpath)
        except (OSError, KeyError, RuntimeError):
            return None

    def wait_for_images(self, stack: str, services: Sequence[str] = ()) -> None:
        """Wait for the images ``stack`` needs while ``./lab jupyter`` still builds them in the background
        (``servelab.core.image_builds``); at once when they are built."""
        image_builds.wait_for(self._read, image_builds.steps_for(stack, self.fastapi_app, services))

    def _exists(self, relpath: str) -> bool:
        try:
            self.transport.get(relpath)
        except (OSError, KeyError, RuntimeError):
            return False
        return True

    def up(self, stack: str, services: Sequence[str] | None = None, timeout: float = 600.0, *,
           fastapi_app: str | None = None, flask_backend: str | None = None,
           fastapi_workers: int | None = None) -> None:
        self.choose(fastapi_app, flask_backend, fastapi_workers)
        check_stack(stack)
        for service in services or ():
            if service not in STACK_SERVICES[stack]:
                raise ValueError(f"the {stack} stack has no service {service!r}: "
                                 f"it has {', '.join(STACK_SERVICES[stack])}")
        self.wait_for_images(stack, services or ())
        for other in STACKS:
            if other != stack:
                self._run(self.compose(other, "down"), 300).check()
        if stack == "triton":  # written by this kernel's user (the checkout owner) before Triton mounts it
            self.prepare_models()
        argv = self.compose(stack, *up_args(timeout, *(services or ())))
        print("$ " + shown(shlex.join(argv)))
        done = self._run(argv, timeout + 120)
        if done.returncode != 0:
            raise RuntimeError(explain_up_failure(
                f"the {stack} stack", done.stderr + done.stdout, self.compose(stack),
                lambda more: self._said(self._run(more, 120))))
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

    def triton_has_backend(self, backend: str) -> bool:
        """Asked of the Triton image, in a throw-away container (answered once per stack): NGC's image
        has onnxruntime; an image without it gets the Python-backend runner."""
        if self._backends is None:
            self.wait_for_images("triton")
            argv = self.compose("triton", "run", "--rm", "--no-deps", "--pull", "never", "--entrypoint", "ls",
                                "triton_server", TRITON_BACKENDS)
            done = self._run(argv, 120)
            if done.returncode != 0:
                raise RuntimeError(explain_up_failure("the Triton image", done.stderr + done.stdout,
                                                      self.compose("triton"), lambda more: (0, "")))
            self._backends = done.stdout.split()
        return backend in self._backends

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


NODE_NOTEBOOKS = (f"notebooks {and_list([f'{s.number} ({s.short})' for s in LAB_STEPS if s.where == 'hub'])} "
                  "run with target='chameleon' "
                  f"from Chameleon's Jupyter; notebooks {ON_THE_NODE} run on the node, in the Jupyter server "
                  "that notebook 02 started and printed the URL of, with target='docker', so that every "
                  "client and every utilisation sample runs next to the servers (measuring across the "
                  "network measures the network). The instructor's headless run does both: "
                  "./lab run --target chameleon")

"""A real Triton Inference Server on the local target, without Docker.

The ``nvidia-pytriton`` wheel carries a Triton 2.51 binary and its Python
backend; this module turns that into a server handle a notebook can start,
query and stop. The wheel's Python backend needs the stub built for the running
Python copied next to it, the directory of ``libpython3.X.so`` and the wheel's
bundled libraries on ``LD_LIBRARY_PATH`` and a ``python3`` whose packages the
stubs should import first on ``PATH`` (``stub_python_bin``) — see DESIGN.md.
Explicit model control lets the lab load and reload single models in seconds.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import sys
import sysconfig
import uuid
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from servelab.core.procs import ManagedProcess, free_port, http_ok, wait_until

SHM_GLOB_PREFIX = "triton_python_backend_shm_region"
_SERVERS: weakref.WeakSet[TritonServer] = weakref.WeakSet()
DEFAULT_EXIT_TIMEOUT_S = 5


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def pytriton_dist() -> Path:
    """Where the wheel keeps the server binary, its backends and the Python stubs."""
    import importlib.util

    # find_spec does not run pytriton/__init__ (its Python side needs packages we do not install)
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the Triton server binary comes with the nvidia-pytriton package, which is not installed "
            "in this Python; run scripts/setup.sh"
        )
    dist = Path(next(iter(spec.submodule_search_locations))).resolve() / "tritonserver"
    if not (dist / "bin" / "tritonserver").is_file():
        raise RuntimeError(f"no tritonserver binary under {dist}")
    return dist


def cache_dir() -> Path:
    """Per-user cache for the prepared backends directory and logs (``SERVELAB_CACHE``)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "servelab"
    return Path(os.environ.get("SERVELAB_CACHE", default))


def prepare_backends(target: Path | None = None) -> Path:
    """A backends directory whose Python backend has the stub for this Python.

    Copied (not linked) because the backend looks for the stub next to its own
    real path; re-copied only when the wheel's files changed.
    """
    dist = pytriton_dist()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = dist / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise RuntimeError(f"the Triton wheel has no Python-backend stub for Python {version} ({stub})")
    backends = target or cache_dir() / f"triton-backends-py{version}"
    python_dir = backends / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    sources = [*(p for p in (dist / "backends" / "python").iterdir() if p.is_file()), stub]
    for source in sources:
        dest = python_dir / source.name
        if not dest.exists() or dest.stat().st_size != source.stat().st_size \
                or dest.stat().st_mtime < source.stat().st_mtime:
            tmp = dest.with_suffix(dest.suffix + f".{os.getpid()}.tmp")
            shutil.copy2(source, tmp)
            tmp.replace(dest)
    return backends


def stub_python_bin() -> Path:
    """The folder put first on the server's PATH: the stubs import the packages of its ``python3``.

    The stub's embedded Python ignores PYTHONPATH and takes its prefix from the first ``python3`` on
    PATH. In a venv without PYTHONPATH that is the venv's own ``bin``. Otherwise (PYTHONPATH set, or a
    system Python) it is a small cached venv whose one ``.pth`` adds this process's ``sys.path`` in
    order, so the stubs import what this process imports (a numpy<2 put first on PYTHONPATH
    included). Why: docs/decisions/2026-11-26-triton-python-backend-on-gpu.md
    """
    if not os.environ.get("PYTHONPATH") and sys.prefix != sys.base_prefix:
        return Path(sys.executable).parent
    stdlib = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
    entries = [p for p in dict.fromkeys(os.path.abspath(p) for p in sys.path if p)
               if Path(p).is_dir() and p not in stdlib and not p.endswith("lib-dynload")]
    pth = "".join(f"import site; site.addsitedir({p!r})\n" for p in entries)
    key = hashlib.sha256(f"{sys.executable}\n{pth}".encode()).hexdigest()[:12]
    env = cache_dir() / f"triton-stub-env-py{sys.version_info.major}.{sys.version_info.minor}-{key}"
    if not (_site_dir(env) / "servelab-stub-path.pth").is_file():  # made once, then put in place whole
        import tempfile
        import venv

        env.parent.mkdir(parents=True, exist_ok=True)
        made = Path(tempfile.mkdtemp(prefix=env.name + ".", dir=env.parent))
        venv.EnvBuilder(with_pip=False, symlinks=True).create(made)
        _site_dir(made).mkdir(parents=True, exist_ok=True)
        (_site_dir(made) / "servelab-stub-path.pth").write_text(pth)
        try:
            made.rename(env)  # atomic; another process that made it first wins, with the same content
        except OSError:
            shutil.rmtree(made, ignore_errors=True)
    return env / "bin"


def _site_dir(env: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)}))


def server_env() -> dict[str, str]:
    """Environment the server and its Python stubs need (libraries, ``stub_python_bin`` first on PATH)."""
    libdirs = [sysconfig.get_config_var("LIBDIR") or "", str(_site_packages() / "nvidia_pytriton.libs")]
    old_ld = os.environ.get("LD_LIBRARY_PATH", "")
    return {
        "LD_LIBRARY_PATH": ":".join(p for p in [*libdirs, old_ld] if p),
        "PATH": f"{stub_python_bin()}:{os.environ.get('PATH', '')}",
    }


class ModelLoadError(RuntimeError):
    """Triton refused to load a model (bad config, missing file); the message says why."""


class TritonServer:
    """One tritonserver process serving ``repository`` with explicit model control.

    Ports default to free ones, so several servers (tests, notebooks) can run
    side by side; ``stop`` (also at exit and on Ctrl-C, via ManagedProcess)
    leaves no process and no shared-memory region behind.
    """

    def __init__(self, repository: Path, http_port: int | None = None, grpc_port: int | None = None,
                 metrics_port: int | None = None, log_path: Path | None = None,
                 server_flags: Sequence[str] = (), exit_timeout_s: int = DEFAULT_EXIT_TIMEOUT_S,
                 verbose: bool = False) -> None:
        self.repository = Path(repository).resolve()
        self.http_port = http_port or free_port()
        self.grpc_port = grpc_port or free_port()
        self.metrics_port = metrics_port or free_port()
        self.log_path = Path(log_path) if log_path else cache_dir() / "logs" / f"triton-{self.http_port}.log"
        self.server_flags = list(server_flags)  # after the lab's own flags
        self.exit_timeout_s = exit_timeout_s
        self.verbose = verbose
        self.shm_prefix = f"{SHM_GLOB_PREFIX}_servelab_{uuid.uuid4().hex[:8]}"
        self.process: ManagedProcess | None = None
        self._client: Any = None

    # -- addresses ---------------------------------------------------------
    @property
    def url(self) -> str:
        """HTTP endpoint as tritonclient and perf_analyzer take it (no scheme)."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    # -- lifecycle ---------------------------------------------------------
    def argv(self) -> list[str]:
        """The full command line (shown by notebooks, so students see what runs): the lab's flags
        (``servelab.triton.command``) for this process, then ``server_flags``."""
        from servelab.triton.command import Launch, argv

        return argv(Launch(str(self.repository), str(pytriton_dist() / "bin" / "tritonserver"),
                           http_port=self.http_port, grpc_port=self.grpc_port, metrics_port=self.metrics_port,
                           address="127.0.0.1", backend_directory=str(prepare_backends()),
                           shm_prefix=self.shm_prefix, exit_timeout_s=self.exit_timeout_s,
                           verbose=self.verbose, server_flags=tuple(self.server_flags), env=os.environ))

    def start(self, timeout: float = 120.0) -> TritonServer:
        """Start the server and wait until ``/v2/health/ready`` answers."""
        if self.running:
            return self
        if not self.repository.is_dir():
            raise FileNotFoundError(f"model repository {self.repository} does not exist")
        self.process = ManagedProcess("tritonserver", self.argv(), self.log_path, env=server_env())
        _stop_servers_first_at_exit()
        _SERVERS.add(self)
        try:
            self.process.wait_http(f"http://{self.url}/v2/health/ready", timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its shared-memory regions."""
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
        if self.process is not None:
            self.process.stop(timeout=self.exit_timeout_s + 10)
        for region in Path("/dev/shm").glob(f"{self.shm_prefix}*"):
            with contextlib.suppress(OSError):
                region.unlink()
        _SERVERS.discard(self)

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        return self.process.log_tail(lines) if self.process else "(server not started)"

    # -- models ------------------------------------------------------------
    def client(self) -> Any:
        """A tritonclient HTTP client for this server (one per handle, reused)."""
        import tritonclient.http as httpclient

        if self._client is None:
            self._client = httpclient.InferenceServerClient(self.url, network_timeout=120.0,
                                                            connection_timeout=30.0)
        return self._client

    def new_client(self, concurrency: int = 1) -> Any:
        """A separate HTTP client (e.g. for a thread that sends while the main one reloads)."""
        import tritonclient.http as httpclient

        return httpclient.InferenceServerClient(self.url, concurrency=concurrency,
                                                network_timeout=120.0, connection_timeout=30.0)

    def _check_alive(self) -> None:
        if self.process is None:
            raise RuntimeError("the Triton server is not started")
        if problem := self.process.exit_problem():
            raise RuntimeError(problem)

    def load(self, name: str, config: str | None = None, timeout: float = 120.0) -> None:
        """Load (or reload) ``name``; ``config`` is a JSON ModelConfig that overrides config.pbtxt.

        A refused load raises ``ModelLoadError`` with Triton's reply and the
        error lines it logged meanwhile (the reply alone is often just "failed
        to poll from model repository"); the previously loaded version keeps serving.
        """
        from tritonclient.utils import InferenceServerException

        self._check_alive()
        offset = self._log_size()
        try:
            self.client().load_model(name, config=config)
        except InferenceServerException as exc:
            self._check_alive()
            reasons = self.log_errors_since(offset)
            detail = f" — server log: {' | '.join(reasons)}" if reasons else ""
            raise ModelLoadError(f"Triton refused to load model '{name}': {exc.message()}{detail}") from None
        self.wait_model_ready(name, timeout)

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_errors_since(self, offset: int) -> list[str]:
        """Error lines (``E...``) the server logged after byte ``offset``, message part only."""
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(offset)
                text = handle.read().decode(errors="replace")
        except OSError:
            return []
        errors = []
        for line in text.splitlines():
            if line.startswith("E"):
                errors.append(line.split("] ", 1)[-1].strip().strip('"'))
        return errors

    def unload(self, name: str) -> None:
        self._check_alive()
        self.client().unload_model(name)

    def wait_model_ready(self, name: str, timeout: float = 60.0) -> None:
        """Wait until ``/v2/models/<name>/ready`` answers, failing fast if the server dies."""
        url = f"http://{self.url}/v2/models/{name}/ready"
        wait_until(lambda: http_ok(url), f"model '{name}' to be ready on Triton at {self.url}",
                   timeout, alive=self.process.exit_problem if self.process else None)

    def models(self) -> list[dict[str, Any]]:
        """The repository index: every model with its state (READY, UNAVAILABLE + reason, …)."""
        self._check_alive()
        return list(self.client().get_model_repository_index())

    def model_ready(self, name: str) -> bool:
        return http_ok(f"http://{self.url}/v2/models/{name}/ready")

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"TritonServer({self.repository}, http={self.url}, {state})"


def _stop_all_servers() -> None:
    """At interpreter exit (also after Ctrl-C): stop servers and remove their shared memory."""
    for server in list(_SERVERS):
        server.stop()


_REGISTERED = False


def _stop_servers_first_at_exit() -> None:
    """Register ``_stop_all_servers`` after the child started, i.e. after servelab.core.procs registered
    its own handler on that start: atexit runs last-registered first, so servers get their graceful stop
    (exit timeout, shared memory removed) before procs' handler would kill what is left."""
    global _REGISTERED
    if not _REGISTERED:
        _REGISTERED = True
        atexit.register(_stop_all_servers)

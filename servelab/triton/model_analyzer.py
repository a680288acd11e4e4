"""Triton Model Analyzer on the local and docker targets: the search the lab asks of it, and its run.

Model Analyzer (``model-analyzer profile``) writes variants of a model's config.pbtxt (instance count, max
batch size, dynamic batching), starts a Triton of its own, loads each variant and measures it with
perf_analyzer, then ranks the variants by its objective (throughput) under a constraint (a p99 latency
budget) and writes a summary. Its environment (``.venv-ma``, the Jupyter image's /opt/model-analyzer):
``servelab.triton.model_analyzer_env``.

The command has two parts: the search on the command line (what a student decides: the model, the space,
the concurrency, the latency budget, where its files go; ``profile_argv``) and this machine's launch
plumbing in its YAML file (``launch_config``: on ``local`` the wheel's tritonserver and its backends, in
the environment Triton's wheel needs, ``servelab.triton.server.server_env``; on ``docker`` the lab's
Triton image, started by Model Analyzer through the Docker socket from a container of its own,
``servelab.triton.model_analyzer_docker``; perf_analyzer and its windows, free ports). Reading what it
wrote: ``servelab.triton.model_analyzer_results``.
Versions, pitfalls and costs: docs/decisions/2026-11-28-model-analyzer.md
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.core.paths import shown
from servelab.triton import model_analyzer_docker as mad
from servelab.triton.model_analyzer_env import ModelAnalyzerError, executable

TRITON_IMAGE = "servelab/triton:24.10"  # docker/docker-compose-triton.yaml's image (a test holds them equal)
SEARCH_MODES = ("brute", "quick")
PROFILING = re.compile(r"Profiling (\S+): concurrency=(\d+)")


@dataclass(frozen=True)
class Search:
    """What Model Analyzer is asked: the model, the space (instances 1..``max_instances``, max batch sizes
    1, 2, 4 … ``max_batch_size``, dynamic batching on in each variant, plus the model's own config), every
    configuration at ``concurrency`` clients, the p99 budget, perf_analyzer's windows, the time allowed."""

    model: str
    concurrency: int
    p99_budget_ms: int
    max_instances: int
    max_batch_size: int
    mode: str = "brute"  # or "quick": a hill climb (docs/decisions/2026-11-28-model-analyzer.md)
    window_requests: int = 32  # perf_analyzer's count window
    stability_pct: int = 30
    max_trials: int = 5
    auto_adjusts: int = 2  # perf_analyzer runs per configuration (MA widens an unsettled one's window)
    perf_timeout_s: int = 120  # one perf_analyzer run
    budget_s: float = 360.0  # the whole search: stopped after this long
    cpu_only: bool = True  # KIND_CPU variants (False on a GPU host: KIND_GPU)

    def __post_init__(self) -> None:
        if self.mode not in SEARCH_MODES:
            raise ValueError(f"search mode {self.mode!r} is not one of {', '.join(SEARCH_MODES)}")

    @property
    def batch_sizes(self) -> list[int]:
        """The max batch sizes the brute search walks (it stops early where throughput stops rising)."""
        sizes, size = [], 1
        while size <= self.max_batch_size:
            sizes.append(size)
            size *= 2
        return sizes

    @property
    def most_configurations(self) -> int:
        """The model's own config plus every variant the space holds (the progress bar's length)."""
        return 1 + self.max_instances * len(self.batch_sizes)


@dataclass(frozen=True)
class Workspace:
    """One search's folder under the run's results (``model-analyzer/search-N``): the repository it reads,
    the variants it writes, its exports (results, reports), checkpoints, its YAML and log."""

    root: Path

    @classmethod
    def new(cls, results: Path) -> Workspace:
        """The next free ``search-N`` (never reused: nothing measured is overwritten)."""
        base = Path(results) / "model-analyzer"
        base.mkdir(parents=True, exist_ok=True)
        n = 1
        while True:
            try:
                (base / f"search-{n}").mkdir()
                return cls(base / f"search-{n}")
            except FileExistsError:
                n += 1

    @property
    def repository(self) -> Path:
        return self.root / "repository"

    @property
    def variants(self) -> Path:
        return self.root / "variants"

    @property
    def export(self) -> Path:
        return self.root / "export"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def config_file(self) -> Path:
        return self.root / "config.yaml"

    @property
    def log(self) -> Path:
        return self.root / "model-analyzer.log"


def profile_argv(search: Search, work: Workspace, binary: Path | str | None = None) -> list[str]:
    """The ``model-analyzer profile`` command: the search on the command line, the launch in ``-f``."""
    argv = [str(binary or executable()), "profile", "-f", str(work.config_file),
            "--model-repository", str(work.repository),
            "--run-config-search-mode", search.mode,
            "--run-config-search-max-instance-count", str(search.max_instances),
            "--run-config-search-max-model-batch-size", str(search.max_batch_size)]
    if search.mode == "brute":  # every configuration, the model's own included, at the one concurrency
        argv += ["--concurrency", str(search.concurrency)]
    else:  # quick search takes no list: the bounds pin the concurrency it tries for each variant
        argv += ["--run-config-search-min-concurrency", str(search.concurrency),
                 "--run-config-search-max-concurrency", str(search.concurrency),
                 "--concurrency-sweep-disable"]
    return [*argv, "--latency-budget", str(search.p99_budget_ms),
            "--output-model-repository-path", str(work.variants), "--override-output-model-repository",
            "--export-path", str(work.export), "--checkpoint-directory", str(work.checkpoints)]


@dataclass(frozen=True)
class Launch:
    """Where Model Analyzer's own Triton and perf_analyzer come from on this machine, and its ports.
    ``mode`` "local": ``server_path`` with ``backend_directory``; "docker": Model Analyzer runs in
    ``container`` and starts containers of ``image`` as ``user`` (uid:gid), their ports published on this
    host."""

    server_path: str
    backend_directory: str
    perf_analyzer_path: str
    http_port: int
    grpc_port: int
    metrics_port: int
    shm_prefix: str  # also the search's id (the docker label of its containers)
    image: str = ""
    user: str = ""
    container: mad.Container | None = None

    @property
    def mode(self) -> str:
        return "local" if self.container is None else "docker"

    @classmethod
    def local(cls) -> Launch:
        """The pytriton wheel's tritonserver with the lab's prepared backends, the lab venv's perf_analyzer,
        free ports, a shared-memory prefix of its own (removed after the run)."""
        from servelab.core.procs import free_port
        from servelab.triton.perf import perf_analyzer_binary
        from servelab.triton.server import SHM_GLOB_PREFIX, prepare_backends, pytriton_dist

        return cls(str(pytriton_dist() / "bin" / "tritonserver"), str(prepare_backends()),
                   perf_analyzer_binary(), free_port(), free_port(), free_port(),
                   f"{SHM_GLOB_PREFIX}_servelab_ma_{uuid.uuid4().hex[:8]}")

    @classmethod
    def docker(cls, container: mad.Container, image: str = TRITON_IMAGE) -> Launch:
        """The lab's Triton image on this host's Docker engine, started by Model Analyzer in ``container``
        (the host's network, the engine's socket) with its perf_analyzer, as this process's uid:gid, on
        free ports."""
        from servelab.core.procs import free_port
        from servelab.triton.server import SHM_GLOB_PREFIX

        return cls("", "", container.perf_analyzer, free_port(), free_port(), free_port(),
                   f"{SHM_GLOB_PREFIX}_servelab_ma_{uuid.uuid4().hex[:8]}", image=image,
                   user=f"{os.getuid()}:{os.getgid()}", container=container)


def launch_config(search: Search, launch: Launch, work: Workspace) -> dict[str, Any]:
    """The YAML file's contents: MA's Triton (``local`` launch mode: the wheel's binary, its backends, ports
    on 127.0.0.1; ``docker``: the image, its container's user, shared memory, label and ports published on
    this host), perf_analyzer (its binary, count windows as the lab's quick preset), HTTP, and the
    model's variants (``cpu_only`` as the search says; on a GPU host MA gives its Tritons the one GPU its
    container has). Its Triton's flags are the lab's (``servelab.triton.command.model_analyzer_flags``)."""
    from servelab.triton import command

    docker = launch.mode == "docker"  # inside its container Triton listens on every address: ports are mapped
    flags = command.model_analyzer_flags(command.Launch(
        backend_directory=None if docker else launch.backend_directory,
        address=None if docker else "127.0.0.1",
        http_port=launch.http_port, grpc_port=launch.grpc_port, metrics_port=launch.metrics_port,
        shm_prefix=launch.shm_prefix))
    where: dict[str, Any] = {"triton_launch_mode": "local", "triton_server_path": launch.server_path}
    if docker:
        where = {"triton_launch_mode": "docker", "triton_docker_image": launch.image,
                 "triton_docker_shm_size": "1g", "triton_docker_labels": {mad.LABEL: launch.shm_prefix},
                 "triton_docker_args": {"user": launch.user}}
    return {
        **where,
        "triton_output_path": str(work.root / "tritonserver.log"),
        "triton_http_endpoint": f"127.0.0.1:{launch.http_port}",
        "triton_grpc_endpoint": f"127.0.0.1:{launch.grpc_port}",
        "triton_metrics_url": f"http://127.0.0.1:{launch.metrics_port}/metrics",
        "client_protocol": "http",
        "triton_server_flags": flags,
        "perf_analyzer_path": launch.perf_analyzer_path,
        "perf_analyzer_timeout": search.perf_timeout_s,
        "perf_analyzer_max_auto_adjusts": search.auto_adjusts,
        "perf_analyzer_flags": {
            "measurement-mode": "count_windows",
            "measurement-request-count": str(max(search.window_requests, 2 * search.concurrency)),
            "stability-percentage": str(search.stability_pct), "max-trials": str(search.max_trials),
        },
        "inference_output_fields": ["model_name", "batch_size", "concurrency", "model_config_path",
                                    "instance_group", "max_batch_size", "satisfies_constraints",
                                    "perf_throughput", "perf_latency_p99", "perf_latency_avg",
                                    "perf_server_queue", "perf_server_compute_infer"],
        "profile_models": {search.model: {"cpu_only": search.cpu_only}},
    }


def write_config(config: dict[str, Any], work: Workspace) -> Path:
    import yaml

    work.config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    return work.config_file


def process_env(launch: Launch | None = None) -> dict[str, str]:
    """The environment Model Analyzer runs in, which perf_analyzer (and on ``local`` its Triton) inherits:
    perf_analyzer's libcudart, matplotlib's file backend, and on ``local`` the lab Triton's (``server_env``:
    the wheel's libraries, the lab venv's python first on PATH for the stubs). On ``docker`` this process
    is ``docker run``, with this one's environment; its container's is ``Container.env``."""
    from servelab.triton.perf import perf_analyzer_env
    from servelab.triton.server import server_env

    if launch is not None and launch.container is not None:
        return dict(os.environ)
    env = perf_analyzer_env()
    triton = server_env()
    env["PATH"] = triton["PATH"]
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (triton["LD_LIBRARY_PATH"], env.get("LD_LIBRARY_PATH"))
                                      if p)
    env["MPLBACKEND"] = "Agg"  # its plots go to files; a kernel's inline backend is not in its environment
    return env


def command_line(argv: list[str]) -> str:
    """The command as a notebook prints it: ``model-analyzer profile …``, paths relative (``shown``)."""
    import shlex

    return shown(" ".join(["model-analyzer", *(shlex.quote(a) for a in argv[1:])]))


def run_profile(argv: list[str], search: Search, work: Workspace, launch: Launch,
                progress: bool = True) -> float:
    """Run the search (its log in ``work.log``), one progress step per configuration measured; returns
    the seconds it took. On ``docker`` in its container (``docker_argv``). Stopped after
    ``search.budget_s``; a failure is one ``ModelAnalyzerError`` line naming the log. Whatever happens, no
    tritonserver, container or shared memory of it is left behind."""
    from servelab.core.procs import ManagedProcess
    from servelab.core.progress import bar

    if launch.container is not None:  # what an earlier search left, its kernel killed mid-search: its
        mad.remove_containers(f"label={mad.LABEL}")  # containers (their ports), its files still root's
        mad.require_image(launch.container.image)
        if said := mad.give_back(launch.container, work.root.parent, launch.shm_prefix, launch.user):
            print(said)
        argv = docker_argv(argv, launch, work)
    started = time.monotonic()
    proc = ManagedProcess("model-analyzer", argv, work.log, env=process_env(launch), cwd=work.root)
    seen: set[str] = set()
    progress_bar = bar(total=search.most_configurations, desc="model-analyzer", unit="config",
                       disable=not progress)
    left, ended = "", False
    try:
        while proc.proc.poll() is None:
            if time.monotonic() - started > search.budget_s:
                raise ModelAnalyzerError(
                    f"Model Analyzer ran past its {search.budget_s:.0f} s budget and was stopped after "
                    f"{len(seen)} configuration(s): give it a smaller space or a larger budget "
                    f"(log: {shown(str(work.log))})")
            for name in _profiled(work.log):
                if name not in seen:
                    seen.add(name)
                    progress_bar.update(1)
                    progress_bar.set_postfix_str(name)
            time.sleep(1.0)
        ended = True
    finally:
        progress_bar.close()
        try:
            stop(proc)
        finally:  # a second interrupt during the stop's wait still clears what it started
            left = _clean_up(launch, work)
            if left and not ended:  # said beside the error on its way (the budget, an interrupt)
                print(left)
    if proc.proc.returncode != 0:
        raise ModelAnalyzerError(f"Model Analyzer stopped (exit {proc.proc.returncode}): {failure(work.log)} "
                                 f"(whole log: {shown(str(work.log))}){'; ' + left if left else ''}")
    if left:
        raise ModelAnalyzerError(left)
    return time.monotonic() - started


def docker_argv(argv: list[str], launch: Launch, work: Workspace) -> list[str]:
    """On ``docker``: the ``docker run`` that runs ``argv`` in Model Analyzer's container."""
    assert launch.container is not None
    return mad.run_argv(launch.container, argv, work.root, launch.shm_prefix)


def _profiled(log: Path) -> list[str]:
    """The configurations MA has started measuring so far, in order (its "Profiling …" lines)."""
    try:
        return [m.group(1) for m in PROFILING.finditer(log.read_text(errors="replace"))]
    except OSError:
        return []


def stop(proc: Any) -> None:
    """Ctrl-C first (Model Analyzer then stops its Triton itself; ``docker run`` passes it on to its
    container), the process group after 20 s."""
    if proc.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.proc.wait(20)
    proc.stop(timeout=10)


def _clean_up(launch: Launch, work: Workspace) -> str:
    """Its tritonserver runs in a session of its own: stop any left (found by the shared-memory prefix
    on its command line), then remove that prefix's shared memory. On ``docker``: remove its container
    and any Triton container it left (by the search's label), then give its files back (``give_back``).
    Returns a line when something could not be cleared, else ""."""
    import psutil

    if launch.container is not None:
        mad.remove_containers(f"label={mad.LABEL}={launch.shm_prefix}")
        return mad.give_back(launch.container, work.root, launch.shm_prefix, launch.user)

    for process in psutil.process_iter(["cmdline"]):
        if any(launch.shm_prefix in part for part in process.info.get("cmdline") or ()):
            with contextlib.suppress(psutil.Error):
                process.kill()
                process.wait(10)
    for region in Path("/dev/shm").glob(f"{launch.shm_prefix}*"):
        with contextlib.suppress(OSError):
            region.unlink()
    return ""


def failure(log: Path) -> str:
    """The line of MA's log that says why it stopped: its error message (the lines after "encountered an
    error:", or an exception's message; never the traceback), else its last line."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log was written"
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index].removeprefix("[Model Analyzer] ")
        if "encountered an error:" in line:
            rest = [line.split("encountered an error:", 1)[1], *lines[index + 1:]]
            return " ".join(" ".join(rest).split())[:300]
        if m := re.match(r"(?:[\w.]+\.)?(?:TritonModelAnalyzerException|\w+Error|\w+Exception): (.+)", line):
            return m.group(1)[:300]
        if "failed with exit status" in line:
            return line[:300]
    return lines[-1].removeprefix("[Model Analyzer] ")[:300] if lines else "its log is empty"

"""vLLM on a GPU host (target ``docker``): notebook 09's second engine, where the GPU can run it.

vLLM's CUDA kernels need compute capability 7.0 or higher, and the image's torch (CUDA 12.6) has none
past 9.0. :func:`gpu_capabilities` asks the GPU host (``nvidia-smi`` in a throw-away container of the
lab engine's image) and :func:`vllm_problem` says why vLLM cannot run (the local target, no GPU, the
P100's 6.0, a GPU newer than the image's kernels) before vLLM's own image is built or started.
:func:`start_vllm_compose` brings up ``vllm_server`` of docker/docker-compose-llm.yaml (profile
``vllm``, port 8011), waits for it and warms it up like the lab's engine; it serves the same model
under the same name, and its statistics are its Prometheus ``/metrics``; its API answers only the lab's
key (``VLLM_KEY_FILE``, sent by the lab's clients as a bearer token). Why vLLM 0.10.1.1 and how
the lab's model is made readable to it: docs/decisions/2026-11-23-vllm.md.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Sequence
from typing import Any

from servelab.core.compose import up_args
from servelab.core.gpu import COMPUTE_CAP_QUERY, parse_compute_capabilities
from servelab.core.paths import REPO_ROOT
from servelab.llm.model import served_name
from servelab.llm.server import COMPOSE_FILE, VLLM_KEY_FILE, Engine, EngineOptions, compose_argv, compose_up

VLLM_MIN_CAPABILITY = (7, 0)
VLLM_MAX_CAPABILITY = (9, 0)  # torch 2.7.1's CUDA 12.6 build (constraints-vllm.txt) stops at sm_90
VLLM_SERVICE = "vllm_server"
VLLM_PORT = 8011  # published on the GPU host beside the lab engine's 8010
VLLM_STATS = "/metrics"


def capability_argv() -> list[str]:
    """``nvidia-smi`` on the GPU host, in a throw-away container of the engine's image (which gets the
    GPUs as the engine does): the notebook's kernel may run in a container without them."""
    return compose_argv(EngineOptions(), "run", "--rm", "--no-deps", "--entrypoint", COMPUTE_CAP_QUERY[0],
                        "llm_server", *COMPUTE_CAP_QUERY[1:])


def gpu_capabilities(run: Any = subprocess.run, timeout: float = 900.0) -> tuple[list[tuple[int, int]], str]:
    """The GPU host's compute capabilities, and an error text when they could not be read."""
    argv = capability_argv()
    try:
        done = run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return [], f"`{' '.join(argv[-8:])}` did not answer within {timeout:.0f} s"
    if done.returncode != 0:
        return [], f"`{' '.join(argv[-8:])}` failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"
    try:
        return parse_compute_capabilities(done.stdout), ""
    except ValueError:
        return [], f"nvidia-smi answered {done.stdout.strip()[:200]!r}, not compute capabilities"


def vllm_problem(target: str, capabilities: Sequence[tuple[int, int]], error: str = "") -> str | None:
    """Why vLLM cannot run for this target and these GPUs, or None when it can."""
    need = ".".join(map(str, VLLM_MIN_CAPABILITY))
    if target != "docker":
        return (f"target={target!r}: vLLM runs only in the compose stack of a GPU host (target 'docker') "
                f"whose GPU has compute capability {need} or higher")
    if error:
        return f"could not read the GPU's compute capability: {error}"
    if not capabilities:
        return "nvidia-smi shows no GPU on this host: vLLM needs an NVIDIA GPU"
    old = sorted({c for c in capabilities if c < VLLM_MIN_CAPABILITY})
    if old:
        found = ", ".join(f"{a}.{b}" for a, b in old)
        return (f"GPU compute capability {found} is below {need}, the oldest vLLM's CUDA kernels support "
                "(the lab's P100 node is 6.0)")
    new = sorted({c for c in capabilities if c > VLLM_MAX_CAPABILITY})
    if new:
        found = ", ".join(f"{a}.{b}" for a, b in new)
        newest = ".".join(map(str, VLLM_MAX_CAPABILITY))
        return (f"GPU compute capability {found} is newer than the kernels of the vLLM image's torch (CUDA "
                f"12.6, up to {newest}): see docs/decisions/2026-11-23-vllm.md")
    return None


def start_vllm_compose(timeout: float = 900.0, run: Any = subprocess.run) -> Engine:
    """vLLM in the compose stack on this GPU host: started from its built image (``./lab images`` builds
    it where the GPU can run it), healthy, warmed up; ``Engine.stop``
    brings the stack down (``--profile vllm``: both services; the lab engine is already stopped). On a
    failure the error carries vLLM's last log lines and nothing is left running."""
    options = EngineOptions(batching="continuous", cb_num_blocks=None, cb_block_size=None,
                            cb_max_batch_tokens=None)
    profile = ("--profile", "vllm")
    up = compose_argv(options, *profile, *up_args(timeout, VLLM_SERVICE))
    engine = Engine(f"http://localhost:{VLLM_PORT}", served_name(), options, up,
                    stop_argv=compose_argv(options, *profile, "down", "--timeout", "30"), run=run,
                    kind="vllm", stats_path=VLLM_STATS, key_file=VLLM_KEY_FILE)
    return compose_up(engine, timeout,
                      logs_argv=compose_argv(options, *profile, "logs", "--tail", "40", VLLM_SERVICE))


def serve_command(compose_file: str = COMPOSE_FILE) -> str:
    """The ``vllm serve …`` command the service runs, as its compose file says (variables filled in
    from this process's environment or their defaults; a ``docker/.env`` is not read)."""
    import yaml

    service = yaml.safe_load((REPO_ROOT / compose_file).read_text())["services"][VLLM_SERVICE]

    def fill(word: str) -> str:
        return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: os.environ.get(m.group(1)) or m.group(2) or "",
                      str(word))
    return shlex.join(["vllm", "serve", *(fill(w) for w in service["command"])])

"""``docker compose`` as the docker target runs it: which files, an ``up`` that never builds, and a
failed ``up`` said in words.

- The GPUs are asked for in an override file (``docker/docker-compose-<stack>.gpu.yaml``) that is
  read only where the Docker engine has the NVIDIA runtime, so the same stacks run on any Docker
  host, GPU or not (``gpu_runtime``).
- Images are built before any notebook runs (``./lab images``; ``./lab run --target docker`` runs it
  first; ``./lab jupyter`` builds notebook 03's and leaves Triton's and the LLM engines' building in the
  background, which ``servelab.core.image_builds`` waits for), so no cell builds: ``up`` uses
  ``--no-build --pull never`` and a missing image is an error naming that command.
- A failed ``up`` names the service, its state and its last log lines, or the taken port in one line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Sequence

GPU_SETTING = "SERVELAB_DOCKER_GPU"  # auto (ask the engine) | 1 | 0
BUILD_COMMAND = "./lab images"
RUNTIMES_ARGV = ["docker", "info", "--format", "{{json .Runtimes}}"]
LOG_LINES = 40

Run = Callable[[list[str]], "tuple[int, str]"]  # argv -> (exit code, stdout + stderr)


def run_here(argv: list[str], timeout: float = 120.0) -> tuple[int, str]:
    """``argv`` on this host; a command that does not answer in ``timeout`` counts as failed."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return done.returncode, done.stdout + done.stderr


def gpu_runtime(run: Run = run_here) -> bool:
    """Does the Docker engine give containers GPUs? ``SERVELAB_DOCKER_GPU=1|0`` decides; otherwise
    the engine is asked whether it has the NVIDIA runtime (the container toolkit registers it)."""
    setting = os.environ.get(GPU_SETTING, "auto").strip().lower()
    if setting in ("0", "1"):
        return setting == "1"
    if setting not in ("", "auto"):
        raise ValueError(f"{GPU_SETTING}={setting!r}: use 1 (GPUs), 0 (CPU only) or auto")
    code, out = run(list(RUNTIMES_ARGV))
    return code == 0 and '"nvidia"' in out


def gpu_override(compose_file: str) -> str:
    """``docker/docker-compose-x.yaml`` -> ``docker/docker-compose-x.gpu.yaml``."""
    return re.sub(r"\.ya?ml$", "", compose_file) + ".gpu.yaml"


def file_args(compose_file: str, gpu: bool) -> list[str]:
    """``-f`` arguments: the stack's file, and its GPU override where the engine has GPUs."""
    return ["-f", compose_file, *(["-f", gpu_override(compose_file)] if gpu else [])]


def up_args(timeout: float, *services: str) -> list[str]:
    """``up`` that starts from built images only and returns once every healthcheck passes."""
    return ["up", "-d", "--no-build", "--pull", "never", "--wait", "--wait-timeout", str(int(timeout)),
            *services]


def taken_port(error: str) -> str | None:
    m = re.search(r":(\d+): bind: address already in use", error) \
        or re.search(r"Bind for [\d.:\[\]]*?:(\d+) failed: port is already allocated", error)
    return m.group(1) if m else None


def missing_image(error: str) -> str | None:
    m = re.search(r"No such image: (\S+)", error) or re.search(r"image (\S+) not found", error) \
        or re.search(r"pull access denied for ([^,\s]+)", error)
    return m.group(1) if m else None


def service_states(ps_output: str) -> list[tuple[str, str]]:
    """``docker compose ps -a --format json`` (one object per line, or one list) -> [(service, state)]."""
    text = ps_output.strip()
    rows: list[dict[str, object]] = []
    if text.startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    states = []
    for row in rows:
        state = str(row.get("State", "?"))
        health = str(row.get("Health") or "")
        if state == "exited":
            state = f"exited (code {row.get('ExitCode', '?')})"
        states.append((str(row.get("Service", "?")), f"{state}, {health}" if health else state))
    return states


def explain_up_failure(what: str, error: str, compose: Sequence[str], run: Run) -> str:
    """Why ``up`` of ``what`` failed, in words: the taken port, the missing image, or each service
    that is not running and healthy with its last log lines (``compose``: the argv up to ``-f``)."""
    port = taken_port(error)
    if port:
        return (f"{what}: port {port} on this host is already taken by another program: stop it "
                f"(`ss -ltnp 'sport = :{port}'` names it) and run this again")
    image = missing_image(error)
    if image:
        return (f"{what}: the image {image} is not built: build the images on the Docker host with "
                f"`{BUILD_COMMAND}` (a notebook never builds one: it takes minutes)")
    code, ps = run([*compose, "ps", "-a", "--format", "json"])
    try:
        states = service_states(ps) if code == 0 else []
    except ValueError:
        states = []
    parts = []
    for service, state in states:
        if state in ("running", "running, healthy"):
            continue
        _, logs = run([*compose, "logs", "--no-color", "--tail", str(LOG_LINES), service])
        parts.append(f"service {service} is {state}; its last {LOG_LINES} log lines:\n{logs.rstrip()}")
    if not parts:
        return f"{what} did not come up: {error.strip()[-1500:]}"
    return f"{what} did not come up: " + "\n".join(parts)

"""Where Model Analyzer itself runs on a Docker host: a container of its own, beside the Jupyter container
on the same engine, whose Tritons (its docker launch mode) are sibling containers started through the
engine's socket.

- A CPU host: the Jupyter image, from its ``/opt/model-analyzer`` (``Container.jupyter``).
- A GPU host (the node): NVIDIA's SDK image of the lab's Triton release (``Container.sdk``), given ``GPU``,
  the one the lab's Triton serves yours on. Its DCGM is how Model Analyzer finds a GPU, and DCGM is not on
  PyPI. Model Analyzer hands that GPU to each of its Tritons by UUID.

Both take the same path (``run_argv``): the docker tier runs the GPU host's, bar the image and ``--gpus``.
The container sees the engine's socket and the search's folder at its host path (Model Analyzer's binds
of its output repository name host paths). It has the host's network, so its perf_analyzer reaches the
published ports on 127.0.0.1. It runs as root, as DCGM's embedded mode asks, and ``give_back`` then
hands what it wrote back to the notebook's uid:gid (its Tritons run as that uid:gid). It carries the
search's label, so the clean-up finds it and its Tritons. Why: docs/decisions/2026-11-28-model-analyzer.md
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from servelab.core.compose import run_here
from servelab.core.paths import shown
from servelab.triton.model_analyzer_env import ModelAnalyzerError, executable

# what ./lab images pulls on a GPU host (scripts/docker_host.sh's model_analyzer step), and
# docker-compose-jupyter.yaml's image (tests hold them equal)
SDK_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3-sdk"
JUPYTER_IMAGE = "servelab/jupyter:latest"
LABEL = "servelab.model_analyzer.search"  # on Model Analyzer's container and each Triton it starts
SOCKET_SETTING = "SERVELAB_DOCKER_SOCKET"  # the engine's socket as the host names it (compose sets it)
SOCKET = "/var/run/docker.sock"  # where the Jupyter container, and Model Analyzer's, see it
# the GPU yours is on (notebook 11's set_instances). `--gpus device=N` counts in NVML's order, Triton's
# `gpus: [N]` in CUDA's: the same GPU on a node of identical GPUs, as the lab's nodes are
GPU = "0"


@dataclass(frozen=True)
class Container:
    """Model Analyzer's container: ``image`` running ``executable``, measuring with ``perf_analyzer`` (paths
    inside the image), with ``gpu`` (None on a CPU host) and ``env`` set in it."""

    image: str
    executable: str
    perf_analyzer: str
    gpu: str | None = None
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def jupyter(cls) -> Container:
        """The Jupyter image, as this container runs it: its Model Analyzer, the lab's perf_analyzer (the
        image's environment gives it the libcudart it links)."""
        from servelab.triton.perf import perf_analyzer_binary

        return cls(JUPYTER_IMAGE, str(executable()), perf_analyzer_binary(), env=(("MPLBACKEND", "Agg"),))

    @classmethod
    def sdk(cls, gpu: str = GPU) -> Container:
        """NVIDIA's SDK image: its Model Analyzer, DCGM and perf_analyzer, on one GPU."""
        return cls(SDK_IMAGE, "model-analyzer", "perf_analyzer", gpu, env=(("MPLBACKEND", "Agg"),))


def run_argv(container: Container, argv: list[str], root: Path, search_id: str) -> list[str]:
    """``docker run`` of the Model Analyzer command ``argv`` in ``container``, as root, for the search whose
    files are all under ``root`` (its workspace) and whose id is ``search_id``. ``--pull never``: the
    image is ``./lab images``'s (``require_image`` says so when absent), never a pull inside a timed
    search."""
    env = [arg for key, value in container.env for arg in ("-e", f"{key}={value}")]
    gpus = ["--gpus", f"device={container.gpu}"] if container.gpu is not None else []
    return ["docker", "run", "--rm", "--init", "--pull", "never", "--no-healthcheck",
            "--name", f"servelab-model-analyzer-{search_id.rsplit('_', 1)[-1]}",
            "--label", f"{LABEL}={search_id}", "--network", "host", "--user", "0:0", "--shm-size", "1g",
            "-v", f"{os.environ.get(SOCKET_SETTING) or SOCKET}:{SOCKET}", "-v", f"{root}:{root}",
            "-w", str(root), *env, *gpus, container.image, container.executable, *argv[1:]]


def give_back_argv(container: Container, root: Path, search_id: str, user: str) -> list[str]:
    """``chown -R user root`` in a container of the same image: what Model Analyzer wrote as root becomes
    the notebook's uid:gid's."""
    return ["docker", "run", "--rm", "--pull", "never", "--no-healthcheck", "--label", f"{LABEL}={search_id}",
            "--user", "0:0", "-v", f"{root}:{root}", "--entrypoint", "chown", container.image, "-R", user,
            str(root)]


def give_back(container: Container, root: Path, search_id: str, user: str) -> str:
    """Hand the folder ``root`` back to ``user`` (uid:gid); the line that says what to do when it cannot,
    else ""."""
    code, out = run_here(give_back_argv(container, root, search_id, user), timeout=120)
    if code == 0:
        return ""
    said = (out.strip().splitlines() or ["no answer"])[-1]
    return (f"Model Analyzer's files in {shown(str(root))} are still root's ({said}): `sudo chown -R {user} "
            f"{shown(str(root))}` on the Docker host")


def command_line(argv: list[str]) -> str:
    """The ``docker run`` line as the notebook prints it (paths relative, ``shown``)."""
    return shown(" ".join(shlex.quote(a) for a in argv))


def require_image(image: str) -> None:
    """One line, before the search, where the engine lacks the image (or does not answer: what it said)."""
    code, out = run_here(["docker", "image", "inspect", image], timeout=60)
    if code != 0:
        raise ModelAnalyzerError(f"Model Analyzer's image {image} is not on this Docker host: `./lab images` "
                                 "makes it (it builds the lab's images and pulls NVIDIA's), then run this "
                                 f"cell again (docker said: {(out.strip().splitlines() or ['nothing'])[-1]})")


def remove_containers(label_filter: str) -> None:
    """Remove every container the engine has with this label (``docker ps --filter``); one search at a
    time per Docker host. No docker CLI here, or the engine gone: nothing this search can remove."""
    code, out = run_here(["docker", "ps", "-aq", "--filter", label_filter], timeout=30)
    if code == 0 and out.split():
        run_here(["docker", "rm", "-f", *out.split()], timeout=60)

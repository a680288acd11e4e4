"""Waiting for an image the background build has not finished: progress, a failure or a timeout
naming the image, nothing to wait for when no build was recorded; and the step names agree with
scripts/docker_host.sh. A fake clock: no real waiting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servelab.core import image_builds
from servelab.core.paths import REPO_ROOT
from servelab.targets.docker import ComposeStack, LocalTransport


class Builds:
    """A checkout's .servelab-build folder whose states change as the fake clock runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / image_builds.BUILD_DIR).mkdir(parents=True)
        self.now = 0.0
        self.slept: list[float] = []
        self.lines: list[str] = []
        self.plan: list[tuple[float, str, str]] = []  # (at, key, state)

    def mark(self, key: str, state: str) -> None:
        label = {"triton": "Triton", "fastapi_pt": "FastAPI + PyTorch and GourmetGram"}.get(key, key)
        image = {"triton": "servelab/triton:24.10"}.get(key, f"servelab/{key}:latest")
        (self.root / image_builds.BUILD_DIR / f"{key}.status").write_text(
            f"state={state}\nlabel={label}\nimage={image}\nsince=100\nlog=.servelab-build/{key}.log\n")

    def read(self, relpath: str) -> bytes | None:
        path = self.root / relpath
        return path.read_bytes() if path.is_file() else None

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        for at, key, state in self.plan:
            if at <= self.now:
                self.mark(key, state)

    def wait(self, *keys: str, timeout_s: float = 600.0) -> None:
        image_builds.wait_for(self.read, keys, timeout_s=timeout_s, beat_s=30, poll_s=5,
                              clock=lambda: self.now, sleep=self.sleep, say=self.lines.append)


@pytest.fixture
def builds(tmp_path: Path) -> Builds:
    return Builds(tmp_path)


def test_ready_or_unrecorded_images_need_no_wait(builds: Builds) -> None:
    builds.mark("fastapi_pt", "ready")
    builds.wait("fastapi_pt", "fastapi_onnx")  # fastapi_onnx: built by ./lab images, no status
    assert builds.slept == [] and builds.lines == []


def test_a_building_image_is_waited_for_with_progress(builds: Builds) -> None:
    builds.mark("fastapi_pt", "ready")
    builds.mark("triton", "building")
    (builds.root / ".servelab-build" / "triton.log").write_text(
        "#1 [internal] load build definition\n#9 [3/7] RUN pip install torch\n#9 12.3 Collecting torch\n")
    builds.plan = [(62.0, "triton", "ready")]
    builds.wait("fastapi_pt", "triton")
    assert builds.now == 65.0
    assert builds.lines == [
        "waiting for the image servelab/triton:24.10 (Triton): it is building in the background "
        "(#9 [3/7] RUN pip install torch); 0 s waited, up to 600 s",
        "waiting for the image servelab/triton:24.10 (Triton): it is building in the background "
        "(#9 [3/7] RUN pip install torch); 30 s waited, up to 600 s",
        "waiting for the image servelab/triton:24.10 (Triton): it is building in the background "
        "(#9 [3/7] RUN pip install torch); 60 s waited, up to 600 s",
        "images ready after 65 s of waiting",
    ]


def test_a_queued_image_says_what_it_waits_for(builds: Builds) -> None:
    builds.mark("llm", "waiting")
    builds.mark("vllm", "waiting")
    builds.plan = [(5.0, "llm", "ready"), (10.0, "vllm", "ready")]
    builds.wait("llm", "vllm")
    assert builds.lines[0] == ("waiting for the image servelab/llm:latest (llm): it waits for the builds "
                               "before it in the background; then servelab/vllm:latest (vllm); 0 s waited, "
                               "up to 600 s")


def test_a_failed_build_names_the_image_and_its_log(builds: Builds) -> None:
    builds.mark("triton", "building")
    builds.plan = [(10.0, "triton", "failed")]
    with pytest.raises(RuntimeError) as info:
        builds.wait("triton")
    assert str(info.value) == (
        "building the image servelab/triton:24.10 (Triton) failed on this host: its log is "
        ".servelab-build/triton.log in the checkout; fix what it says, then build it again with "
        "`./lab images`")


def test_the_wait_has_a_timeout_naming_the_image(builds: Builds) -> None:
    builds.mark("triton", "building")
    with pytest.raises(RuntimeError) as info:
        builds.wait("triton", timeout_s=60)
    assert str(info.value) == (
        "the image servelab/triton:24.10 (Triton) was still building after 60 s of waiting: see "
        "`./lab images --status` and .servelab-build/triton.log on the Docker host; to wait longer, set "
        "SERVELAB_IMAGE_WAIT_S (seconds)")
    assert builds.now == 60.0


@pytest.mark.parametrize("raw", ["soon", "0", "-5"])
def test_a_bad_wait_setting_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(image_builds.WAIT_SETTING, raw)
    with pytest.raises(ValueError, match=r"^SERVELAB_IMAGE_WAIT_S="):
        image_builds.wait_timeout()


def test_each_stack_waits_only_for_its_own_images() -> None:
    assert image_builds.steps_for("fastapi") == ["fastapi_pt"]
    assert image_builds.steps_for("fastapi", "fastapi_onnx") == ["fastapi_pt", "fastapi_onnx"]
    assert image_builds.steps_for("triton") == ["fastapi_pt", "triton"]  # GourmetGram is in fastapi_pt's
    assert image_builds.steps_for("llm") == ["llm"]
    assert image_builds.steps_for("llm", services=["vllm_server"]) == ["llm", "vllm"]
    with pytest.raises(ValueError, match="no stack called 'ray'"):
        image_builds.steps_for("ray")


def test_the_steps_are_the_ones_docker_host_builds() -> None:
    script = (REPO_ROOT / "scripts" / "docker_host.sh").read_text()
    body = script[script.index("step_of() {"):script.index("\n}\n", script.index("step_of() {"))]
    assert tuple(re.findall(r"^    (\w+)\) LABEL=", body, re.M)) == image_builds.STEPS
    first = re.search(r"^FIRST_KEYS=\((.*)\)$", script, re.M)
    assert first, "docker_host.sh names the images it builds first in FIRST_KEYS"
    # the Jupyter server and every image notebook 03 starts (both FastAPI apps, GourmetGram), nothing else
    assert first.group(1).split() == ["jupyter", *image_builds.steps_for("fastapi", "fastapi_onnx")]


def test_the_docker_stack_waits_before_it_starts_anything(tmp_path: Path, builds: Builds,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """ComposeStack.up on a host whose Triton image is still building: no compose command before it
    is ready; a failed build stops it with the image's name and nothing started."""
    ran: list[list[str]] = []

    class Recording(LocalTransport):
        def run(self, argv, timeout):  # type: ignore[no-untyped-def]
            ran.append(list(argv))
            from servelab.targets.base import CommandResult
            return CommandResult(list(argv), 0, "", "")

    builds.mark("fastapi_pt", "ready")
    builds.mark("triton", "failed")
    monkeypatch.setenv(image_builds.WAIT_SETTING, "60")
    stack = ComposeStack(transport=Recording(builds.root), root=builds.root, gpu=False)
    with pytest.raises(RuntimeError, match=r"^building the image servelab/triton:24.10 \(Triton\) failed"):
        stack.up("triton")
    with pytest.raises(RuntimeError, match=r"^building the image servelab/triton:24.10 \(Triton\) failed"):
        stack.triton_has_backend("onnxruntime")
    assert ran == []
    stack.up("fastapi")  # its own images are built: it does not wait for Triton's
    assert any("up" in argv for argv in ran)

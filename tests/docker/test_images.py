"""Every image builds on a real engine with the users' own command, and a rebuild comes from the cache."""

from __future__ import annotations

import re
import time

from servelab.core.paths import REPO_ROOT
from tests.docker.conftest import ARTIFACTS, IMAGES, lab


def test_every_image_is_built(images: dict[str, float]) -> None:
    assert set(IMAGES) <= set(images)
    for name, megabytes in sorted(images.items()):
        print(f"{name}: {megabytes} MB")
        assert megabytes > 100, f"{name} is {megabytes} MB: did its install run?"


def test_a_rebuild_installs_nothing_again(images: dict[str, float]) -> None:
    """BuildKit's layer cache: an unchanged checkout rebuilds with every pip step CACHED (the time is
    printed, not asserted: docs/decisions/2026-11-23-docker-tier.md has the measured figures)."""
    started = time.monotonic()
    text = lab("images", log=ARTIFACTS / "images-rebuild.log", timeout=1800,
               env={"SERVELAB_BUILD_VLLM": "0"}).stdout
    print(f"warm ./lab images: {time.monotonic() - started:.1f} s")
    # one progress line per image; each build's own output in its log (its own step numbers)
    keys = re.findall(r"^\[docker\] images: building .*; log: \S*/\.servelab-build/(\w+)\.log\)$", text, re.M)
    assert keys == ["jupyter", "fastapi_pt", "fastapi_onnx", "triton", "llm"], text[-2000:]
    assert "RUN pip install" not in text, "a build's output reached the terminal"
    for key in keys:
        log = REPO_ROOT / ".servelab-build" / f"{key}.log"
        section = log.read_text()
        steps = set(re.findall(r"^(#\d+) \[[^\]]*\] RUN .*pip install", section, re.M))
        cached = set(re.findall(r"^(#\d+) CACHED", section, re.M))
        assert steps, f"no pip step in the rebuild of {key}: see {log}"
        assert steps <= cached, f"pip ran again building {key}: see {log}"
    assert (REPO_ROOT / "docker" / "docker-compose-fastapi.gpu.yaml").is_file()

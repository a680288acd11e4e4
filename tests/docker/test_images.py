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
    sections = text.split("[docker] images: building ")[1:]  # one compose build each: its own step numbers
    assert len(sections) >= 5, text[-2000:]
    for section in sections:
        steps = set(re.findall(r"^(#\d+) \[[^\]]*\] RUN .*pip install", section, re.M))
        cached = set(re.findall(r"^(#\d+) CACHED", section, re.M))
        assert steps, f"no pip step in the rebuild of {section.splitlines()[0]}"
        assert steps <= cached, (f"pip ran again building {section.splitlines()[0]}: "
                                 f"see {ARTIFACTS}/images-rebuild.log")
    assert (REPO_ROOT / "docker" / "docker-compose-fastapi.gpu.yaml").is_file()

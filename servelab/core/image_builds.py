"""Waiting for an image that is still being built, on a Docker host (the GPU node).

``./lab jupyter`` (scripts/docker_host.sh) builds the images notebook 03 needs first and the rest
(Triton, the LLM engines) in the background, writing each build's state to
``.servelab-build/<key>.status`` in the checkout (``state=waiting|building|ready|failed``, ``label``,
``image``, ``since``, ``log``) and its output to ``<key>.log``. Before a stack starts, ``wait_for``
waits for the builds that stack needs: a line when it starts waiting and one every ``beat_s`` with
the build's current step, an error naming the image and its log when the build failed, and one
naming the image when it is not ready within ``timeout_s``. No status file: the images were built
some other way (``./lab images``), nothing to wait for. Why the order:
docs/decisions/2026-11-25-node-ready-for-03.md
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BUILD_DIR = ".servelab-build"
WAIT_SETTING = "SERVELAB_IMAGE_WAIT_S"
DEFAULT_WAIT_S = 3600.0  # the Triton base alone is about 15 GB on the node
BEAT_S = 30.0
POLL_S = 5.0
# The build steps docker_host.sh runs (its step_of), by what each stack needs to start. GourmetGram
# (the triton stack's Flask app too) is built with FastAPI + PyTorch.
STEPS = ("jupyter", "fastapi_pt", "fastapi_onnx", "triton", "llm", "vllm", "model_analyzer")
STEP_LINE = re.compile(r"^#\d+ \[")

Read = Callable[[str], "bytes | None"]  # relpath in the checkout -> its content, None when absent


def steps_for(stack: str, fastapi_app: str = "fastapi_pt", services: Sequence[str] = ()) -> list[str]:
    """The build steps whose images ``stack`` needs (``fastapi_app``: which FastAPI image)."""
    if stack == "fastapi":
        return ["fastapi_pt"] + (["fastapi_onnx"] if fastapi_app == "fastapi_onnx" else [])
    if stack == "triton":
        return ["fastapi_pt", "triton"]
    if stack == "llm":
        return ["llm"] + (["vllm"] if "vllm_server" in services else [])
    if stack == "jupyter":
        return ["jupyter"]
    if stack == "model_analyzer":  # notebook 11's on a GPU host: NVIDIA's SDK image, pulled, not built
        return ["model_analyzer"]
    raise ValueError(f"no stack called {stack!r}: fastapi, triton, llm, jupyter or model_analyzer")


@dataclass(frozen=True)
class Build:
    key: str
    state: str
    label: str
    image: str
    since: float
    log: str

    @classmethod
    def parse(cls, key: str, text: str) -> Build:
        fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        try:
            since = float(fields.get("since", "0"))
        except ValueError:
            since = 0.0
        return cls(key, fields.get("state", "?"), fields.get("label", key), fields.get("image", key), since,
                   fields.get("log", f"{BUILD_DIR}/{key}.log"))

    @property
    def name(self) -> str:
        return f"{self.image} ({self.label})"


def status(read: Read, key: str) -> Build | None:
    """The build ``key``'s state, or None when no build of it was recorded here."""
    text = read(f"{BUILD_DIR}/{key}.status")
    return None if text is None else Build.parse(key, text.decode(errors="replace"))


def current_step(read: Read, build: Build) -> str:
    """The build's latest step line in its log ("#12 [3/8] RUN pip install ..."), or ''."""
    text = read(build.log) or b""
    lines = [line for line in text.decode(errors="replace").splitlines() if STEP_LINE.match(line)]
    return lines[-1][:120] if lines else ""


def wait_timeout() -> float:
    raw = os.environ.get(WAIT_SETTING, "").strip()
    if not raw:
        return DEFAULT_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{WAIT_SETTING}={raw!r}: give the seconds to wait for an image (e.g. 3600)") \
            from None
    if value <= 0:
        raise ValueError(f"{WAIT_SETTING}={raw!r}: give a positive number of seconds")
    return value


def wait_for(read: Read, keys: Sequence[str], *, timeout_s: float | None = None, beat_s: float = BEAT_S,
             poll_s: float = POLL_S, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep, say: Callable[[str], None] = print) -> None:
    """Return once every build in ``keys`` is ready (or was never recorded); raise ``RuntimeError``
    naming the image when one failed or is not ready within ``timeout_s``."""
    limit = wait_timeout() if timeout_s is None else timeout_s
    started = clock()
    last_beat: float | None = None
    while True:
        pending = []
        for key in keys:
            build = status(read, key)
            if build is None or build.state == "ready":
                continue
            if build.state == "failed":
                raise RuntimeError(
                    f"building the image {build.name} failed on this host: its log is {build.log} in the "
                    "checkout; fix what it says, then build it again with `./lab images`")
            pending.append(build)
        if not pending:
            if last_beat is not None:
                say(f"images ready after {clock() - started:.0f} s of waiting")
            return
        waited = clock() - started
        first = pending[0]
        if waited >= limit:
            raise RuntimeError(
                f"the image {first.name} was still {first.state} after {limit:.0f} s of waiting: see "
                f"`./lab images --status` and {first.log} on the Docker host; to wait longer, set "
                f"{WAIT_SETTING} (seconds)")
        if last_beat is None or clock() - last_beat >= beat_s:
            last_beat = clock()
            doing = "is building" if first.state == "building" else "waits for the builds before it"
            step = current_step(read, first) if first.state == "building" else ""
            others = f"; then {', '.join(b.name for b in pending[1:])}" if pending[1:] else ""
            say(f"waiting for the image {first.name}: it {doing} in the background"
                f"{f' ({step})' if step else ''}{others}; {waited:.0f} s waited, up to {limit:.0f} s")
        sleep(poll_s)

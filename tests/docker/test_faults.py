"""Faults on the real engine: each says what failed in words, and nothing is left behind."""

from __future__ import annotations

import socket

import pytest

from servelab.core.paths import REPO_ROOT
from servelab.targets.docker import ComposeStack
from tests.docker.engine import Engine
from tests.docker.test_stacks import not_owned


def test_a_failing_service_is_named_with_its_last_log_lines(images: dict[str, float]) -> None:
    stack = ComposeStack(env={"MAX_BATCH": "zero"})  # a bad setting: the service stops with one line
    try:
        with pytest.raises(RuntimeError) as failed:
            stack.up("fastapi", ["fastapi_server"], timeout=90)
        said = str(failed.value)
        assert "fastapi_server is" in said and "log lines" in said, said
        assert "MAX_BATCH" in said, said
    finally:
        stack.down()


def test_a_taken_port_is_one_clear_line(images: dict[str, float]) -> None:
    stack = ComposeStack()
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("0.0.0.0", 8000))
        holder.listen()
        try:
            with pytest.raises(RuntimeError) as failed:
                stack.up("fastapi", ["fastapi_server"], timeout=90)
        finally:
            stack.down()
    said = str(failed.value)
    assert "port 8000 on this host is already taken" in said and "\n" not in said, said


def test_a_second_up_is_a_no_op_and_down_leaves_nothing(engine: Engine, images: dict[str, float]) -> None:
    stack = ComposeStack(fastapi_app="fastapi_onnx")

    def started() -> str:
        return engine.docker("inspect", "--format", "{{.Id}} {{.State.StartedAt}}", "fastapi_server").stdout

    stack.up("fastapi", timeout=300)
    first = started()
    stack.up("fastapi", timeout=300)
    assert started() == first, "a second up recreated or restarted the service"
    stack.down()
    label = "label=com.docker.compose.project=servelab-fastapi"
    assert engine.docker("ps", "-aq", "--filter", label).stdout.strip() == ""
    assert engine.docker("network", "ls", "-q", "--filter", label).stdout.strip() == ""
    assert not_owned(REPO_ROOT) == [], "files in the checkout not owned by its owner"

"""The stack interface: the local implementation for real, the compose ones for their exact commands."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from servelab.procs import http_ok
from servelab.stack import CommandResult, get_stack
from servelab.stacks import (
    RELOAD_SNIPPET,
    ComposeStack,
    LocalStack,
    RemoteComposeStack,
    SSHTransport,
)

ENV = ["env", "FASTAPI_APP=fastapi_pt", "docker", "compose"]
FASTAPI = [*ENV, "-p", "servelab-fastapi", "-f", "docker/docker-compose-fastapi.yaml"]
TRITON = [*ENV, "-p", "servelab-triton", "-f", "docker/docker-compose-triton.yaml"]
PREPARE = ["sh", "-c", "mkdir -p models && for m in food_classifier food_classifier_onnx; do "
           "[ -e models/$m ] || cp -r models_staging/$m models/; done"]


class RecordingTransport:
    """Stands in for this host / the node: records commands, keeps files in a dict."""

    def __init__(self, fail: str | None = None) -> None:
        self.host = "node.example"
        self.commands: list[list[str]] = []
        self.files: dict[str, bytes] = {}
        self.fail = fail

    def run(self, argv: Any, timeout: float | None) -> CommandResult:
        self.commands.append(list(argv))
        code = 1 if self.fail and self.fail in argv else 0
        return CommandResult(list(argv), code, "out", "boom" if code else "")

    def put(self, relpath: str, content: bytes) -> None:
        self.files[relpath] = content

    def get(self, relpath: str) -> bytes:
        return self.files[relpath]

    def get_file(self, relpath: str, local_path: Path) -> None:
        Path(local_path).write_bytes(self.files[relpath])


# ----------------------------------------------------------------------------- compose
def test_compose_up_down_exact_commands() -> None:
    transport = RecordingTransport()
    stack = ComposeStack(transport=transport)
    stack.up("fastapi", timeout=300)
    stack.up("triton")
    stack.down()
    assert transport.commands == [
        [*TRITON, "down"],
        [*FASTAPI, "up", "--build", "-d", "--wait", "--wait-timeout", "300"],
        [*FASTAPI, "down"],
        PREPARE,
        [*TRITON, "up", "--build", "-d", "--wait", "--wait-timeout", "600"],
        [*FASTAPI, "down", "--timeout", "60"],
        [*TRITON, "down", "--timeout", "60"],
    ]


def test_compose_variables_choose_the_fastapi_app() -> None:
    transport = RecordingTransport()
    ComposeStack(transport=transport, fastapi_app="fastapi_onnx").up("fastapi", ["fastapi_server"], 60)
    assert transport.commands[-1] == [
        "env", "FASTAPI_APP=fastapi_onnx", "docker", "compose", "-p", "servelab-fastapi", "-f",
        "docker/docker-compose-fastapi.yaml", "up", "--build", "-d", "--wait", "--wait-timeout", "60",
        "fastapi_server"]
    with pytest.raises(ValueError, match="FASTAPI_APP='fastapi_tf'"):
        ComposeStack(transport=transport, fastapi_app="fastapi_tf")
    with pytest.raises(ValueError, match="has no service 'triton_server'"):
        ComposeStack(transport=transport).up("fastapi", ["triton_server"])


def test_compose_run_exec_reload_files() -> None:
    transport = RecordingTransport()
    stack = ComposeStack(transport=transport)
    with pytest.raises(RuntimeError, match="no stack is up"):
        stack.run(["perf_analyzer", "-m", "food_classifier"], service="jupyter")
    stack.up("triton")
    transport.commands.clear()
    assert stack.run(["nvidia-smi"]).returncode == 0
    stack.run(["perf_analyzer", "-m", "food_classifier", "-u", stack.service_address("triton_server")],
              service="jupyter", timeout=120)
    stack.run(["ls"], service="fastapi_server")  # the fastapi stack's own service
    stack.reload_model("food_classifier", '{"max_batch_size": 16}')
    assert transport.commands == [
        ["nvidia-smi"],
        [*TRITON, "exec", "-T", "jupyter", "perf_analyzer", "-m", "food_classifier", "-u",
         "triton_server:8000"],
        [*FASTAPI, "exec", "-T", "fastapi_server", "ls"],
        [*TRITON, "exec", "-T", "jupyter", "python3", "-c", RELOAD_SNIPPET, "triton_server:8000",
         "food_classifier", '{"max_batch_size": 16}'],
    ]
    stack.write_file("models/food_classifier/config.pbtxt", "max_batch_size: 16\n")
    assert stack.read_file("models/food_classifier/config.pbtxt") == b"max_batch_size: 16\n"
    with pytest.raises(ValueError, match="not a path inside the project root"):
        stack.write_file("../../etc/passwd", "x")


def test_compose_addresses() -> None:
    stack = ComposeStack(transport=RecordingTransport())
    assert stack.url("triton_server", "metrics") == "http://node.example:8002"
    assert stack.url("flask") == "http://node.example:80"
    assert stack.service_address("triton_server", "metrics") == "triton_server:8002"
    assert stack.service_address("fastapi_server") == "fastapi_server:8000"
    with pytest.raises(ValueError, match="no 'grpc' port"):
        stack.url("flask", "grpc")


def test_compose_failure_raises_with_stderr() -> None:
    stack = ComposeStack(transport=RecordingTransport(fail="up"))
    with pytest.raises(RuntimeError, match="boom"):
        stack.up("fastapi")


def test_compose_fetch(tmp_path: Path) -> None:
    transport = RecordingTransport()
    transport.files["results/pa.csv"] = b"Concurrency,Inferences/Second\n1,50\n"
    dest = ComposeStack(transport=transport).fetch("results/pa.csv", tmp_path / "got" / "pa.csv")
    assert dest.read_bytes().startswith(b"Concurrency")


class FakeConnection:
    """The part of Fabric's Connection that SSHTransport uses, recording each call."""

    host = "129.114.108.7"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []
        self.remote: dict[str, bytes] = {}

    def run(self, command: str, **kwargs: Any) -> Any:
        self.calls.append(("run", command, kwargs))
        return SimpleNamespace(exited=0, stdout="ok\n", stderr="")

    def put(self, local: Any, remote: str) -> None:
        self.calls.append(("put", remote, {}))
        self.remote[remote] = local.read()

    def get(self, remote: str, local: Any) -> None:
        self.calls.append(("get", remote, {}))
        if isinstance(local, io.BytesIO):
            local.write(self.remote[remote])
        else:
            Path(local).write_bytes(self.remote[remote])


def test_remote_stack_runs_the_same_commands_over_ssh(tmp_path: Path) -> None:
    conn = FakeConnection()
    stack = get_stack("chameleon", connection=conn)
    assert isinstance(stack, RemoteComposeStack) and stack.target == "chameleon"
    assert conn.calls == []  # nothing connects until used
    stack.up("triton", timeout=900)
    stack.run(["perf_analyzer", "-m", "food_classifier_onnx"], service="jupyter", timeout=60)
    stack.write_file("models/food_classifier/config.pbtxt", "name: 'x'\n")
    assert stack.read_file("models/food_classifier/config.pbtxt") == b"name: 'x'\n"
    conn.remote["serve-system-lab/results/pa.csv"] = b"csv"
    stack.fetch("results/pa.csv", tmp_path / "pa.csv")
    quiet = {"hide": True, "warn": True, "in_stream": False}
    assert conn.calls == [
        ("run", "cd serve-system-lab && env FASTAPI_APP=fastapi_pt docker compose -p servelab-fastapi "
                "-f docker/docker-compose-fastapi.yaml down", {**quiet, "timeout": 300}),
        ("run", "cd serve-system-lab && sh -c 'mkdir -p models && for m in food_classifier "
                "food_classifier_onnx; do [ -e models/$m ] || cp -r models_staging/$m models/; done'",
         {**quiet, "timeout": 60}),
        ("run", "cd serve-system-lab && env FASTAPI_APP=fastapi_pt docker compose -p servelab-triton "
                "-f docker/docker-compose-triton.yaml up --build -d --wait --wait-timeout 900",
         {**quiet, "timeout": 2700}),
        ("run", "cd serve-system-lab && env FASTAPI_APP=fastapi_pt docker compose -p servelab-triton "
                "-f docker/docker-compose-triton.yaml exec -T jupyter perf_analyzer -m food_classifier_onnx",
         {**quiet, "timeout": 60}),
        ("run", "mkdir -p serve-system-lab/models/food_classifier", {"hide": True, "in_stream": False}),
        ("put", "serve-system-lab/models/food_classifier/config.pbtxt", {}),
        ("get", "serve-system-lab/models/food_classifier/config.pbtxt", {}),
        ("get", "serve-system-lab/results/pa.csv", {}),
    ]
    assert (tmp_path / "pa.csv").read_bytes() == b"csv"
    assert stack.url("triton_server") == "http://129.114.108.7:8000"


def test_remote_stack_connects_through_provisioning(fake_chi, student) -> None:
    import provisioning

    fake_chi.server.add_existing("node-serve-system-alice", "ACTIVE", fip="129.114.108.7")
    config = provisioning.from_env(env={}, project="CHI-1")
    stack = RemoteComposeStack(config=config, chi=fake_chi.api)
    assert fake_chi.rec.calls == []  # connects on first use only
    assert isinstance(stack.transport, SSHTransport)
    assert stack.transport.conn.host == "129.114.108.7"
    assert ("Server.ssh_connection", (), {"user": "cc"}) in fake_chi.rec.calls


def test_get_stack_targets() -> None:
    assert isinstance(get_stack("local"), LocalStack)
    assert isinstance(get_stack("docker", transport=RecordingTransport()), ComposeStack)
    with pytest.raises(ValueError, match="unknown target 'gpu'"):
        get_stack("gpu")


# ----------------------------------------------------------------------------- local, for real
@pytest.fixture(scope="module")
def fastapi_stack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    stack = LocalStack(log_dir=tmp_path_factory.mktemp("logs"))
    stack.up("fastapi", timeout=180)
    yield stack
    stack.down()


@pytest.mark.slow
def test_local_fastapi_stack_is_up_and_answers(fastapi_stack: LocalStack) -> None:
    assert fastapi_stack.running == ["fastapi_server", "flask"]
    assert http_ok(fastapi_stack.url("fastapi_server") + "/health")
    assert http_ok(fastapi_stack.url("flask") + "/health")
    with pytest.raises(ValueError, match="no jupyter service"):
        fastapi_stack.url("jupyter")


@pytest.mark.slow
def test_local_run_in_project_root(fastapi_stack: LocalStack) -> None:
    result = fastapi_stack.run(["python", "-c", "import os, sys; print(os.getcwd()); print(sys.prefix)"],
                               service="jupyter", timeout=60).check()
    cwd, prefix = result.stdout.split()
    assert Path(cwd) == fastapi_stack.root
    assert ".venv" in prefix  # the project's interpreter, as in the jupyter service
    assert fastapi_stack.run(["sh", "-c", "exit 3"]).returncode == 3
    with pytest.raises(TimeoutError, match="sleep 5"):
        fastapi_stack.run(["sleep", "5"], timeout=0.5)


def test_local_files(tmp_path: Path) -> None:
    stack = LocalStack(root=tmp_path)
    stack.write_file("results/x/a.json", json.dumps({"a": 1}))
    assert json.loads(stack.read_file("results/x/a.json")) == {"a": 1}
    assert stack.fetch("results/x/a.json", tmp_path / "copy.json").read_text() == '{"a": 1}'
    with pytest.raises(ValueError, match="not a path inside"):
        stack.read_file("/etc/passwd")
    with pytest.raises(FileNotFoundError, match="no result file"):
        stack.fetch("results/missing.csv", tmp_path / "m.csv")


@pytest.mark.slow
def test_local_down_leaves_no_process(tmp_path: Path) -> None:
    stack = LocalStack(log_dir=tmp_path)
    stack.up("fastapi", services=["fastapi_server"], timeout=180)
    service = stack._services["fastapi_server"]
    pid = service.process.pid
    assert psutil.pid_exists(pid)
    stack.down("fastapi")
    assert stack.running == []
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not http_ok(service.url + "/health")

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

ENV = ["env", "FASTAPI_APP=fastapi_pt", "FLASK_BACKEND=triton", "docker", "compose"]
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
        "env", "FASTAPI_APP=fastapi_onnx", "FLASK_BACKEND=triton", "docker", "compose", "-p",
        "servelab-fastapi", "-f", "docker/docker-compose-fastapi.yaml", "up", "--build", "-d", "--wait",
        "--wait-timeout", "60", "fastapi_server", "jupyter"]
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
    compose = "cd serve-system-lab && env FASTAPI_APP=fastapi_pt FLASK_BACKEND=triton docker compose"
    fastapi = f"{compose} -p servelab-fastapi -f docker/docker-compose-fastapi.yaml"
    triton = f"{compose} -p servelab-triton -f docker/docker-compose-triton.yaml"
    assert conn.calls == [
        ("run", f"{fastapi} down", {**quiet, "timeout": 300}),
        ("run", "cd serve-system-lab && sh -c 'mkdir -p models && for m in food_classifier "
                "food_classifier_onnx; do [ -e models/$m ] || cp -r models_staging/$m models/; done'",
         {**quiet, "timeout": 60}),
        ("run", f"{triton} up --build -d --wait --wait-timeout 900",
         {**quiet, "timeout": 2700}),
        ("run", f"{triton} exec -T jupyter perf_analyzer -m food_classifier_onnx",
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
def test_local_switch_to_the_onnx_app_repoints_flask(fastapi_stack: LocalStack) -> None:
    import httpx

    old = fastapi_stack._services["fastapi_server"]
    fastapi_stack.fastapi_app = "fastapi_onnx"  # what steps.fastapi_up does
    fastapi_stack.up("fastapi", services=["fastapi_server"])
    new = fastapi_stack._services["fastapi_server"]
    assert new.name == "fastapi_onnx" and old.process.proc.poll() is not None
    flask = fastapi_stack._services["flask"]
    assert flask.upstream == new.url  # GourmetGram follows the new service
    health = httpx.get(fastapi_stack.url("fastapi_server") + "/health", timeout=10).json()
    assert "onnx" in json.dumps(health).lower()


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


# ----------------------------------------------------------------------------- perf_analyzer on a stack
PERF_CSV = ("Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
            "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,"
            "p90 latency,p95 latency,p99 latency,Avg latency,request/response,response wait,"
            "Avg GPU Utilization,Avg GPU Power Usage,Max GPU Memory Usage,Total GPU Memory\n"
            "8,412.5,20,900,9000,30,9500,10,5,19000,21000,22000,25000,19400,19400,0,"
            "gpu_uuid_0:0.83;gpu_uuid_1:0.0;,gpu_uuid_0:120.5;,gpu_uuid_0:1200000000;,"
            "gpu_uuid_0:17000000000;\n")


class PerfTransport(RecordingTransport):
    """Like the node: perf_analyzer run in jupyter writes its -f CSV into the mounted checkout."""

    def run(self, argv: Any, timeout: float | None) -> CommandResult:
        result = super().run(argv, timeout)
        if "perf_analyzer" in argv:
            after = argv[argv.index("perf_analyzer"):]  # compose's own -f comes before
            self.files[after[after.index("-f") + 1]] = PERF_CSV.encode()
        return result


def test_perf_analyzer_runs_in_jupyter_with_gpu_metrics(tmp_path: Path) -> None:
    from servelab.stacks import perf_options
    from servelab.triton.perf import perf

    transport = PerfTransport()
    stack = ComposeStack(transport=transport, stack="triton")
    local_input = tmp_path / "onnx-input.json"
    local_input.write_text('{"data": []}')
    result = perf("food_classifier_onnx", label="onnx c8", concurrency=8,
                  **perf_options(stack, "results/perf/onnx-c8.csv", input_data=local_input))
    assert transport.files["results/perf/onnx-input.json"] == b'{"data": []}'  # sent to the host
    exec_prefix = [*TRITON, "exec", "-T", "jupyter"]
    assert transport.commands[0] == [*exec_prefix, "sh", "-c",
                                     "mkdir -p results/perf && rm -f results/perf/onnx-c8.csv"]
    perf_argv = transport.commands[1]
    assert perf_argv[: len(exec_prefix) + 5] == [*exec_prefix, "perf_analyzer", "-m", "food_classifier_onnx",
                                                 "-u", "triton_server:8000"]
    assert perf_argv[perf_argv.index("--input-data") + 1] == "results/perf/onnx-input.json"
    pa = perf_argv[perf_argv.index("perf_analyzer"):]
    tail = pa[pa.index("-f"):]
    assert tail == ["-f", "results/perf/onnx-c8.csv", "--verbose-csv", "--collect-metrics",
                    "--metrics-url", "triton_server:8002/metrics", "-v"]
    row = result.frame.iloc[0]
    assert (row["load_value"], row["throughput_infer_s"], row["label"]) == (8.0, 412.5, "onnx c8")
    assert "gpu_uuid_0:0.83" in row["Avg GPU Utilization"]


@pytest.mark.slow
def test_local_triton_stack_config_change_reload_and_perf(tmp_path: Path) -> None:
    """The local stack for real: deploy, write a config through the stack, reload, measure, stop."""
    from servelab.stacks import perf_options
    from servelab.triton.config import config_json, live_config, parse_config, set_instances
    from servelab.triton.perf import perf

    stack = LocalStack(root=tmp_path, log_dir=tmp_path / "logs", models=("food_classifier_onnx",))
    try:
        stack.up("triton", services=["triton_server"], timeout=180)
        triton = stack._services["triton_server"]
        pid = triton.pid
        relpath = "models/food_classifier_onnx/config.pbtxt"
        cfg = set_instances(parse_config(stack.read_file(relpath).decode()), 2, "KIND_CPU")
        stack.write_file(relpath, str(cfg))
        stack.reload_model("food_classifier_onnx", config_json(cfg))
        assert sum(g.count for g in live_config(triton, "food_classifier_onnx").instance_group) == 2
        assert stack.service_address("triton_server") == triton.url

        # perf_analyzer through the same runner the GPU targets use (stack.run in "jupyter")
        from servelab.samples import sample_paths
        from servelab.stacks import perf_runner
        from servelab.triton.perf import make_tensor_input_data

        make_tensor_input_data(sample_paths()[:2], tmp_path / "results" / "input.json")
        options = perf_options(stack, "results/perf/onnx.csv")
        options["runner"] = perf_runner(stack)
        result = perf("food_classifier_onnx", label="local c1", concurrency=1, request_count=20,
                      input_data=str(tmp_path / "results" / "input.json"), **options)
        assert result.frame.iloc[0]["throughput_infer_s"] > 0
        assert (tmp_path / "results" / "perf" / "onnx.csv").is_file()
    finally:
        stack.down()
    assert stack.running == []
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_notebook_measurements_run_perf_analyzer_inside_the_compose_stack(tmp_path: Path) -> None:
    """steps.measure's placement: in jupyter, against triton_server:8000, with GPU metrics."""
    from servelab.steps import _perf_placement

    transport = RecordingTransport()
    inputs = tmp_path / "food_classifier.json"
    inputs.write_text('{"data": []}')
    where = _perf_placement(ComposeStack(transport=transport, stack="triton"), "food_classifier", inputs)
    assert where["perf_url"] == "triton_server:8000"
    assert where["collect_metrics"] is True
    assert where["metrics_url"] == "triton_server:8002/metrics"
    assert where["input_data"] == "results/perf/food_classifier.json"
    assert transport.files["results/perf/food_classifier.json"] == b'{"data": []}'
    transport.files["results/perf/food_classifier.csv"] = b"Concurrency,Inferences/Second\n1,10\n"
    out = where["runner"](["perf_analyzer", "-m", "food_classifier"], where["csv_path"], 30)
    assert transport.commands[-1][-3:] == ["perf_analyzer", "-m", "food_classifier"]
    assert "exec" in transport.commands[-1] and "jupyter" in transport.commands[-1]
    assert out.csv_text.startswith("Concurrency")


def test_notebook_measurements_run_perf_analyzer_here_on_the_local_target(tmp_path: Path) -> None:
    from servelab.steps import _perf_placement

    inputs = tmp_path / "in.json"
    assert _perf_placement(LocalStack(root=tmp_path), "food_classifier", inputs) == {"input_data": inputs}

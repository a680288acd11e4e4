"""The stack interface: the local implementation for real, the compose ones for their exact commands."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from servelab.core.paths import REPO_ROOT
from servelab.core.procs import http_ok
from servelab.targets import get_stack
from servelab.targets.base import CommandResult, TargetError
from servelab.targets.docker import ComposeStack
from servelab.targets.local import LocalStack

OWNER = os.stat(REPO_ROOT)  # the checkout owner: every container writing into it runs as them
IDS = [f"HOST_GID={OWNER.st_gid}", f"HOST_UID={OWNER.st_uid}"]
ENV = ["env", "FASTAPI_APP=fastapi_pt", "FLASK_BACKEND=triton", *IDS, "docker", "compose"]
FASTAPI = [*ENV, "-p", "servelab-fastapi", "-f", "docker/docker-compose-fastapi.yaml"]
TRITON = [*ENV, "-p", "servelab-triton", "-f", "docker/docker-compose-triton.yaml"]
UP = ["up", "-d", "--no-build", "--pull", "never", "--wait", "--wait-timeout"]  # never builds
# the Triton image asked for its backends (once) before the lab's models are deployed for it
BACKENDS = [*TRITON, "run", "--rm", "--no-deps", "--pull", "never", "--entrypoint", "ls", "triton_server",
            "/opt/tritonserver/backends"]


class RecordingTransport:
    """Stands in for this host / the node: records commands, keeps files in a dict."""

    def __init__(self, fail: str | None = None, stdout: str = "out") -> None:
        self.host = "node.example"
        self.commands: list[list[str]] = []
        self.files: dict[str, bytes] = {}
        self.fail = fail
        self.stdout = stdout

    def run(self, argv: Any, timeout: float | None) -> CommandResult:
        self.commands.append(list(argv))
        code = 1 if self.fail and self.fail in argv else 0
        return CommandResult(list(argv), code, self.stdout, "boom" if code else "")

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
        [*FASTAPI, *UP, "300"],
        [*FASTAPI, "down"],
        BACKENDS,
        [*TRITON, *UP, "600"],
        [*FASTAPI, "down", "--timeout", "60"],
        [*TRITON, "down", "--timeout", "60"],
    ]
    # the lab's models were written into the live repository before Triton started, adapted to a
    # host without GPUs whose image (its `ls` said "out") has no onnxruntime backend
    for name in ("food_classifier", "food_classifier_onnx"):
        config = transport.files[f"models/{name}/config.pbtxt"].decode()
        assert "kind: KIND_CPU" in config and 'backend: "python"' in config, name
        assert f"models/{name}/1/model.py" in transport.files
    assert "models/food_classifier_onnx/1/model.onnx" in transport.files
    # models already there are left as they are: no second question to the image, no rewrite
    transport.commands.clear()
    transport.files["models/food_classifier/config.pbtxt"] = b"max_batch_size: 4\n"
    stack.up("triton")
    assert transport.commands == [[*FASTAPI, "down"], [*TRITON, *UP, "600"]]
    assert transport.files["models/food_classifier/config.pbtxt"] == b"max_batch_size: 4\n"


def test_compose_on_a_gpu_engine_adds_the_override_and_deploys_for_the_gpu() -> None:
    transport = RecordingTransport(stdout="onnxruntime\npython\npytorch\n")
    stack = ComposeStack(transport=transport, gpu=True)
    stack.up("triton", timeout=60)
    gpu_triton = [*TRITON, "-f", "docker/docker-compose-triton.gpu.yaml"]
    assert transport.commands == [
        [*FASTAPI, "-f", "docker/docker-compose-fastapi.gpu.yaml", "down"],
        [*gpu_triton, *BACKENDS[len(TRITON):]],
        [*gpu_triton, *UP, "60"],
    ]
    config = transport.files["models/food_classifier_onnx/config.pbtxt"].decode()
    assert "kind: KIND_GPU" in config and 'backend: "onnxruntime"' in config
    assert "models/food_classifier_onnx/1/model.py" not in transport.files


def test_compose_variables_choose_the_fastapi_app() -> None:
    transport = RecordingTransport()
    ComposeStack(transport=transport, fastapi_app="fastapi_onnx").up("fastapi", ["fastapi_server"], 60)
    assert transport.commands[-1] == [
        "env", "FASTAPI_APP=fastapi_onnx", "FLASK_BACKEND=triton", *IDS, "docker", "compose", "-p",
        "servelab-fastapi", "-f", "docker/docker-compose-fastapi.yaml", *UP, "60", "fastapi_server"]
    with pytest.raises(ValueError, match="FASTAPI_APP='fastapi_tf'"):
        ComposeStack(transport=transport, fastapi_app="fastapi_tf")
    with pytest.raises(ValueError, match="has no service 'triton_server'"):
        ComposeStack(transport=transport).up("fastapi", ["triton_server"])


def test_compose_run_exec_reload_files(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = RecordingTransport()
    stack = ComposeStack(transport=transport)
    with pytest.raises(ValueError, match="unknown service 'jupyter'"):
        stack.run(["perf_analyzer"], service="jupyter")  # the Jupyter server is no stack's service
    stack.up("triton")
    transport.commands.clear()
    assert stack.run(["nvidia-smi"]).returncode == 0
    stack.run(["ls"], service="fastapi_server", timeout=120)  # the fastapi stack's own service
    stack.run(["ls"], service="triton_server")
    assert transport.commands == [
        ["nvidia-smi"],
        [*FASTAPI, "exec", "-T", "fastapi_server", "ls"],
        [*TRITON, "exec", "-T", "triton_server", "ls"],
    ]
    loads: list[tuple[str, str, Any]] = []

    class Client:  # tritonclient.http's client, as the reload uses it
        def __init__(self, url: str, **_: Any) -> None:
            self.url = url
            self.plugins: list[Any] = []

        def register_plugin(self, plugin: Any) -> None:
            self.plugins.append(plugin)

        def load_model(self, name: str, config: Any = None) -> None:
            request = type("Request", (), {"headers": {}})()
            for plugin in self.plugins:
                plugin(request)
            loads.append((self.url, name, config, request.headers))

    import tritonclient.http

    from servelab.triton.access import admin_key

    monkeypatch.setattr(tritonclient.http, "InferenceServerClient", Client)
    stack.reload_model("food_classifier", '{"max_batch_size": 16}')
    # with the lab's key: Triton's model control answers nothing else
    assert loads == [("node.example:8000", "food_classifier", '{"max_batch_size": 16}',
                      {"admin-key": admin_key()})]
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


def test_get_stack_targets() -> None:
    assert isinstance(get_stack("local"), LocalStack)
    assert isinstance(get_stack("docker", transport=RecordingTransport()), ComposeStack)
    with pytest.raises(ValueError, match="unknown target 'gpu'"):
        get_stack("gpu")
    # 03-07 on Chameleon run in the node's Jupyter as "docker": asking for a chameleon stack says so
    with pytest.raises(TargetError, match=r"target='docker'.*next to the servers"):
        get_stack("chameleon")


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
    with pytest.raises(ValueError, match="unknown service 'jupyter'"):
        fastapi_stack.url("jupyter")


@pytest.mark.slow
def test_local_switch_to_the_onnx_app_repoints_flask(fastapi_stack: LocalStack) -> None:
    import httpx

    old = fastapi_stack.service("fastapi_server")
    fastapi_stack.fastapi_app = "fastapi_onnx"  # what steps.fastapi_up does
    fastapi_stack.up("fastapi", services=["fastapi_server"])
    new = fastapi_stack.service("fastapi_server")
    assert new.name == "fastapi_onnx" and old.process.proc.poll() is not None
    flask = fastapi_stack.service("flask")
    assert flask.upstream == new.url  # GourmetGram follows the new service
    health = httpx.get(fastapi_stack.url("fastapi_server") + "/health", timeout=10).json()
    assert "onnx" in json.dumps(health).lower()


@pytest.mark.slow
def test_local_run_in_project_root(fastapi_stack: LocalStack) -> None:
    result = fastapi_stack.run(["python", "-c", "import os, sys; print(os.getcwd()); print(sys.prefix)"],
                               service="fastapi_server", timeout=60).check()
    cwd, prefix = result.stdout.split()
    assert Path(cwd) == fastapi_stack.root
    assert ".venv" in prefix  # the project's interpreter: every local service shares this host
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
    service = stack.service("fastapi_server")
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


def test_perf_analyzer_runs_next_to_the_kernel_with_gpu_metrics(tmp_path: Path) -> None:
    """On the docker target perf_analyzer runs where the kernel runs (the node's Jupyter container),
    against the published ports, with Triton's GPU metrics collected."""
    from servelab.triton.perf import RunOutput, perf

    stack = ComposeStack(transport=RecordingTransport(), stack="triton")
    local_input = tmp_path / "onnx-input.json"
    local_input.write_text('{"data": []}')
    options = stack.perf_options(local_input)
    assert options == {"input_data": local_input, "collect_metrics": True,
                       "metrics_url": "node.example:8002/metrics"}
    seen: list[list[str]] = []

    def runner(argv: list[str], csv_path: str, timeout: float) -> RunOutput:
        seen.append(argv)
        Path(csv_path).write_text(PERF_CSV)
        return RunOutput(list(argv), 0, "", PERF_CSV, 1.0)

    url = stack.url("triton_server").split("://", 1)[-1]
    result = perf("food_classifier_onnx", url, "onnx c8", concurrency=8, runner=runner,
                  workdir=tmp_path, **options)
    argv = seen[0]
    assert argv[1:5] == ["-m", "food_classifier_onnx", "-u", "node.example:8000"]
    assert argv[argv.index("--input-data") + 1] == str(local_input)
    assert argv[argv.index("--metrics-url") + 1] == "node.example:8002/metrics"
    assert "--collect-metrics" in argv
    row = result.frame.iloc[0]
    assert (row["load_value"], row["throughput_infer_s"], row["label"]) == (8.0, 412.5, "onnx c8")
    assert "gpu_uuid_0:0.83" in row["Avg GPU Utilization"]
    assert LocalStack(root=tmp_path).perf_options(local_input) == {"input_data": local_input}


@pytest.mark.slow
def test_local_triton_stack_config_change_reload_and_perf(tmp_path: Path) -> None:
    """The local stack for real: deploy, write a config through the stack, reload, measure, stop."""
    from servelab.triton.config import config_json, live_config, parse_config, set_instances
    from servelab.triton.perf import perf

    stack = LocalStack(root=tmp_path, log_dir=tmp_path / "logs", models=("food_classifier_onnx",))
    try:
        stack.up("triton", services=["triton_server"], timeout=180)
        triton = stack.service("triton_server")
        pid = triton.pid
        relpath = "models/food_classifier_onnx/config.pbtxt"
        cfg = set_instances(parse_config(stack.read_file(relpath).decode()), 2, "KIND_CPU")
        stack.write_file(relpath, str(cfg))
        stack.reload_model("food_classifier_onnx", config_json(cfg))
        assert sum(g.count for g in live_config(triton, "food_classifier_onnx").instance_group) == 2
        assert stack.service_address("triton_server") == triton.url

        # perf_analyzer placed by the stack, as steps.measure places it
        from servelab.core.samples import sample_paths
        from servelab.triton.perf_inputs import make_tensor_input_data

        inputs = make_tensor_input_data(sample_paths()[:2], tmp_path / "results" / "input.json")
        csv_path = tmp_path / "results" / "perf" / "onnx.csv"
        result = perf("food_classifier_onnx", triton.url, "local c1", concurrency=1, request_count=20,
                      csv_path=str(csv_path), **stack.perf_options(inputs))
        assert result.frame.iloc[0]["throughput_infer_s"] > 0
        assert csv_path.is_file()
    finally:
        stack.down()
    assert stack.running == []
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_every_perf_analyzer_run_prints_its_command_first(tmp_path: Path, capsys) -> None:
    from servelab.triton.perf import RunOutput, perf

    def runner(argv: list[str], csv_path: str, timeout: float) -> RunOutput:
        print("running")
        Path(csv_path).write_text(PERF_CSV)
        return RunOutput(list(argv), 0, "", PERF_CSV, 1.0)

    perf("food_classifier_onnx", "localhost:8000", "c8", concurrency=8, runner=runner, workdir=tmp_path)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("$ perf_analyzer -m food_classifier_onnx -u localhost:8000 ")
    assert "--concurrency-range 8" in out[0] and out[1] == "running"  # before it runs

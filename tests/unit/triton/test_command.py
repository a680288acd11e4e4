"""The tritonserver command line has one home (``servelab.triton.command``): the local process, the Triton
image (its Dockerfile's and compose file's command) and Model Analyzer's Triton take their flags from it,
a notebook's own server flags reach Triton on every target, and the dynamic-batching defaults are written
once (``servelab.triton.defaults``)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from servelab.core.paths import REPO_ROOT
from servelab.targets.base import LAB_MODELS
from servelab.targets.compose import ComposeStack
from servelab.triton import command
from servelab.triton.command import FLAGS, Flag, Launch

HOME = "servelab/triton/command.py"
# the same spelling meaning something else: Model Analyzer's own option (``model-analyzer profile``)
NOT_TRITONS = {"servelab/triton/model_analyzer.py": ['"--model-repository", str(work.repository),']}
DEFAULTS_HOME = "servelab/triton/defaults.py"


def _tracked(*excluded: str) -> list[str]:
    """The checkout's tracked text files outside tests, dated notes and recorded runs."""
    names = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, text=True, check=True).stdout.split()
    skip = ("tests/", "docs/decisions/", "results/", "provisioning/lab-files.txt", *excluded)
    return [n for n in names if not n.startswith(skip) and (REPO_ROOT / n).is_file()
            and not n.endswith((".jpg", ".png", ".json", ".onnx"))]


def _lines(pattern: str, *excluded: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    regex = re.compile(pattern)
    for name in _tracked(*excluded):
        try:
            text = (REPO_ROOT / name).read_text()
        except UnicodeDecodeError:
            continue
        hits = [line.strip() for line in text.splitlines() if regex.search(line)]
        if hits:
            found[name] = hits
    return found


def test_the_tritonserver_flags_live_in_one_module() -> None:
    """Every flag the lab gives tritonserver, as a command line writes it (``--model-control-mode``) or as
    Model Analyzer's YAML names it (``"exit_timeout_secs":``), appears in the one home and nowhere else."""
    names = [f.name for f in FLAGS]
    assert {"--model-repository", "--model-control-mode", "--exit-timeout-secs",
            "--disable-auto-complete-config"} <= set(names)
    spelled = "|".join(re.escape(n) for n in names)
    keyed = "|".join(re.escape(n[2:].replace("-", "_")) for n in names)
    found = _lines(rf"(?<![\w-])({spelled})(?![\w-])|[\"']({keyed})[\"']\s*:")
    elsewhere = {k: v for k, v in found.items() if k != HOME and NOT_TRITONS.get(k) != v}
    assert HOME in found and elsewhere == {}, elsewhere


def test_the_dynamic_batching_defaults_are_written_once() -> None:
    found = _lines(r"(?<![\d.])4,\s*6,\s*8(?![\d.])")
    assert set(found) == {DEFAULTS_HOME}, found
    delay = _lines(r"(queue_delay|queue delay|QUEUE_DELAY)\w*\W.*(?<![\w.])100(?![\w.])")
    assert set(delay) == {DEFAULTS_HOME}, delay


def test_the_local_process_runs_the_one_command_line() -> None:
    from servelab.triton.server import TritonServer, prepare_backends, pytriton_dist

    server = TritonServer(REPO_ROOT / "models_staging", http_port=8123, grpc_port=8124, metrics_port=8125,
                          server_flags=["--cache-config=local,size=1048576"])
    argv = server.argv()
    assert argv == command.argv(Launch(
        str(server.repository), str(pytriton_dist() / "bin" / "tritonserver"), http_port=8123,
        grpc_port=8124, metrics_port=8125, address="127.0.0.1", backend_directory=str(prepare_backends()),
        shm_prefix=server.shm_prefix, server_flags=("--cache-config=local,size=1048576",)))
    assert "--model-control-mode=explicit" in argv and "--http-address=127.0.0.1" in argv
    assert f"--backend-config=python,shm-region-prefix-name={server.shm_prefix}" in argv
    assert argv[-1] == "--cache-config=local,size=1048576", "the notebook's flags come after the lab's"


def _image_command(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The compose file's command for the Triton container, as the container runs it (``--dry-run``)."""
    service = yaml.safe_load((REPO_ROOT / "docker/docker-compose-triton.yaml").read_text()
                             )["services"]["triton_server"]
    python, *args = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", a) for a in service["command"]]
    assert python == "python3"
    return subprocess.run([sys.executable, *args, "--dry-run"], capture_output=True, text=True, timeout=60,
                          check=False, cwd=REPO_ROOT, env={**env, "PYTHONPATH": str(REPO_ROOT)})


def test_the_image_runs_the_same_command_line_with_the_notebooks_flags() -> None:
    done = _image_command({"TRITON_SERVER_FLAGS": "--cache-config=local,size=1048576 --log-info=true"})
    assert done.returncode == 0, done.stderr
    line = shlex.split(done.stdout)
    assert line == command.argv(Launch(load_models=LAB_MODELS, server_flags=(
        "--cache-config=local,size=1048576", "--log-info=true")))
    assert line[:3] == ["tritonserver", "--model-repository=/models", "--model-control-mode=explicit"]
    assert [a.split("=", 1)[1] for a in line if a.startswith("--load-model=")] == list(LAB_MODELS)
    assert not any(a.startswith(("--http-address", "--backend-directory")) for a in line), \
        "in the container: every address (the ports are published), the image's own backends"
    dockerfile = (REPO_ROOT / "docker/Dockerfile.triton").read_text()
    assert dockerfile.rstrip().splitlines()[-1] == 'CMD ["python3", "-m", "servelab.triton.command"]'


def test_the_image_command_refuses_a_flag_where_a_model_goes() -> None:
    done = subprocess.run([sys.executable, "-m", "servelab.triton.command", "--log-verbose=1"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=REPO_ROOT)
    assert done.returncode == 2 and "TRITON_SERVER_FLAGS" in done.stderr and not done.stdout


def test_a_compose_stack_passes_the_notebooks_server_flags() -> None:
    plain = ComposeStack(transport=None, gpu=False).compose("triton", "up")
    assert not any(a.startswith("TRITON_SERVER_FLAGS=") for a in plain), "nothing added when none asked"
    argv = ComposeStack(transport=None, gpu=False,
                        triton_flags=["--cache-config=local,size=1048576"]).compose("triton", "up")
    assert "TRITON_SERVER_FLAGS=--cache-config=local,size=1048576" in argv
    service = yaml.safe_load((REPO_ROOT / "docker/docker-compose-triton.yaml").read_text()
                             )["services"]["triton_server"]
    assert service["environment"]["TRITON_SERVER_FLAGS"] == "${TRITON_SERVER_FLAGS:-}"


def test_the_local_stack_passes_the_notebooks_server_flags(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    from servelab.targets.local import LocalStack
    from servelab.triton import repository, server

    made: list[list[str]] = []

    class Started(Exception):
        pass

    class Recording(server.TritonServer):
        def start(self, timeout: float = 120.0) -> server.TritonServer:
            made.append(self.server_flags)
            raise Started

    monkeypatch.setattr(server, "TritonServer", Recording)
    monkeypatch.setattr(repository, "deploy_all", lambda *a, **k: {})
    stack = LocalStack(root=tmp_path, models=(), gpus=0, triton_flags=["--log-info=true"])
    with pytest.raises(Started):
        stack.up("triton", services=["triton_server"])
    assert made == [["--log-info=true"]]


def test_a_flag_with_a_key_from_the_environment_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The docstring's example: the flag appears when its variable is set, with the key in it."""
    keyed = Flag("--http-restricted-api", "model-repository:admin-key={env[TRITON_ADMIN_KEY]}",
                 when="env:TRITON_ADMIN_KEY")
    assert keyed.name in command.__doc__ and "env:TRITON_ADMIN_KEY" in command.__doc__
    monkeypatch.setattr(command, "FLAGS", (*FLAGS, keyed))
    assert "--http-restricted-api=model-repository:admin-key=s3cret" in command.argv(
        Launch(env={"TRITON_ADMIN_KEY": "s3cret"}))
    assert not any(a.startswith("--http-restricted-api") for a in command.argv(Launch(env={})))


def test_every_key_the_flags_read_reaches_the_container() -> None:
    """A flag that reads ``env:NAME`` is built inside the Triton container on docker: compose passes NAME."""
    service = yaml.safe_load((REPO_ROOT / "docker/docker-compose-triton.yaml").read_text()
                             )["services"]["triton_server"]
    passed = set(service.get("environment") or {})
    read = {f.when[4:] for f in FLAGS if f.when.startswith("env:")}
    read |= set(re.findall(r"\{env\[(\w+)\]\}", " ".join(f.value or "" for f in FLAGS)))
    assert read <= passed, f"add {sorted(read - passed)} to triton_server's environment in the compose file"


def test_model_analyzers_triton_takes_the_lab_flags() -> None:
    local = command.model_analyzer_flags(Launch(backend_directory="/b", address="127.0.0.1", http_port=1,
                                                grpc_port=2, metrics_port=3, shm_prefix="p"))
    assert local == {"http_port": "1", "grpc_port": "2", "metrics_port": "3", "http_address": "127.0.0.1",
                     "grpc_address": "127.0.0.1", "backend_directory": "/b",
                     "backend_config": "python,shm-region-prefix-name=p", "exit_timeout_secs": "5",
                     "log_verbose": "0"}
    docker = command.model_analyzer_flags(Launch(http_port=1, grpc_port=2, metrics_port=3, shm_prefix="p"))
    assert "http_address" not in docker and "backend_directory" not in docker
    assert not {"model_repository", "model_control_mode", "disable_auto_complete_config"} & set(local)


def test_the_module_runs_in_the_images_python() -> None:
    """Standard library only, and no syntax newer than the Triton image's Python 3.10."""
    import ast

    tree = ast.parse((REPO_ROOT / HOME).read_text(), feature_version=(3, 10))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    assert os.path.basename(command.__file__) == "command.py"

"""On a GPU host (target docker) the engine runs in its compose stack: the exact commands, recorded."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest
import yaml

from servelab.core.paths import REPO_ROOT
from servelab.lab import step09_llm_serving as step
from servelab.lab.params import resolve
from servelab.llm import server
from servelab.llm.server import COMPOSE_FILE, EngineOptions, compose_argv, start_engine_compose


class Recorder:
    def __init__(self, fail: bool = False, error: str = "no GPU here") -> None:
        self.calls: list[list[str]] = []
        self.fail, self.error = fail, error

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if self.fail:
            return subprocess.CompletedProcess(argv, 1, "", self.error)
        return subprocess.CompletedProcess(argv, 0, "", "")


def owner() -> list[str]:
    st = os.stat(REPO_ROOT)
    return [f"HOST_GID={st.st_gid}", f"HOST_UID={st.st_uid}"]


UP = ["up", "-d", "--no-build", "--pull", "never", "--wait", "--wait-timeout"]  # never builds


def test_up_then_warm_up_then_down(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[str] = []
    monkeypatch.setattr(server, "post_json",
                        lambda url, body, timeout, headers=None: (posted.append(url), (200, {}))[1])
    monkeypatch.delenv("SERVELAB_LLM", raising=False)
    run = Recorder()
    engine = start_engine_compose(EngineOptions("static", max_batch=4, cb_num_blocks=24), run=run)
    prefix = ["env", *owner(), "LLM_BATCHING=static", "LLM_KV_BLOCKS=24", "LLM_MAX_BATCH=4",
              "docker", "compose", "-p", "servelab-llm", "-f", "docker/docker-compose-llm.yaml"]
    assert run.calls == [[*prefix, *UP, "600"]]
    assert posted == ["http://localhost:8010/v1/completions"] and engine.model == "artifacts/llm"
    engine.stop()
    engine.stop()  # once is enough
    assert run.calls[1:] == [[*prefix, "down", "--timeout", "30"]]


def test_a_failed_up_says_which_command(monkeypatch: pytest.MonkeyPatch) -> None:
    said = (r"`env .* docker compose -p servelab-llm -f docker/docker-compose-llm\.yaml up -d --no-build "
            r"--pull never --wait --wait-timeout 600` failed \(exit 1\): "
            r"the LLM engine's stack did not come up: no GPU here")
    run = Recorder(fail=True)
    with pytest.raises(RuntimeError, match=said):
        start_engine_compose(EngineOptions(), run=run)
    compose = ["docker", "compose", "-p", "servelab-llm", "-f", "docker/docker-compose-llm.yaml"]
    assert [c[c.index("docker"):] for c in run.calls[1:]] == [
        [*compose, "ps", "-a", "--format", "json"],  # the services' states, for the explanation
        [*compose, "down", "--timeout", "30"],  # nothing is left running
    ]


def test_a_missing_image_says_how_to_build_it() -> None:
    run = Recorder(fail=True, error="Error response from daemon: No such image: servelab-llm-llm_server")
    said = r"the image servelab-llm-llm_server is not built: .*`\./lab images`"
    with pytest.raises(RuntimeError, match=said):
        start_engine_compose(EngineOptions(), run=run)


def test_the_gpus_come_from_the_override_where_the_engine_has_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVELAB_DOCKER_GPU", "1")
    argv = compose_argv(EngineOptions(), "config")
    override = "docker/docker-compose-llm.gpu.yaml"
    assert argv[argv.index("-f"):] == ["-f", COMPOSE_FILE, "-f", override, "config"]
    assert (REPO_ROOT / override).is_file()
    monkeypatch.setenv("SERVELAB_DOCKER_GPU", "0")
    assert override not in compose_argv(EngineOptions(), "config")


def test_the_compose_file_runs_what_the_variables_say() -> None:
    """The variables compose_argv sets are the ones the file reads, and its port is the one clients use."""
    text = (REPO_ROOT / COMPOSE_FILE).read_text()
    variables = {a.split("=")[0] for a in compose_argv(EngineOptions())[1:] if "=" in a}
    for name in variables:
        assert "${" + name in text, name
    service = yaml.safe_load(text)["services"]["llm_server"]
    assert service["ports"] == [f"127.0.0.1:{server.COMPOSE_PORT}:8000"]  # loopback only
    assert service["command"][:3] == ["python", "-m", "servelab.llm.engine"]
    # docker stop's SIGTERM reaches the entrypoint shell while it builds the model only through an init
    assert service["init"] is True


def test_notebook_picks_the_compose_engine_on_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    monkeypatch.setattr(step, "start_engine_compose",
                        lambda options: started.append("compose") or _fake(options))
    monkeypatch.setattr(step, "start_engine", lambda options: started.append("local") or _fake(options))
    step.engine_up(resolve("docker", "quick", llm_max_batch=None, llm_kv_blocks=None), "continuous")
    step.engine_up(resolve("local", "quick", llm_max_batch=None, llm_kv_blocks=None), "continuous")
    assert started == ["compose", "local"]
    with pytest.raises(RuntimeError, match="notebook 09 runs on the node"):
        step.engine_up(resolve("chameleon", "quick", llm_max_batch=None, llm_kv_blocks=None), "static")


def _fake(options: EngineOptions) -> server.Engine:
    return server.Engine("http://x", "artifacts/llm", options, ["docker", "compose", "up"])

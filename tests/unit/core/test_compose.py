"""``servelab.core.compose``: whether the engine has GPUs, the ``-f`` arguments, and a failed ``up``
said in words (the taken port, the missing image, each service not running with its log lines)."""

from __future__ import annotations

import json

import pytest

from servelab.core.compose import (
    BUILD_COMMAND,
    GPU_SETTING,
    LOG_LINES,
    RUNTIMES_ARGV,
    explain_up_failure,
    file_args,
    gpu_override,
    gpu_runtime,
    missing_image,
    service_states,
    taken_port,
    up_args,
)

RUNC = {"io.containerd.runc.v2": {"path": "runc"}, "runc": {"path": "runc"}}
NVIDIA = {**RUNC, "nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}


class FakeRun:
    """``Run``: records each argv and answers from ``answers`` (the first key found in the argv)."""

    def __init__(self, answers: dict[str, tuple[int, str]] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.answers = answers or {}

    def __call__(self, argv: list[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        for key, answer in self.answers.items():
            if key in argv:
                return answer
        return 0, ""


@pytest.mark.parametrize(("setting", "expected"), [("1", True), ("0", False), (" 1 ", True)])
def test_the_setting_decides_without_asking_the_engine(monkeypatch: pytest.MonkeyPatch, setting: str,
                                                       expected: bool) -> None:
    monkeypatch.setenv(GPU_SETTING, setting)
    run = FakeRun()
    assert gpu_runtime(run) is expected
    assert run.calls == []


@pytest.mark.parametrize(("setting", "answer", "expected"), [
    ("auto", (0, json.dumps(NVIDIA)), True),
    ("auto", (0, json.dumps(RUNC)), False),
    ("AUTO", (0, json.dumps(NVIDIA)), True),
    ("", (0, json.dumps(NVIDIA)), True),
    ("auto", (1, "Cannot connect to the Docker daemon"), False),  # an engine that does not answer
])
def test_auto_asks_the_engine_for_the_nvidia_runtime(monkeypatch: pytest.MonkeyPatch, setting: str,
                                                     answer: tuple[int, str], expected: bool) -> None:
    monkeypatch.setenv(GPU_SETTING, setting)
    run = FakeRun({"info": answer})
    assert gpu_runtime(run) is expected
    assert run.calls == [["docker", "info", "--format", "{{json .Runtimes}}"]] == [RUNTIMES_ARGV]


def test_unset_means_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GPU_SETTING, raising=False)
    assert gpu_runtime(FakeRun({"info": (0, json.dumps(NVIDIA))})) is True


@pytest.mark.parametrize("setting", ["yes", "true", "2", "gpu"])
def test_a_bad_setting_is_refused(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv(GPU_SETTING, setting)
    with pytest.raises(ValueError, match=rf"SERVELAB_DOCKER_GPU='{setting}': use 1 .* 0 .* or auto"):
        gpu_runtime(FakeRun())


def test_the_gpu_override_is_a_second_file() -> None:
    triton = "docker/docker-compose-triton.yaml"
    assert gpu_override(triton) == "docker/docker-compose-triton.gpu.yaml"
    assert gpu_override("docker/docker-compose-llm.yml") == "docker/docker-compose-llm.gpu.yaml"
    assert file_args(triton, gpu=False) == ["-f", triton]
    assert file_args(triton, gpu=True) == ["-f", triton, "-f", "docker/docker-compose-triton.gpu.yaml"]


def test_up_never_builds_nor_pulls_and_waits() -> None:
    assert up_args(600) == ["up", "-d", "--no-build", "--pull", "never", "--wait", "--wait-timeout", "600"]
    assert up_args(59.9, "fastapi_server")[-2:] == ["59", "fastapi_server"]


@pytest.mark.parametrize("error", [
    "Error response from daemon: driver failed programming external connectivity on endpoint "
    "servelab-triton-triton_server-1: Error starting userland proxy: listen tcp4 0.0.0.0:8000: bind: "
    "address already in use",
    "Error response from daemon: driver failed programming external connectivity on endpoint "
    "servelab-fastapi-fastapi_server-1 (0123abcd): Bind for 0.0.0.0:8000 failed: port is already allocated",
])
def test_a_taken_port_is_found_in_both_docker_messages(error: str) -> None:
    assert taken_port(error) == "8000"
    said = explain_up_failure("the triton stack", error, ["docker", "compose"], FakeRun())
    assert said.startswith("the triton stack: port 8000 on this host is already taken by another program")
    assert "ss -ltnp 'sport = :8000'" in said


def test_no_port_and_no_image_in_other_errors() -> None:
    assert taken_port("container servelab-triton-triton_server-1 is unhealthy") is None
    assert missing_image("container servelab-triton-triton_server-1 is unhealthy") is None


@pytest.mark.parametrize(("error", "image"), [
    ("Error response from daemon: No such image: servelab-triton-triton_server:latest",
     "servelab-triton-triton_server:latest"),
    ("Error response from daemon: pull access denied for servelab-jupyter, repository does not exist",
     "servelab-jupyter"),
    ("image servelab-llm-llm_server not found", "servelab-llm-llm_server"),
])
def test_a_missing_image_names_the_build_command(error: str, image: str) -> None:
    assert missing_image(error) == image
    run = FakeRun()
    said = explain_up_failure("the llm stack", error, ["docker", "compose"], run)
    assert said == (f"the llm stack: the image {image} is not built: build the images on the Docker host "
                    f"with `{BUILD_COMMAND}` (a notebook never builds one: it takes minutes)")
    assert run.calls == []  # nothing more to ask


PS_ROWS = [
    {"Service": "triton_server", "State": "running", "Health": "unhealthy", "ExitCode": 0},
    {"Service": "flask", "State": "exited", "Health": "", "ExitCode": 137},
    {"Service": "gourmetgram", "State": "running", "Health": "healthy", "ExitCode": 0},
    {"Service": "jupyter", "State": "running", "ExitCode": 0},
]
STATES = [("triton_server", "running, unhealthy"), ("flask", "exited (code 137)"),
          ("gourmetgram", "running, healthy"), ("jupyter", "running")]


def test_service_states_from_ndjson_and_from_a_list() -> None:
    ndjson = "\n".join(json.dumps(row) for row in PS_ROWS) + "\n"
    assert service_states(ndjson) == STATES  # compose v2.21 and later: one object per line
    assert service_states(json.dumps(PS_ROWS)) == STATES  # older compose: one list
    assert service_states("") == [] and service_states("[]") == []


def test_a_failed_up_names_each_service_not_running_with_its_log_lines() -> None:
    compose = ["docker", "compose", "-p", "servelab-triton", "-f", "docker/docker-compose-triton.yaml"]
    ndjson = "\n".join(json.dumps(row) for row in PS_ROWS)
    run = FakeRun({"ps": (0, ndjson), "triton_server": (0, "E0101 failed to load 'food_classifier'\n"),
                   "flask": (0, "Killed\n")})
    said = explain_up_failure("the triton stack", "dependency failed to start: container "
                              "servelab-triton-triton_server-1 is unhealthy", compose, run)
    assert said == (
        "the triton stack did not come up: "
        f"service triton_server is running, unhealthy; its last {LOG_LINES} log lines:\n"
        "E0101 failed to load 'food_classifier'\n"
        f"service flask is exited (code 137); its last {LOG_LINES} log lines:\nKilled")
    assert run.calls == [
        [*compose, "ps", "-a", "--format", "json"],
        [*compose, "logs", "--no-color", "--tail", str(LOG_LINES), "triton_server"],
        [*compose, "logs", "--no-color", "--tail", str(LOG_LINES), "flask"],
    ]  # the healthy and the running services' logs are not asked for


def test_without_states_the_error_itself_is_said() -> None:
    error = "container servelab-llm-llm_server-1 is unhealthy"
    for answer in [(1, "no such project"), (0, "not json"), (0, "{not json")]:
        said = explain_up_failure("the llm stack", error, ["docker", "compose"], FakeRun({"ps": answer}))
        assert said == f"the llm stack did not come up: {error}"

"""The config calls notebooks 05-07 show the student (``triton_steps.set_instances``,
``set_dynamic_batching``) and ``triton_up``'s unloading of models a notebook does not use, with
stand-ins for the server: what config each call applies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from servelab.lab import triton_steps
from servelab.triton.config import config_text, parse_config

PYTHON = ('name: "m"\nbackend: "python"\nmax_batch_size: 16\ninstance_group { count: 1 kind: KIND_CPU }\n'
          'parameters { key: "CPU_THREADS" value { string_value: "auto" } }\n')


@dataclass
class Stack:
    has_gpu: bool
    target: str = "local"


@dataclass
class Client:
    index: list[dict[str, str]] = field(default_factory=list)
    unloaded: list[str] = field(default_factory=list)

    def get_model_repository_index(self) -> list[dict[str, str]]:
        return self.index

    def unload_model(self, name: str) -> None:
        self.unloaded.append(name)


@dataclass
class Server:
    stack: Any
    url: str = "127.0.0.1:8000"
    handle: Client = field(default_factory=Client)

    def client(self) -> Client:
        return self.handle


def server(has_gpu: bool) -> Any:
    """A stand-in for ``triton_steps.Triton`` on a stack with or without GPUs."""
    return Server(Stack(has_gpu))


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The config text each call applies (the model starts as PYTHON)."""
    texts: list[str] = []
    monkeypatch.setattr(triton_steps, "live_config", lambda triton, name: parse_config(PYTHON))
    monkeypatch.setattr(triton_steps, "apply_config",
                        lambda triton, name, cfg, quiet=False: texts.append(config_text(cfg)))
    return texts


def test_kind_gpu_on_a_cpu_target_becomes_kind_cpu_and_says_so(applied: list[str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    triton_steps.set_instances(server(has_gpu=False), "m", count=2, kind="KIND_GPU", gpus=[0, 1])
    assert "count: 2" in applied[0] and "KIND_CPU" in applied[0] and "gpus" not in applied[0]
    assert "KIND_GPU becomes KIND_CPU" in capsys.readouterr().out


def test_kind_gpu_keeps_its_gpus_where_there_are_gpus(applied: list[str]) -> None:
    triton_steps.set_instances(server(has_gpu=True), "m", count=2, kind="KIND_GPU", gpus=[0, 1])
    assert "KIND_GPU" in applied[0] and "gpus: 0" in applied[0] and "gpus: 1" in applied[0]


def test_the_threads_setting_is_one_parameter(applied: list[str]) -> None:
    triton_steps.set_instances(server(has_gpu=False), "m", count=1, threads="default")
    assert 'string_value: "default"' in applied[0] and "count: 1" in applied[0]


def test_dynamic_batching_fields_as_named_in_the_config(applied: list[str]) -> None:
    triton_steps.set_dynamic_batching(server(has_gpu=False), "m", preferred_batch_size=[2, 4],
                                      max_queue_delay_microseconds=500)
    assert "preferred_batch_size: 2" in applied[0] and "preferred_batch_size: 4" in applied[0]
    assert "max_queue_delay_microseconds: 500" in applied[0]
    triton_steps.set_dynamic_batching(server(has_gpu=False), "m", enabled=False)
    assert "dynamic_batching" not in applied[1]


def test_triton_up_unloads_the_models_a_notebook_does_not_use(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    client = Client([{"name": "food_classifier", "state": "READY"},
                     {"name": "food_classifier_onnx", "state": "READY"},
                     {"name": "old", "state": "UNAVAILABLE"}])

    class Up(Stack):
        def up(self, stack: str, services: list[str]) -> None: ...

        def url(self, service: str) -> str:
            return "http://127.0.0.1:8000"

    monkeypatch.setattr(triton_steps, "deploy", lambda triton, name: None)
    monkeypatch.setattr(triton_steps, "Triton", lambda stack, url: Server(stack, url, client))
    monkeypatch.setattr(triton_steps, "where_it_computes", lambda triton, name: ("cpu", "CPU"))
    stack: Any = Up(has_gpu=False)
    triton_steps.triton_up(stack, ["food_classifier"])
    assert client.unloaded == ["food_classifier_onnx"]
    said = capsys.readouterr().out
    assert "/v2/repository/models/food_classifier_onnx/unload" in said
    assert "food_classifier computes on the CPU" in said  # each notebook says where its model runs

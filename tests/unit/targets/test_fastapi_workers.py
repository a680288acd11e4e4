"""The FastAPI service's worker processes (``WORKERS``) through both targets: the compose file and
``ComposeStack`` pass it, the local target restarts the service when it changes, a nonsense count is
refused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from servelab.targets import services as local_services
from servelab.targets.docker import ComposeStack
from servelab.targets.local import LocalStack
from tests.unit.targets.test_docker import services


def test_the_compose_file_passes_workers_and_leaves_the_default_to_the_service() -> None:
    assert str(services("fastapi", {"WORKERS": "3"})["fastapi_server"]["environment"]["WORKERS"]) == "3"
    assert services("fastapi")["fastapi_server"]["environment"]["WORKERS"] in ("", None)  # 1 (settings.py)


def test_compose_stack_sets_workers_once_chosen() -> None:
    stack = ComposeStack(transport=None, gpu=False)
    assert not [a for a in stack.compose("fastapi", "up") if a.startswith("WORKERS=")]
    stack.choose(fastapi_workers=4)
    assert "WORKERS=4" in stack.compose("fastapi", "up")


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "2"])
def test_a_nonsense_count_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="WORKERS"):
        LocalStack(gpus=0).choose(fastapi_workers=bad)


def test_the_local_target_restarts_the_service_for_another_count(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, int | None]] = []

    def fake_start(kind: str, *, workers: int | None = None, **_: Any) -> Any:
        started.append((kind, workers))
        process = SimpleNamespace(argv=["serve", kind, str(workers)])
        return SimpleNamespace(name=f"fastapi_{kind}", workers=workers, url=f"http://127.0.0.1:{len(started)}",
                               process=process, stop=lambda: None)

    monkeypatch.setattr(local_services, "start_fastapi", fake_start)
    stack = LocalStack(gpus=0)
    stack.up("fastapi", services=["fastapi_server"], fastapi_app="fastapi_pt", fastapi_workers=1)
    stack.up("fastapi", services=["fastapi_server"], fastapi_app="fastapi_pt", fastapi_workers=1)
    stack.up("fastapi", services=["fastapi_server"], fastapi_app="fastapi_pt", fastapi_workers=2)
    stack.up("fastapi", services=["fastapi_server"], fastapi_app="fastapi_onnx")  # keeps 2
    assert started == [("pt", 1), ("pt", 2), ("onnx", 2)]

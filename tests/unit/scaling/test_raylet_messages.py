"""Ray's raylet messages (a killed worker) stay out of notebook 10's cells: the pinned ray's error
listener prints through ``ray._private.worker.print_to_stdstream``, which ``keep_raylet_messages``
replaces; the raylet's lines are kept, every other line still printed."""

from __future__ import annotations

import inspect

import pytest

ray_worker = pytest.importorskip("ray._private.worker")


def test_the_error_listener_prints_through_the_module_function() -> None:
    assert "print_to_stdstream(" in inspect.getsource(ray_worker.listen_error_messages)


def test_raylet_lines_are_kept_and_the_rest_printed(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from servelab.scaling import cluster

    printed: list[dict] = []
    monkeypatch.setattr(ray_worker, "print_to_stdstream", lambda data, ignore_prefix: printed.append(data))
    monkeypatch.setattr(cluster, "RAYLET_MESSAGES", [])
    cluster.keep_raylet_messages()
    cluster.keep_raylet_messages()  # a second start keeps one wrapper
    killed = ("\x1b[33mA worker died or was killed while executing a task by an unexpected system error. "
              "To troubleshoot the problem, check the logs for the dead worker.\x1b[0m")
    ray_worker.print_to_stdstream({"lines": [killed], "pid": "raylet", "is_err": False}, ignore_prefix=False)
    ray_worker.print_to_stdstream({"lines": ["hello"], "pid": 123, "is_err": False}, ignore_prefix=False)
    assert [d["lines"] for d in printed] == [["hello"]]
    said = "A worker died or was killed while executing a task by an unexpected system error."
    assert cluster.raylet_said() == said
    assert cluster.raylet_said(since=1) == ""

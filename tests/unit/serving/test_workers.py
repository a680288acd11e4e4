"""Worker processes (``WORKERS``): each takes its share of the cores, the launcher's one-line refusals,
and the shared metrics folder's bookkeeping of dead workers."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from servelab.serving import serve, settings
from servelab.serving.metrics import forget_dead_workers
from servelab.serving.settings import Settings, SettingsError


@pytest.mark.parametrize(("cores", "workers", "gpu", "expected"), [
    (2, 1, False, (2, 2, 1)),  # today's single process: every core
    (2, 2, False, (1, 1, 1)),  # two processes on two cores: one core's share each
    (16, 4, False, (4, 4, 2)),
    (2, 3, False, (1, 1, 1)),  # more processes than cores: at least one of each
    (16, 1, True, (1, 16, 16)),  # GPU: one inference worker, the share decodes
    (16, 8, True, (1, 2, 2)),
])
def test_each_process_takes_its_share_of_the_cores(monkeypatch: pytest.MonkeyPatch, cores: int, workers: int,
                                                   gpu: bool, expected: tuple[int, int, int]) -> None:
    monkeypatch.setattr(settings, "cpu_cores", lambda: cores)
    got = Settings.from_env(Path("m.onnx"), 1, env={"WORKERS": str(workers)}, gpu=gpu)
    assert (got.infer_workers, got.infer_threads, got.preprocess_workers) == expected
    assert got.processes == workers


def test_workers_must_be_a_whole_number() -> None:
    with pytest.raises(SettingsError, match="WORKERS"):
        Settings.from_env(Path("m.onnx"), 1, env={"WORKERS": "lots"})
    assert Settings.from_env(Path("m.onnx"), 1, env={"WORKERS": ""}).processes == 1  # compose's ${WORKERS:-}


def test_a_taken_port_is_refused_in_one_line_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve.main(["fastapi_onnx.app:app", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"127.0.0.1:{port} is already taken by another program" in err, err
    assert err.startswith("fastapi_onnx cannot start:") and "--port" in err


def test_a_host_not_of_this_machine_and_bad_workers_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.main(["fastapi_onnx.app:app", "--host", "192.0.2.1", "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "listen on 127.0.0.1 (this machine only)" in err and "--host" in err, err
    assert serve.main(["fastapi_onnx.app:app", "--workers", "0"]) == 1
    assert "--workers 0 must be at least 1" in capsys.readouterr().err


def test_the_url_is_said_for_every_interface() -> None:
    assert serve.url_of("0.0.0.0", 8000) == "http://127.0.0.1:8000 (listening on every interface, 0.0.0.0)"
    assert serve.url_of("127.0.0.1", 8001) == "http://127.0.0.1:8001"


def test_several_workers_get_a_fresh_metrics_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # set first, so that monkeypatch restores the variable's absence after the test: shared_metrics_folder
    # sets it itself, and a later test's app in this process would read a removed folder
    monkeypatch.setenv(settings.MULTIPROC_VARIABLE, "")
    monkeypatch.delenv(settings.MULTIPROC_VARIABLE)
    assert serve.shared_metrics_folder(1) is None and settings.MULTIPROC_VARIABLE not in os.environ
    folder = serve.shared_metrics_folder(2)
    assert folder is not None and folder.is_dir() and os.environ[settings.MULTIPROC_VARIABLE] == str(folder)
    folder.rmdir()
    given = tmp_path / "mine"
    given.mkdir()
    (given / "counter_1.db").write_bytes(b"old")
    (given / "keep.txt").write_text("not a sample")
    monkeypatch.setenv(settings.MULTIPROC_VARIABLE, str(given))
    assert serve.shared_metrics_folder(2) is None  # the user's folder: emptied of samples, kept
    assert [p.name for p in given.iterdir()] == ["keep.txt"]


def test_a_dead_worker_leaves_its_counts_but_not_its_gauges(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])  # a worker that has exited
    dead.wait()
    for pid in (dead.pid, os.getpid()):
        (tmp_path / f"gauge_livesum_{pid}.db").write_bytes(b"")
        (tmp_path / f"counter_{pid}.db").write_bytes(b"")
    assert forget_dead_workers(tmp_path) == [dead.pid]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"counter_{dead.pid}.db", f"counter_{os.getpid()}.db", f"gauge_livesum_{os.getpid()}.db"])

"""The server handle: fails fast with the log, stops without leaving anything behind."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from servelab.triton.repository import deploy_model
from servelab.triton.server import TritonServer


def test_stop_leaves_no_process_and_no_shared_memory(tmp_path: Path) -> None:
    deploy_model("food_classifier_onnx", tmp_path / "repo", gpu=False, quiet=True)
    server = TritonServer(tmp_path / "repo", log_path=tmp_path / "triton.log")
    with server:
        server.load("food_classifier_onnx")
        root = psutil.Process(server.pid)
        family = [root, *root.children(recursive=True)]
        assert any("triton_python_backend_stub" in " ".join(p.cmdline()) for p in family[1:])
        assert list(Path("/dev/shm").glob(f"{server.shm_prefix}*")), "expected the backend's shm region"
    assert not server.running
    alive = [p.pid for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"left behind: {alive}"
    assert not list(Path("/dev/shm").glob(f"{server.shm_prefix}*"))
    server.stop()  # idempotent


def test_a_dying_server_fails_fast_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    server = TritonServer(tmp_path / "repo", log_path=tmp_path / "triton.log",
                          server_flags=["--no-such-flag=1"])
    with pytest.raises(RuntimeError, match="tritonserver exited"):
        server.start(timeout=60)
    assert not server.running


def test_missing_repository_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        TritonServer(tmp_path / "nowhere").start()


def test_addresses(triton) -> None:
    assert triton.url == f"127.0.0.1:{triton.http_port}"
    assert triton.grpc_url.startswith("127.0.0.1:") and triton.metrics_url.endswith("/metrics")
    assert triton.client().is_server_live()
    import urllib.request

    with urllib.request.urlopen(triton.metrics_url, timeout=5) as reply:
        assert b"nv_inference_count" in reply.read()


def test_interpreter_exit_stops_the_server(tmp_path: Path) -> None:
    """A script that forgets stop(): nothing is left once its interpreter exits."""
    import subprocess
    import sys
    import textwrap

    (tmp_path / "repo").mkdir()
    script = textwrap.dedent(f"""
        from pathlib import Path
        from servelab.triton.server import TritonServer
        server = TritonServer(Path({str(tmp_path / 'repo')!r}), log_path=Path({str(tmp_path / 't.log')!r}))
        server.start()
        print(server.pid, server.shm_prefix, flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True)
    pid, prefix = out.stdout.split()
    assert not psutil.pid_exists(int(pid)) or psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE
    assert not list(Path("/dev/shm").glob(f"{prefix}*"))

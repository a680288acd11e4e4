"""The servers as a new user starts them, side by side: the README's commands for FastAPI, the LLM engine
and GourmetGram, on their default ports at once, each saying the URL it serves on; and each, when
another program holds its default port, stopping at once with one line that names the flag to change.

These use the real default ports (8000, 8010, 5000): a test finding one already held by another program on
the machine says so and is skipped rather than measuring that program."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from servelab.core.paths import REPO_ROOT
from servelab.core.procs import ManagedProcess, bind_port
from servelab.llm import engine, model
from servelab.llm.server import engine_env
from tests.readme_commands import engine_command, fastapi_command, gourmetgram_command, runnable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ENGINE_PORT = engine.DEFAULT_PORT
FLASK_PORT = 5000
FASTAPI_PORT = 8000
REFUSAL_S = 30  # the refusal comes before the model loads: seconds, not the model's load


@pytest.fixture
def defaults_free() -> None:
    """The default ports are free on 127.0.0.1 (checked, not kept), else the test is skipped."""
    for port in (ENGINE_PORT, FLASK_PORT, FASTAPI_PORT):
        probe = bind_port("127.0.0.1", port)
        if probe is None:
            pytest.skip(f"127.0.0.1:{port} is held by another program on this machine: the default-port "
                        "test cannot run beside it")
        probe.close()


@pytest.fixture(scope="module")
def built_model() -> None:
    if not model.is_built():
        model.build(quiet=True)


def readme_engine() -> list[str]:
    return runnable(engine_command())


def test_fastapi_the_engine_and_gourmetgram_run_side_by_side_on_their_defaults(
        built_model: None, defaults_free: None, tmp_path: Path) -> None:
    env, argv = gourmetgram_command()
    started = [ManagedProcess("llm engine (README)", readme_engine(), tmp_path / "engine.log",
                              env=engine_env(), cwd=REPO_ROOT),
               ManagedProcess("GourmetGram (README)", runnable(argv), tmp_path / "gourmetgram.log",
                              env={**env, "INSTANCE_PATH": str(tmp_path / "instance")}, cwd=REPO_ROOT),
               ManagedProcess("FastAPI (README)", runnable(fastapi_command()), tmp_path / "fastapi.log",
                              cwd=REPO_ROOT)]
    try:
        engine_url, flask_url = f"http://127.0.0.1:{ENGINE_PORT}", f"http://127.0.0.1:{FLASK_PORT}"
        started[1].wait_http(f"{flask_url}/health", 60)
        started[0].wait_http(f"{engine_url}/health", 180)
        fastapi_url = f"http://127.0.0.1:{FASTAPI_PORT}"
        started[2].wait_http(f"{fastapi_url}/health", 120)
        said = {p.name: p.log_path.read_text() for p in started}
        assert f"LLM engine (continuous batching) serving artifacts/llm on {engine_url} " in \
            said["llm engine (README)"], said["llm engine (README)"][-2000:]
        assert f"GourmetGram serving on {flask_url} (backend fastapi at http://127.0.0.1:8000; " \
               "uploads kept in " in said["GourmetGram (README)"], said["GourmetGram (README)"][-2000:]
        assert f"fastapi_onnx: serving on {fastapi_url} with 1 worker process" in said["FastAPI (README)"], \
            said["FastAPI (README)"][-2000:]
        assert all(p.exit_problem() is None for p in started)
    finally:
        for process in started:
            process.stop()


@pytest.mark.parametrize(("who", "port", "flag"), [("engine", ENGINE_PORT, "--port"),
                                                    ("GourmetGram", FLASK_PORT, "--bind 127.0.0.1:"),
                                                    ("FastAPI", FASTAPI_PORT, "--port")])
def test_a_default_port_another_program_holds_is_refused_in_one_line(
        who: str, port: int, flag: str, tmp_path: Path) -> None:
    """A plain socket holds the port (another program would); the server stops at once, its whole output
    one line (GourmetGram: after gunicorn's own start line) naming the flag and a port free now."""
    holder = bind_port("127.0.0.1", port)
    if holder is None:
        pytest.skip(f"127.0.0.1:{port} is held by another program on this machine already")
    holder.listen()
    try:
        if who == "engine":
            argv, env = readme_engine(), engine_env()
        elif who == "FastAPI":
            argv, env = runnable(fastapi_command()), {}
        else:
            env, argv = gourmetgram_command()
            argv = runnable(argv)
            env = {**env, "INSTANCE_PATH": str(tmp_path / "instance")}
        began = time.monotonic()
        done = subprocess.run(argv, cwd=REPO_ROOT, env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=REFUSAL_S * 4, check=False)
        took = time.monotonic() - began
    finally:
        holder.close()
    lines = [line for line in (done.stdout + done.stderr).splitlines()
             if line.strip() and not line.startswith("[")]  # gunicorn's own "[…] [INFO] Starting gunicorn"
    assert done.returncode != 0 and len(lines) == 1, done.stdout + done.stderr
    assert f"127.0.0.1:{port} is already taken by another program" in lines[0]
    assert f" {flag}{port + 1}" in lines[0] if flag.endswith(":") else f" {flag} {port + 1}" in lines[0]
    assert "Traceback" not in done.stderr
    assert took < REFUSAL_S, f"refused after {took:.0f} s: the port is checked before the model loads"

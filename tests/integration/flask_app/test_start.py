"""GourmetGram started as its READMEs say: both give the same command, and a setting it cannot use stops
gunicorn before any worker starts, with one line naming the variable (no traceback, no respawning)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from servelab.core.paths import REPO_ROOT
from servelab.core.procs import free_port
from tests.readme_commands import gourmetgram_command, runnable


def test_both_readmes_give_the_same_command() -> None:
    main = gourmetgram_command()
    assert main == gourmetgram_command(REPO_ROOT / "flask_app" / "README.md")
    env, argv = main
    assert argv[0] == ".venv/bin/gunicorn", "runs without an activated venv"
    assert argv[1:3] == ["-c", "flask_app/gunicorn_conf.py"] and "--threads" in argv
    assert env["PREDICT_BACKEND"] == "fastapi"


@pytest.mark.parametrize(("env", "line"), [
    ({"UPLOADS_MAX_MB": "1G"}, "GourmetGram: UPLOADS_MAX_MB='1G' is not a number"),
    ({"UPLOADS_MAX_FILES": "0"}, "GourmetGram: UPLOADS_MAX_FILES must be at least 1, got 0"),
    ({"FASTAPI_SERVER_URL": "127.0.0.1:8000"}, "GourmetGram: FASTAPI_SERVER_URL='127.0.0.1:8000' is not a "
                                               "server address; give one like http://127.0.0.1:8000"),
    ({"INSTANCE_PATH": "{file}"}, "GourmetGram: cannot write its upload folder"),
])
def test_a_bad_setting_stops_gunicorn_in_one_line(env: dict[str, str], line: str, tmp_path: Path) -> None:
    readme_env, argv = gourmetgram_command()
    argv = runnable(argv)
    argv[argv.index("--bind") + 1] = f"127.0.0.1:{free_port()}"
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("")
    env = {key: value.format(file=a_file) for key, value in env.items()}
    env = {**os.environ, "INSTANCE_PATH": str(tmp_path / "instance"), **readme_env, **env}
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    said = (done.stdout + done.stderr).splitlines()
    ours = [out for out in said if out.strip() and not out.startswith("[")]  # not gunicorn's own "[…] [INFO]"
    assert done.returncode != 0 and len(ours) == 1 and ours[0].startswith(line), done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Booting worker" not in done.stderr

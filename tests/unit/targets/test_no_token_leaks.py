"""The node's Jupyter token never leaves the node: ``./lab run --target chameleon`` with the recording
python-chi and SSH shell, the node's output being what the real ``scripts/docker_host.sh`` prints (run
here with a recording ``docker``), finds the token nowhere: not in the controller's output, not in
``controller.log``, not in any file of the run's folder, and not in the handout site built from it."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from servelab.site import build
from tests.unit.targets.test_docker_host import host, run_lab  # noqa: F401  (the fixture)
from tests.unit.targets.test_node_run import RecordingShell, chameleon

pytestmark = pytest.mark.slow  # the real script twice, then a Sphinx build of one page (seconds)


class NodeLog(RecordingShell):
    """The node as the real script makes it: the detached ``./lab run --target docker`` prints what
    ``scripts/docker_host.sh run`` printed here."""

    def __init__(self, log: str) -> None:
        super().__init__()
        self.log = log.encode()

    def capture(self, command: str, timeout: float) -> tuple[int, str]:
        if "base64" in command:
            self.calls.append(("poll", command.split("tail -c +", 1)[1].split(" ", 1)[0]))
            offset = int(self.calls[-1][1]) - 1
            return 0, "0\n" + base64.b64encode(self.log[offset:]).decode() + "\n"
        return super().capture(command, timeout)


def files_holding(folder: Path, secret: str) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and secret.encode() in p.read_bytes())


def test_the_headless_chameleon_run_never_shows_the_jupyter_token(host, tmp_path: Path,  # noqa: F811
                                                                  fake_chi, student, capsys) -> None:
    # what the node prints, from the real script: `./lab jupyter` (02's set-up), then the headless run
    started = run_lab(host, "jupyter")
    assert started.returncode == 0, started.stderr
    token = (host["checkout"] / ".jupyter-token").read_text().strip()
    ran = run_lab(host, "run", "--target", "docker", "--preset", "quick")
    assert ran.returncode == 0, ran.stderr
    fake_chi.server.outputs["./lab jupyter"] = started.stdout + started.stderr
    fake_chi.server.outputs["node_setup.sh"] = "[node-setup] done\n"
    capsys.readouterr()

    run_dir, outcome, report, _ = chameleon(tmp_path, fake_chi, NodeLog(ran.stdout + ran.stderr))
    printed = capsys.readouterr()
    assert outcome.ok, outcome.error
    assert report is not None and (run_dir / "controller.log").is_file()
    assert token not in printed.out + printed.err, "the token in the controller's output"
    assert token not in (run_dir / "controller.log").read_text()
    source = tmp_path / "src" / "03_fastapi.py"
    source.parent.mkdir()
    source.write_text("# %% [markdown]\n# # 3. FastAPI\n\n# %%\nprint('hello')\n")
    site = build.build(run_dir, out=tmp_path / "site", sources=[source])
    assert (site / "index.html").is_file()
    assert files_holding(run_dir, token) == [] and files_holding(site, token) == []

"""Which code a run ran (issue 45): run.json records the checkout's commit and whether it had uncommitted
changes, taken as the run starts; a copy without git says it cannot tell, and why; the report and the site's
banner show it in one line (``servelab.results.code.describe_code``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from servelab.lab import runner
from servelab.results import code
from servelab.results.code import code_facts, describe_code


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    lab = tmp_path / "lab"
    lab.mkdir()
    _git(lab, "init", "-q")
    (lab / ".gitignore").write_text("results/\n")
    (lab / "a.py").write_text("x = 1\n")
    _git(lab, "add", ".")
    _git(lab, "commit", "-qm", "first")
    return lab


def test_a_clean_checkout_records_its_commit(checkout: Path) -> None:
    (checkout / "results").mkdir()
    (checkout / "results" / "rows.jsonl").write_text("{}\n")  # the run's own output: ignored
    facts = code_facts(checkout)
    assert facts["commit"] == _git(checkout, "rev-parse", "HEAD") and facts["dirty"] is False
    assert describe_code(facts) == f"commit {facts['commit'][:7]}, no uncommitted changes"


def test_changed_and_new_files_make_it_dirty_and_are_named(checkout: Path) -> None:
    (checkout / "a.py").write_text("x = 2\n")
    (checkout / "b.py").write_text("y = 1\n")
    facts = code_facts(checkout)
    assert facts["dirty"] is True and facts["changed_count"] == 2
    assert set(facts["changed"]) == {"a.py", "b.py"}
    assert describe_code(facts).endswith("with uncommitted changes (2 files)")


def test_a_copy_without_git_cannot_tell_and_says_why(tmp_path: Path, checkout: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    upload = tmp_path / "upload"  # the node's copy: the files, no history
    upload.mkdir()
    facts = code_facts(upload)
    assert facts["commit"] is None and facts["dirty"] is None and "not a git checkout" in facts["why"]
    inside = checkout / "vendored"  # a copy inside some other repository: that one's commit is not its own
    inside.mkdir()
    assert code_facts(inside)["commit"] is None
    monkeypatch.setattr(code.shutil, "which", lambda name: None)
    assert code_facts(checkout) == {"commit": None, "dirty": None, "why": "git is not installed where it ran"}
    assert describe_code({"commit": None, "why": "git is not installed where it ran"}) == (
        "commit unknown: git is not installed where it ran")
    assert describe_code(None) == "not recorded"  # a run from before the record


def test_the_runner_records_the_code_as_the_run_starts(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """run.json holds the checkout's facts from before the first notebook: an edit during the run is not what
    ran; the report shows them."""
    starts = [{"commit": "e83ba46" + "0" * 33, "dirty": True, "changed": ["x.py"], "changed_count": 1},
              {"commit": "later", "dirty": False}]
    monkeypatch.setattr(runner, "code_facts", lambda: starts.pop(0))
    monkeypatch.setattr(runner, "ensure_kernel", lambda: "k")
    monkeypatch.setattr(runner, "run_notebook", lambda path, run_dir, *a, **k: runner.NotebookOutcome(
        path.stem, run_dir / path.name, 0.1, True))
    outcome = runner.run(only=["03"], results_base=tmp_path)
    recorded = json.loads((outcome.run_dir / "run.json").read_text())["code"]
    assert recorded["commit"].startswith("e83ba46") and recorded["dirty"] is True
    assert outcome.report is not None
    assert "commit e83ba46 with uncommitted changes (1 file)" in outcome.report.read_text()

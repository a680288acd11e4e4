"""The lease plan (issue 50) is computed from run folders by a command: given a run at the node's preset, the
core on the node fits the 2 h 50 min lease with at least 20 minutes to spare, set-up included; a run too slow
does not, and one at another preset cannot tell. The committed runs it reads by default, and the tables it
writes into the README and the instructor's guide, are the ones it computes now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core import lab_steps
from servelab.core.paths import REPO_ROOT
from servelab.lab import lease_plan
from servelab.site.guides import block

SOURCES = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def a_run(tmp_path: Path, name: str, preset: str, seconds: dict[str, float]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    notebooks = [{"name": p.stem, "seconds": seconds.get(p.stem[:2], 5.0), "ok": True, "error": ""}
                 for p in SOURCES if p.stem[:2] in seconds]
    (folder / "run.json").write_text(json.dumps({"preset": preset, "target": "local", "cpu_count": 2,
                                                 "notebooks": notebooks}))
    return folder


def core_seconds(each: float) -> dict[str, float]:
    return {n: each for n in lab_steps.numbers("node", core=True)} | {"08": 10.0}


def test_the_plan_says_where_each_notebook_runs_from_the_registry() -> None:
    found = {n.number: n.where for n in lease_plan.notebooks([], SOURCES)}
    assert [k for k, v in found.items() if v.startswith("node")] == lab_steps.numbers("node")
    assert [k for k, v in found.items() if v == "node (core)"] == lab_steps.numbers("node", core=True)
    assert [k for k, v in found.items() if v.startswith("lease end")] == [
        s.number for s in lab_steps.LAB_STEPS if s.last]


def test_a_run_at_the_nodes_preset_fits_the_core_in_one_lease(tmp_path: Path, capsys) -> None:
    run = a_run(tmp_path, "node-run", lease_plan.NODE_PRESET, core_seconds(240.0))
    assert lease_plan.main([str(run), "--check"]) == 0
    text = capsys.readouterr().out
    [line] = [x for x in text.splitlines() if x.startswith("**One lease**")]
    one, _ = lease_plan.sessions(lease_plan.notebooks([run]))
    assert one.fits and one.spare >= lease_plan.SPARE_MINUTES
    assert f"{lease_plan.LEASE_MINUTES} min" in line and f"set-up {lease_plan.SETUP_MINUTES} min" in line
    assert "**fits**" in line and f"{one.spare:.0f} min to spare" in line
    assert one.minutes == pytest.approx(lease_plan.SETUP_MINUTES + sum(n.in_lease for n in one.steps)
                                        + 10 / 60 + lease_plan.FETCH_MINUTES)
    assert "| 03_fastapi | node (core) | 4 | node-run (full) |  |" in text
    assert "**Two sessions**" in text and text.count("- **") == 2


def test_a_run_too_slow_does_not_fit_and_the_check_says_so(tmp_path: Path, capsys) -> None:
    run = a_run(tmp_path, "slow-run", lease_plan.NODE_PRESET, core_seconds(1200.0))
    assert lease_plan.main([str(run), "--check"]) == 1
    assert "**does NOT fit**" in capsys.readouterr().out


def test_a_run_at_another_preset_cannot_tell_for_the_node(tmp_path: Path, capsys) -> None:
    run = a_run(tmp_path, "quick-run", "quick", core_seconds(30.0))
    assert lease_plan.main([str(run), "--check"]) == 1
    text = capsys.readouterr().out
    assert "cannot be told at the node's preset (full)" in text and "**Not at the node's preset**" in text


def test_the_nodes_preset_run_is_read_first_whatever_the_order(tmp_path: Path) -> None:
    quick = a_run(tmp_path, "quick", "quick", {**core_seconds(30.0), "09": 60.0})
    full = a_run(tmp_path, "full", lease_plan.NODE_PRESET, core_seconds(240.0))
    found = {n.number: (n.run, n.seconds, n.quick_seconds) for n in lease_plan.notebooks([quick, full])}
    assert found["03"] == ("full", 240.0, 30.0) and found["09"] == ("quick", 60.0, 60.0)


def test_a_folder_without_a_run_is_one_line(tmp_path: Path, capsys) -> None:
    assert lease_plan.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "has no run.json" in err and len(err.splitlines()) == 1


def test_a_run_that_did_not_reach_a_core_notebook_cannot_tell(tmp_path: Path, capsys) -> None:
    seconds = core_seconds(240.0)
    del seconds["05"]
    run = a_run(tmp_path, "cut-run", lease_plan.NODE_PRESET, seconds)
    assert lease_plan.main([str(run), "--check"]) == 1
    assert "cannot be told: no run given ran 05 to its end" in capsys.readouterr().out


def test_the_guides_show_what_the_committed_runs_compute() -> None:
    """What the README and the instructor's guide carry is the plan of the committed runs, as computed now
    (``python -m servelab.lab.lease_plan --write README.md docs/guides/instructor.md`` after a change)."""
    runs = lease_plan.committed_runs()
    assert runs, "no run committed under docs/guides/timings/"
    guide = (REPO_ROOT / "docs" / "guides" / "instructor.md").read_text()
    assert block(guide, "lease-plan").strip() == lease_plan.plan_markdown(runs).strip()
    readme = (REPO_ROOT / "README.md").read_text()
    assert block(readme, "notebooks").strip() == lease_plan.notebooks_markdown(runs).strip()

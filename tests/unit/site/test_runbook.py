"""The class-day runbook is drawn from the code's own messages (issue 50): every error the lab raises with a
message of its own, grouped by where it comes from, with what to do as the message says it; the committed
page is what the code says now."""

from __future__ import annotations

from pathlib import Path

from servelab.core.paths import REPO_ROOT
from servelab.site import runbook
from servelab.site.guides import block


def test_the_committed_runbook_is_what_the_code_says_now() -> None:
    committed = block(runbook.RUNBOOK.read_text(), "runbook").strip()
    assert committed == runbook.runbook_markdown().strip(), (
        "an error message changed since docs/guides/runbook.md was written: "
        "run python -m servelab.site.runbook")


def test_it_finds_the_labs_own_errors_and_not_the_builtins(tmp_path: Path) -> None:
    (tmp_path / "provisioning").mkdir()
    (tmp_path / "servelab" / "lab").mkdir(parents=True)
    (tmp_path / "provisioning" / "errors.py").write_text(
        "class ProvisioningError(RuntimeError):\n    pass\n\n\n"
        "class LeaseError(ProvisioningError):\n    pass\n")
    (tmp_path / "servelab" / "lab" / "step.py").write_text(
        "def reserve(name):\n"
        "    raise LeaseError(f'lease {name} is in ERROR: delete it and run this step again')\n\n\n"
        "def internal():\n    raise ValueError('not for the runbook')\n")
    [found] = runbook.messages(tmp_path)
    assert (found.path, found.function, found.kind) == ("servelab/lab/step.py", "reserve", "LeaseError")
    assert found.cause_and_fix == ("lease … is in ERROR", "delete it and run this step again")
    text = runbook.runbook_markdown(tmp_path)
    row = "| lease … is in ERROR | delete it and run this step again | `servelab/lab/step.py` reserve |"
    assert row in text
    (tmp_path / "provisioning" / "messages.py").write_text(
        'M = object\nGONE = M("lease {name} is gone: "\n    "run 01 again", "the lease ended")\n')
    [first, _] = runbook.messages(tmp_path)
    assert (first.text, first.when, first.cause_and_fix) == (
        "lease … is gone: run 01 again", "the lease ended", ("lease … is gone", "run 01 again"))
    assert "| lease … is gone | run 01 again | the lease ended |" in runbook.runbook_markdown(tmp_path)


def test_the_class_day_errors_are_in_it() -> None:
    text = runbook.RUNBOOK.read_text()
    for said in ("could not create lease", "is not one of yours", "appears on two lines"):
        assert said in text, said
    from provisioning import messages

    assert len([m for m in runbook.messages() if m.when]) == len(messages.catalog())
    assert all(m.path.startswith(("provisioning/", "servelab/")) for m in runbook.messages(REPO_ROOT))

"""The test tree mirrors the source tree and names tests by subject: each folder under tests/unit and
tests/integration is a package of the source, no test file is named after an issue, and each lab step
with rules has its one rules test file (tests/unit/lab/test_stepNN_rules.py)."""

from __future__ import annotations

import re

from servelab.core.lab_steps import LAB_STEPS
from servelab.core.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"
# what a test folder may mirror besides servelab's packages: the provisioning package, the web app, the docs
OTHER_SOURCES = {"provisioning": "provisioning", "flask_app": "flask_app", "docs": "docs"}


def test_each_test_folder_mirrors_a_package_of_the_source() -> None:
    strays = []
    for tier in ("unit", "integration"):
        for folder in sorted(p for p in (TESTS / tier).iterdir() if p.is_dir() and p.name != "__pycache__"):
            source = REPO_ROOT / OTHER_SOURCES.get(folder.name, f"servelab/{folder.name}")
            if not source.is_dir():
                strays.append(f"tests/{tier}/{folder.name}")
    assert strays == [], f"no source package of that name: {strays}"


def test_no_test_file_is_named_after_an_issue() -> None:
    named = [str(p.relative_to(REPO_ROOT)) for p in TESTS.rglob("test_*.py")
             if re.search(r"issue_?\d", p.name)]
    assert named == [], "name a test file by its subject (what it tests), not the issue that asked for it"


def test_each_lab_step_with_rules_has_its_rules_test_file() -> None:
    missing = [f"tests/unit/lab/test_step{s.number}_rules.py" for s in LAB_STEPS if s.report
               and not (TESTS / "unit" / "lab" / f"test_step{s.number}_rules.py").is_file()]
    assert missing == [], missing

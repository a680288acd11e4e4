"""The README is a front door (issue 50): at most 120 lines, no paragraph over 8, and on its first screen what
the lab teaches (every notebook, with its minutes), the hardware and the lease, and the three ways in; the
rest is in the guides it links, each of which exists."""

from __future__ import annotations

import re
from pathlib import Path

from servelab.core.paths import REPO_ROOT
from servelab.site.guides import guide_paths

README = REPO_ROOT / "README.md"
MAX_LINES = 120
MAX_PARAGRAPH = 8
FIRST_SCREEN = 60  # lines: what a reader sees before scrolling far


def paragraphs(markdown: str) -> list[list[str]]:
    """The prose paragraphs and list items of ``markdown``: fenced code, tables, headings and HTML comments
    left out; a list item with its continuation lines is one."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", markdown, flags=re.M | re.S)
    found: list[list[str]] = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines or all(line.lstrip().startswith(("|", "<!--", "#")) for line in lines):
            continue
        current: list[str] = []
        for line in lines:
            if re.match(r"\s*([-*]|\d+\.)\s", line) and current:
                found.append(current)
                current = []
            current.append(line)
        found.append(current)
    return found


def test_the_readme_is_short_and_its_paragraphs_too() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES, len(text.splitlines())
    long = [p[0][:60] for p in paragraphs(text) if len(p) > MAX_PARAGRAPH]
    assert long == [], long


def test_the_paragraph_rule_counts_what_it_should() -> None:
    prose = "\n".join(["word"] * 9)
    assert [len(p) for p in paragraphs(prose)] == [9]
    mixed = "- a\n  b\n- c\n\n| x |\n| y |\n\n```bash\n" + prose + "\n```\n"
    assert [len(p) for p in paragraphs(mixed)] == [2, 1]


def test_the_first_screen_says_what_where_and_how_in() -> None:
    text = README.read_text()
    first = "\n".join(text.splitlines()[:FIRST_SCREEN])
    for stem in (p.stem for p in sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))):
        row = re.search(rf"^\| {stem[:2]} \| [^|]+ \| [^|]+ \| (\d+) \|$", first, re.M)
        assert row, f"notebook {stem} has no line with its minutes on the README's first screen"
    for fact in ("gpu_p100", "2 h 50 min", "A student on Chameleon", "A student on any Docker host",
                 "An instructor, or CI, headless", "instructor's version"):
        assert fact in first, fact


def test_every_guide_is_linked_and_every_link_resolves() -> None:
    text = README.read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert [t for t in local if not (REPO_ROOT / t).exists()] == []
    for guide in guide_paths():
        assert f"docs/guides/{guide.name}" in local, f"the README does not link {guide.name}"
    for named in re.findall(r"`([A-Z]+(?:\.md)?)`", text):  # LICENSE, NOTICE.md
        assert (REPO_ROOT / named).is_file(), named


def test_no_guide_needs_a_decision_note_to_be_followed() -> None:
    """A guide names a note only as the reason why: never as the only place a step is said."""
    for guide in guide_paths():
        for line in Path(guide).read_text().splitlines():
            assert not re.search(r"(see|read|follow) `?docs/decisions/", line, re.I), (guide.name, line)

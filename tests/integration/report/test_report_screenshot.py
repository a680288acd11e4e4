"""The report in a real headless Chromium on a 1,280 × 800 screen: the verdict is on the first screen,
nothing makes the page wider than the screen, Triton and FastAPI tables are short and fit, and the
utilisation chart is drawn at its own size (never shrunk, names level).

The report is drawn from a trimmed real quick run (``quick-run/``) with what a full run adds: more
dynamic-batching rates (some forty measurements in the utilisation chart), a perf_analyzer warning
and a recovered measurement. Chromium is driven as in ``tests/integration/flask_app/test_browser.py``:
Debian's chromium through Playwright for Python, nothing downloaded. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.lab import run_report
from servelab.report.figures import MAX_COLUMNS

FIXTURE = Path(__file__).parent / "quick-run"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
SCREEN = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("report") / "quick-run"
    shutil.copytree(FIXTURE, run)
    rows = [json.loads(line) for line in (run / "triton.jsonl").read_text().splitlines()]
    for row in [r for r in rows if r["step"] == "dynamic_batching"]:  # the full preset's further rates
        for factor in (0.5, 0.75, 1.25, 1.5):
            rate = round(row["load_value"] * factor, 1)
            rows.append({**row, "load_value": rate, "label": f"{row['label'].rsplit(' ', 1)[0]} {rate}/s"})
    rows[0]["warnings"] = "perf_analyzer: Failed to obtain stable measurement within 3 windows"
    rows[1]["retried"] = "perf_analyzer produced no measurement (exit 0)"
    (run / "triton.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_report.write_report(run)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.is_file(), f"{CHROMIUM} is missing: the lab's set-up installs Debian's chromium package"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def page(report: Path, browser, artifact_dir: Path) -> Iterator[object]:
    page = browser.new_page(viewport=SCREEN)
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    try:
        yield page
    finally:
        page.screenshot(path=str(artifact_dir / "report_1280_first_screen.png"))
        page.screenshot(path=str(artifact_dir / "report_1280_full.png"), full_page=True)
        page.close()


def test_the_verdict_is_the_first_screen(page) -> None:
    assert page.evaluate("document.querySelector('section h2').textContent") == "Verdict"
    # at a glance (issue 52): each notebook's one line and the run's count fit the first screen; the
    # table of counts per notebook starts on it
    for shown in ("ul.headlines", "p:has-text('expected effects observed in this run')"):
        box = page.locator(shown).first.bounding_box()
        assert box is not None and box["y"] + box["height"] <= SCREEN["height"], f"{shown} ends at {box}"
    table = page.locator("table.verdict").bounding_box()
    assert table is not None and table["y"] < SCREEN["height"], f"the verdict table starts at {table}"
    lines = page.locator("ul.headlines li").all_inner_texts()
    assert lines and all(line.split(": ", 1)[1].startswith(("observed", "NOT observed", "too noisy to call",
                                                            "cannot show here")) for line in lines), lines
    rows = page.locator("table.verdict tr").all_inner_texts()
    from servelab.lab.run_report import NOTEBOOKS

    notebooks = [n["name"] for n in json.loads((FIXTURE / "run.json").read_text())["notebooks"]]
    unrun = [n.name for n in NOTEBOOKS if n.name not in notebooks]  # the lab's newer ones: "not run"
    assert [r.split("\t")[0] for r in rows[1:]] == [*notebooks, *unrun, "the whole run"]
    assert all(next(r for r in rows if r.startswith(name)).split("\t")[1] == "not run" for name in unrun)
    assert rows[0].split("\t") == ["notebook", "ran", "seconds", "observed", "not observed",
                                   "too noisy to call", "cannot show here", "warnings and recoveries"]
    four = next(r for r in rows if r.startswith("04_triton_python")).split("\t")
    assert four[1] == "ok" and "with a perf_analyzer warning" in four[-1] and "recovered" in four[-1]
    assert page.locator("p", has_text="expected effects observed in this run").first.is_visible()


def test_nothing_makes_the_page_wider_than_the_screen(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= SCREEN["width"]
    wide = page.evaluate("""(limit) => Array.from(document.querySelectorAll('body *'))
        .filter((e) => !e.closest('div.table') && e.getBoundingClientRect().right > limit)
        .map((e) => e.tagName + ' in ' + (e.closest('section')?.querySelector('h2')?.textContent || ''))""",
                         SCREEN["width"])
    assert wide == [], f"elements beyond {SCREEN['width']} px: {wide}"


def test_a_phone_reads_it_at_its_own_width(report: Path, browser, artifact_dir: Path) -> None:
    """At a phone's 390 px (a mobile browser, which honours the viewport tag): nothing makes the page
    wider than the screen; tables scroll in their own box."""
    phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = phone.new_page()
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=str(artifact_dir / "report_390_first_screen.png"))
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        wide = page.evaluate("""(limit) => Array.from(document.querySelectorAll('body *'))
            .filter((e) => !e.closest('div.table, table.data') && e.getBoundingClientRect().right > limit)
            .map((e) => e.tagName + ' ' + e.textContent.slice(0, 40))""", PHONE["width"])
        assert wide == [], f"beyond {PHONE['width']} px outside a scrolling table: {wide}"
    finally:
        phone.close()


def test_triton_and_fastapi_tables_are_short_and_fit(page) -> None:
    tables = page.evaluate("""() => Array.from(document.querySelectorAll('div.table'))
        .filter((d) => d.querySelector('th')?.textContent === 'measurement')
        .map((d) => ({section: d.closest('section').querySelector('h2').textContent,
                      columns: d.querySelectorAll('tr:first-child th').length,
                      overflow: d.scrollWidth - d.clientWidth}))""")
    sections = {t["section"] for t in tables}
    assert {"FastAPI: PyTorch vs ONNX Runtime", "Instance scaling (Python backend)",
            "Dynamic batching across arrival rates"} <= sections, sections
    assert all(t["columns"] <= MAX_COLUMNS for t in tables), tables
    assert all(t["overflow"] <= 0 for t in tables), [t for t in tables if t["overflow"] > 0]


def test_the_utilisation_chart_is_never_shrunk(page) -> None:
    image = page.locator("section", has_text="CPU / GPU utilisation during each run").locator("img")
    natural, shown = image.evaluate("(img) => [img.naturalWidth, img.getBoundingClientRect().width]")
    assert shown >= natural, f"drawn {natural} px wide, shown at {shown} px: its labels shrink"
    height = image.evaluate("(img) => img.naturalHeight")
    assert height >= 40 * 20, f"{height} px for some forty measurements"

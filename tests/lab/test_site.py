"""The handout site built from the session's real quick run (``conftest.run_dir``), with that same run beside
it as a second run (so every compared block is laid out), opened in headless Chromium at 1,280 px and as a
390 px mobile browser: every notebook page present and in order, every image loads, no internal link is
broken, code cells and their outputs are both visible, nothing makes a page or the copied reports wider than
the screen (tables and code scroll in their own box, and a table that does says so), every printed output line
wraps inside its box (a phone included), every piece of code has a copy button that covers no text, printed
code wraps instead of being cut off, and the run's provenance is on every page, the decision notes' pages too.

Chromium is Debian's, driven by Playwright as in tests/integration/report/test_report_screenshot.py;
screenshots of one notebook's page at both widths go to test-artifacts/.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from servelab.site import build
from servelab.site.provenance import read
from tests.unit.site.phone import COVERED_BY_COPY, OVERFLOWING_OUTPUTS

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
WIDTHS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
REPORTS = ("report", "compare/report")  # the copied reports: read on the same screens
SHOWN = "03_fastapi"  # the page whose screenshots are kept

pytestmark = pytest.mark.slow

# every <img> made to load now, then the ones that did not
BROKEN_IMAGES = """async () => {
  const images = [...document.images];
  images.forEach(i => { i.loading = 'eager'; });
  await Promise.all(images.map(i => i.decode().catch(() => null)));
  return images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
}"""
WHOLE = "e => e.parentElement.scrollWidth <= e.parentElement.clientWidth"
# a table wider than its box, without the line above it that says it scrolls (servelab.js)
UNHINTED_TABLES = """() => [...document.querySelectorAll(
    'div.cell_output table, .servelab-compare table, div.table, table.data, div.table-wrapper')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1
               && !(e.previousElementSibling && e.previousElementSibling.matches('.servelab-scroll-hint')))
  .map(e => e.textContent.slice(0, 60))"""
# printed: a piece of code cut off at the paper's edge
CUT_WHEN_PRINTED = """() => [...document.querySelectorAll('article pre')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent.slice(0, 60))"""
# text that reaches past the screen's right edge, outside the boxes that may scroll on their own (code,
# outputs, tables); the page's own content area scrolling sideways would hide such text, so it counts.
# The article's text and the banner: the side drawers sit off the screen on a phone until opened
OVERFLOWING_TEXT = """() => {
  const width = document.documentElement.clientWidth;
  const boxes = '.cell_output, .highlight, pre, table, .table-wrapper';
  const text = ['p', 'li', 'h1', 'h2', 'h3', 'dt', 'dd'].map(tag => 'article ' + tag).join(', ');
  return [...document.querySelectorAll(text + ', .announcement-content')]
    .filter(e => e.offsetParent !== null && !e.closest(boxes)
                 && (e.getBoundingClientRect().right > width + 1 || e.scrollWidth > e.clientWidth + 1))
    .map(e => e.tagName + ': ' + e.textContent.slice(0, 60));
}"""


@pytest.fixture(scope="module")
def site(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build.build(run_dir, out=tmp_path_factory.mktemp("site") / "site", compare=run_dir)


@pytest.fixture(scope="module")
def stems() -> list[str]:
    return [p.stem for p in build.lab_sources()]


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


def test_every_notebook_has_its_page_in_order(site: Path, stems: list[str], browser) -> None:
    page = browser.new_page(viewport=WIDTHS["desktop"])
    page.goto((site / "index.html").as_uri())
    links = page.eval_on_selector_all(".sidebar-tree a.reference.internal", "as => as.map(a => a.href)")
    names = [Path(urlsplit(link).path).name for link in links]
    # the notebooks first, in the lab's order, then the guides (docs/guides/: not numbered)
    assert names[:len(stems)] == [f"{stem}.html" for stem in stems], names
    assert not [name for name in names[len(stems):] if name[:2].isdigit()], names
    # the pages chain in the same order: each page's "next" link is the following notebook
    for stem, following in itertools.pairwise(stems):
        page.goto((site / f"{stem}.html").as_uri())
        nxt = page.eval_on_selector("a.next-page", "a => a.href")
        assert Path(urlsplit(nxt).path).name == f"{following}.html"
    page.close()


def _internal_links_broken(page, site: Path) -> list[str]:
    broken = []
    for href in page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)"):
        parts = urlsplit(href)
        if parts.scheme != "file":
            continue
        target = Path(unquote(parts.path))
        missing = not target.is_file() or not target.is_relative_to(site)
        if missing or (parts.fragment and target.suffix == ".html"
                       and f'id="{unquote(parts.fragment)}"' not in target.read_text()):
            broken.append(href)
    return broken


@pytest.mark.parametrize("width", list(WIDTHS))
def test_every_page_reads_on_the_screen(site: Path, stems: list[str], run_dir: Path, browser, width: str,
                                        artifact_dir: Path) -> None:
    provenance = read(run_dir).line()
    ran = {n["name"]: n for n in json.loads((run_dir / "run.json").read_text())["notebooks"]}
    phone = width == "phone"  # a mobile browser: it honours (or misses) a page's viewport tag
    context = browser.new_context(viewport=WIDTHS[width], is_mobile=phone, has_touch=phone)
    page = context.new_page()
    problems: dict[str, object] = {}
    notes = sorted(str(p.relative_to(site).with_suffix("")) for p in (site / "docs").rglob("*.html"))
    assert notes, "the decision notes the pages name are pages of the site"
    for name in ["index", *stems, *REPORTS, *notes]:
        page.goto((site / f"{name}.html").as_uri())
        page.wait_for_load_state("load")
        found: dict[str, object] = {
            "broken images": page.evaluate(BROKEN_IMAGES),
            "broken links": _internal_links_broken(page, site),
            "page wider than the screen": page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth") > 0,
            "layout wider than the screen": page.evaluate("document.documentElement.clientWidth")
                                            > WIDTHS[width]["width"],
            "tables that scroll without saying so": page.evaluate(UNHINTED_TABLES),
        }
        ok = True
        if name not in REPORTS:
            banner = page.locator(".announcement-content")
            # the banner is read whole: it wraps, it never scrolls or clips
            found["provenance"] = (banner.is_visible() and provenance in banner.inner_text()
                                   and "Your node: 2×P100" in banner.inner_text() and banner.evaluate(WHOLE))
            found["text past the edge"] = page.evaluate(OVERFLOWING_TEXT)
            found["output lines past their box"] = page.evaluate(OVERFLOWING_OUTPUTS)
            found["copy buttons over text"] = page.evaluate(COVERED_BY_COPY)
            ok = bool(found["provenance"])
        if name in stems:  # each notebook's page: its download and where to launch it
            download = page.eval_on_selector_all("a.servelab-download", "as => as.map(a => a.href)")
            found["download and launch"] = (len(download) == 1 and Path(unquote(urlsplit(download[0]).path))
                                            .is_file() and page.locator("a.servelab-launch").count() == 1)
            ok = ok and found["download and launch"]
        if name in ran:  # the run executed it: its code and its outputs are on the page
            found["code visible"] = page.locator("div.cell_input").first.is_visible()
            outputs = page.locator("div.cell_output")
            found["outputs"] = outputs.count()
            outputs.first.scroll_into_view_if_needed()
            found["output visible"] = outputs.first.is_visible()
            found["code without a copy button"] = page.locator("div.cell_input").count() - page.locator(
                "div.cell_input button.servelab-copy").count()
            ok = ok and found["code visible"] and found["outputs"] > 0 and found["output visible"] \
                and found["code without a copy button"] == 0
        listed = ("broken images", "broken links", "text past the edge", "page wider than the screen",
                  "tables that scroll without saying so", "layout wider than the screen",
                  "output lines past their box", "copy buttons over text")
        bad = {k: v for k, v in found.items() if k in listed and v}
        if bad or not ok:
            problems[name] = found
        if name == SHOWN:
            page.evaluate("window.scrollTo(0, 0)")  # the first screen, banner included
            page.screenshot(path=str(artifact_dir / f"site_{SHOWN}_{WIDTHS[width]['width']}.png"))
            page.screenshot(path=str(artifact_dir / f"site_{SHOWN}_{WIDTHS[width]['width']}_full.png"),
                            full_page=True)
            page.emulate_media(media="print")
            if cut := page.evaluate(CUT_WHEN_PRINTED):
                problems[f"{name} printed"] = cut
            page.emulate_media(media="screen")
    context.close()
    assert problems == {}, problems


def test_the_report_and_the_runs_data_are_on_the_site(site: Path, run_dir: Path) -> None:
    copied = (site / "report.html").read_text()
    assert '<p class="servelab-back"><a href="index.html">' in copied
    assert "Verdict" in copied and copied.count("<section") == (run_dir / "report.html").read_text().count(
        "<section")
    index = (site / "index.html").read_text()
    for name in ("run.json", "fastapi.jsonl"):
        assert (site / "data" / name).is_file() and f'href="data/{name}"' in index
    assert not list(site.rglob("*.py")), "the site carries no sources of its own"


def test_the_run_records_where_and_when_it_ran(run_dir: Path) -> None:
    """run.json's ``started`` and ``machine`` (the runner writes them): the provenance needs no fallback."""
    facts = read(run_dir)
    assert "not recorded" not in facts.line() and "(from the run's name)" not in facts.date
    assert facts.date.endswith(" UTC") and facts.target == "local" and facts.preset == "quick"

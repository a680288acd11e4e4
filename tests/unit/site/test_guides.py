"""The guides as pages of the handout site (issue 50): every guide a page of the sidebar, its generated blocks
filled from the run the site is built from, its links out resolved; the architecture diagram drawn from its
source and naming every port the compose files publish, shown on the site's index and in the README, and
rendered in Chromium at 1,280 px and as a 390 px phone: loaded, inside the screen, its text legible."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

from servelab.core.paths import REPO_ROOT
from servelab.site import build, diagram, guides
from servelab.site.links import Links
from tests.unit.site.phone import PHONE

pytestmark = pytest.mark.slow  # one Sphinx build with the guides (seconds), Chromium

WIDTHS = {"desktop": {"viewport": {"width": 1280, "height": 900}}, "phone": PHONE}
# the diagram as shown: loaded, inside the screen, and its text no smaller than this once scaled to fit
MIN_TEXT_PX = 7.0
SHOWN = """async (src) => {
  const img = [...document.images].find(i => i.getAttribute('src').endsWith(src));
  if (!img) { return null; }
  img.loading = 'eager';
  await img.decode().catch(() => null);
  const box = img.getBoundingClientRect();
  return {loaded: img.complete && img.naturalWidth > 0, natural: img.naturalWidth, width: box.width,
          left: box.left, right: box.right, screen: document.documentElement.clientWidth};
}"""


def test_the_drawing_is_drawn_from_its_source_as_it_is_now() -> None:
    assert diagram.recorded_digest() == diagram.source_digest(), (
        "docs/guides/architecture.dot changed since architecture.svg was drawn: run "
        "python -m servelab.site.diagram (it needs Graphviz: apt-get install graphviz)")


def test_the_diagram_names_every_port_the_stacks_publish() -> None:
    source = diagram.SOURCE.read_text()
    published = set()
    for compose in sorted((REPO_ROOT / "docker").glob("docker-compose-*.yaml")):
        for service in (yaml.safe_load(compose.read_text()).get("services") or {}).values():
            for port in service.get("ports") or []:
                mapping = re.sub(r"\$\{\w+:-(\d+)\}", r"\1", str(port))  # ${FLASK_PORT:-80}:5000
                published.add(mapping.split(":")[0])
        if "network_mode: host" in compose.read_text() and "8888" in compose.read_text():
            published.add("8888")  # the Jupyter server listens on the node's own port
    assert published >= {"8000", "8888"}
    assert [port for port in sorted(published) if f":{port}" not in source] == []


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("guides")
    source = base / "03_demo.py"
    source.write_text('# %% [markdown]\n# # 3. A demo\n#\n# Prose.\n\n# %%\nprint("hello")\n')
    run = base / "20261201-090000-full"
    run.mkdir()
    notebooks = [{"name": p.stem, "ok": True, "seconds": 300.0}
                 for p in sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))]
    facts = {"preset": "full", "target": "local", "cpu_count": 2, "notebooks": notebooks}
    (run / "run.json").write_text(json.dumps(facts))
    return build.build(run, out=base / "site", sources=[source],
                       links=Links(repo="https://git.example.org/lab", ref="abc123"))


def test_every_guide_is_a_page_of_the_sidebar(site: Path) -> None:
    index = BeautifulSoup((site / "index.html").read_text(), "html.parser")
    sidebar = [a.get_text().replace("’", "'") for a in index.select(".sidebar-tree a.reference.internal")]
    titles = [guides.title(p) for p in guides.guide_paths()]
    assert sidebar == ["3. A demo", *titles]
    for path in guides.guide_paths():
        assert (site / "docs" / "guides" / f"{path.stem}.html").is_file(), path.name


def test_a_guides_generated_blocks_are_the_runs(site: Path) -> None:
    page = BeautifulSoup((site / "docs" / "guides" / "instructor.html").read_text(), "html.parser")
    text = page.get_text(" ")
    assert "20261201-090000-full" in text and "| notebook |" not in text  # a table, rendered
    runbook = BeautifulSoup((site / "docs" / "guides" / "runbook.html").read_text(), "html.parser")
    assert len(runbook.select("article table tr")) > 50


def test_a_link_out_of_the_guides_goes_to_the_repository(site: Path) -> None:
    page = BeautifulSoup((site / "docs" / "guides" / "docker-host.html").read_text(), "html.parser")
    hrefs = [a["href"] for a in page.select("article a[href]")]
    assert "https://git.example.org/lab/blob/abc123/docker/README.md" in hrefs
    assert not [h for h in hrefs if h.startswith("../../")]


@pytest.fixture(scope="module")
def readme_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README as a Markdown renderer shows it (markdown-it, CommonMark with tables, as GitHub's is),
    with images at most the page's width as GitHub's style sheet has them."""
    from markdown_it import MarkdownIt

    base = tmp_path_factory.mktemp("readme")
    (base / "docs" / "guides").mkdir(parents=True)
    shutil.copy2(diagram.DRAWING, base / "docs" / "guides" / diagram.DRAWING.name)
    body = MarkdownIt("commonmark").enable("table").render((REPO_ROOT / "README.md").read_text())
    page = base / "README.html"
    page.write_text('<!doctype html><meta name="viewport" content="width=device-width, initial-scale=1">'
                    "<style>body{max-width:980px;margin:0 auto;padding:16px;font-family:sans-serif}"
                    f"img{{max-width:100%;box-sizing:content-box}}</style><article>{body}</article>")
    return page


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    chromium = Path("/usr/bin/chromium")
    assert chromium.is_file(), f"{chromium} is missing: the lab's set-up installs Debian's chromium package"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("where", ["site index", "README"])
def test_the_diagram_renders_on_the_index_and_in_the_readme(site: Path, readme_page: Path, browser,
                                                            where: str, width: str) -> None:
    page_file = site / "index.html" if where == "site index" else readme_page
    context = browser.new_context(**WIDTHS[width])
    try:
        page = context.new_page()
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        shown = page.evaluate(SHOWN, diagram.DRAWING.name)
        Path("test-artifacts").mkdir(exist_ok=True)
        page.screenshot(path=f"test-artifacts/diagram-{where.replace(' ', '-')}-{width}.png", full_page=False)
    finally:
        context.close()
    assert shown is not None, f"the {where} shows no {diagram.DRAWING.name}"
    assert shown["loaded"], shown
    assert shown["left"] >= 0 and shown["right"] <= shown["screen"] + 1, shown  # inside the screen
    svg = diagram.DRAWING.read_text()
    smallest = min(float(size) for size in re.findall(r'font-size="([\d.]+)"', svg))
    units = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) ', svg).group(1))  # the drawing's own units
    assert smallest * shown["width"] / units >= MIN_TEXT_PX, (shown, smallest, units)  # legible once fitted

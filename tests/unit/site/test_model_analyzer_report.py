"""Notebook 11 links Model Analyzer's summary report from the run's folder; the handout site carries it at
the same path beside the page (redacted like the run's other files), so the page's link works there too."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from servelab.core.paths import REPO_ROOT
from servelab.site import build
from servelab.site.links import Links

pytestmark = pytest.mark.slow  # one Sphinx build of one page (seconds)

SUMMARY = "model-analyzer/search-1/export/reports/summaries/food_classifier_onnx/result_summary.html"


def test_the_page_links_model_analyzers_summary_and_the_site_carries_it(tmp_path: Path) -> None:
    from bs4 import BeautifulSoup

    from servelab.lab.step11_model_analyzer import Link

    source = tmp_path / "nb" / "11_demo.py"
    source.parent.mkdir()
    source.write_text("# %% [markdown]\n# # 11. Model Analyzer\n\n# %%\nstep.summary(planned)\n")
    run = tmp_path / "20261128-090000-quick"
    run.mkdir()
    link = Link("Model Analyzer's summary report", SUMMARY)
    cell = nbformat.v4.new_code_cell("step.summary(planned)", execution_count=1, outputs=[
        nbformat.v4.new_output("execute_result", data={"text/html": link._repr_html_(),
                                                       "text/plain": repr(link)}, execution_count=1)])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), run / "11_demo.ipynb")
    (run / "run.json").write_text(json.dumps({"preset": "quick", "target": "local", "ok": True,
                                              "notebooks": [{"name": "11_demo", "ok": True, "seconds": 1}]}))
    (run / SUMMARY).parent.mkdir(parents=True)
    (run / SUMMARY).write_text(f"<html><body>In 4 measurements across 4 configurations … model config "
                               f"{REPO_ROOT}/results/x/config.pbtxt</body></html>")
    site = build.build(run, out=tmp_path / "site", sources=[source], links=Links(repo="", ref="abc"))
    page = BeautifulSoup((site / "11_demo.html").read_text(), "html.parser")
    hrefs = [a.get("href") for a in page.select("div.cell_output a")]
    assert SUMMARY in hrefs, hrefs
    copied = (site / SUMMARY).read_text()
    assert "In 4 measurements across 4 configurations" in copied and str(REPO_ROOT) not in copied

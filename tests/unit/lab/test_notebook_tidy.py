"""The headless run's tidiness check (tests/lab/notebook_noise.py ``untidy``) catches what issue 41 found
in executed notebooks, and passes what a notebook rightly shows."""

from __future__ import annotations

import nbformat

from tests.lab.notebook_noise import untidy


def notebook(*outputs: dict) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[nbformat.from_dict(o)]) for o in outputs]
    return nb


def stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def result(plain: str, html: str | None = None) -> dict:
    data = {"text/plain": plain} | ({"text/html": html} if html else {})
    return {"output_type": "execute_result", "execution_count": 1, "data": data, "metadata": {}}


def test_what_issue_41_saw_is_caught() -> None:
    found = untidy(notebook(
        result("max_ms p95_ms\n491.96   None", "<table><tr><td>491.96</td><td>None</td></tr></table>"),
        result("kind  shed\nshed_p99_ms    NaN"),
        stream("The lab's code: /work/main\n"),
        result("Engine(command=['/root/lab/.venv/bin/python', '-m', 'servelab.llm.server'])"),
        stream("--out /tmp/tmp01i3p866/run.json\n"),
        stream("no GPU reference measurement of this step yet\n"),
        stream("no GPU reference measurement of this step yet\n")))
    assert any("p95_ms" in f or "None in" in f for f in found)
    assert any("table cell reads None" in f for f in found)
    assert any("NaN" in f for f in found)
    assert sum("absolute path" in f for f in found) == 3
    assert any("2 times" in f for f in found)


def test_what_a_notebook_rightly_shows_passes() -> None:
    assert untidy(notebook(
        stream("# servelab/lab/params.py, lines 1-3: resolve\ndef resolve(target=None):\n    return None\n"),
        stream("$ curl -s http://127.0.0.1:8000/v2/models/food_classifier/stats\n"),
        stream("plot saved: $SERVELAB_RESULTS/plots/a.png\n--backend-directory=~/.cache/servelab/x\n"),
        stream('{"image": "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAUDBAQE…"}\n'),
        result("p95 (ms)\n        ", "<table><tr><td></td></tr></table>"),
        stream("None of the requests failed.\n"),
        result("instance_counts  not set  preset quick  instances per step (None: scaled to the cores)"),
        stream("no GPU reference measurement of this step yet\n"))) == []


def test_a_listing_the_kernel_sent_in_two_outputs_is_still_a_listing() -> None:
    """CI at 065d7fb: show_code's header and body arrived as two stdout outputs of one cell."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[nbformat.from_dict(o) for o in (
        stream("# servelab/scaling/config.py, lines 208-229: utilisation_policy\n"),
        stream('    since = (state.get("since") if state.get("wanted") == wanted else None) or now\n'))])]
    assert untidy(nb) == []
    nb.cells[0].outputs.insert(1, nbformat.from_dict(result("shown between")))
    assert untidy(nb) != []  # an output between them: the second is not part of the listing

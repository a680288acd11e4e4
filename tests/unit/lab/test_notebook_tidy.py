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


def test_the_verdict_checks_catch_what_issue_52_saw() -> None:
    """The headless run's checks of issue 52 (tests/lab/notebook_noise.py): the same reason printed under
    two cells' verdicts, a verdict line of 400 characters, a table 14 columns wide; and they pass one line
    per verdict with its details folded under it, a reason said again by its first words."""
    from tests.lab.notebook_noise import long_verdicts, repeated_legends, verdict_lines, wide_tables

    cores = ("  needs: a core free for the second replica, the machine's CPU under 90 % while it started — "
             "NOT met: the replicas share fewer cores than they need")
    head = "".join(f"<th>c{i}</th>" for i in range(14))
    noisy = notebook(stream(f"cannot show here: A — {'x' * 400}\n{cores}\n"),
                     stream(f"observed: B — 1 ms\n{cores}\n"),
                     result("wide", f"<table><tr>{head}</tr></table>"))
    assert len(repeated_legends(noisy)) == 1 and len(long_verdicts(noisy)) == 1
    assert wide_tables(noisy) == ["cell 2: a table 14 columns wide"]
    display = {"output_type": "display_data", "metadata": {},
               "data": {"text/plain": f"NOT observed: C — 2 ms, 3 ms\n{cores}",
                        "text/html": "<div class='verdicts'><details>…</details></div>"}}
    tidy = notebook(display, stream("observed: D — 1 ms\n  needs: a core free for the second replica — met "
                                    "(as above)\n"),
                    result("nine", f"<table><tr>{''.join(f'<th>{i}</th>' for i in range(9))}</tr></table>"))
    assert repeated_legends(tidy) == [] and long_verdicts(tidy) == [] and wide_tables(tidy) == []
    assert verdict_lines(tidy) == ["NOT observed: C — 2 ms, 3 ms", "observed: D — 1 ms"]

"""The headless runner's order (``servelab.lab.runner``): the teardown last."""

from __future__ import annotations

from pathlib import Path


def test_the_headless_run_executes_the_teardown_last() -> None:
    """08 summarises everything measured, so it runs after 09 and 10 (issue 36, finding 10)."""

    from servelab.lab.runner import run_order

    stems = ["00_intro", "03_fastapi", "08_teardown", "09_llm_serving", "10_scaling_out"]
    assert [p.stem for p in run_order([Path(f"{s}.ipynb") for s in stems])] == [
        "00_intro", "03_fastapi", "09_llm_serving", "10_scaling_out", "08_teardown"]

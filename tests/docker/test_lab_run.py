"""The lab end to end on a CPU-only Docker host: `./lab run --target docker` runs the node's notebooks
inside the Jupyter container (quick preset; 11's Model Analyzer starting the lab's Triton image through the
engine's socket) and writes their report; nothing it writes is root's."""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest

from servelab.core.lab_steps import numbers
from servelab.core.paths import REPO_ROOT
from servelab.triton import model_analyzer as ma
from servelab.triton import model_analyzer_docker as mad
from tests.docker.conftest import ARTIFACTS, lab
from tests.docker.engine import Engine
from tests.docker.test_stacks import not_owned

NOTEBOOKS = tuple(numbers("node"))  # the registry's steps that run on the node, every one


@pytest.mark.timeout(2700)  # the node's notebooks at the quick preset, each under the runner's own limits
def test_the_lab_runs_in_the_jupyter_container(engine: Engine, images: dict[str, float]) -> None:
    results = REPO_ROOT / "test-artifacts" / "docker-results"  # inside the checkout: all the container sees
    shutil.rmtree(results, ignore_errors=True)
    lab("run", "--target", "docker", "--preset", "quick", "--only", *NOTEBOOKS, log=ARTIFACTS / "lab-run.log",
        timeout=2600, env={"SERVELAB_RESULTS": str(results)})
    runs = sorted(p for p in results.iterdir() if (p / "report.html").is_file())
    assert runs, f"no report under {results}"
    run = runs[-1]
    record = json.loads((run / "run.json").read_text())
    print(json.dumps(record, indent=1)[:3000])
    executed = sorted(p.name[:2] for p in run.glob("[0-9][0-9]_*.ipynb"))
    assert executed == list(NOTEBOOKS), executed
    assert "CPU" in (run / "report.html").read_text(), "the report does not say the run was on the CPU"
    # notebook 10: Ray Serve in the Jupyter container, Triton's queue policy on the Triton stack
    scaling = [json.loads(line) for line in (run / "scaling.jsonl").read_text().splitlines()]
    kinds = {row["kind"] for row in scaling}
    assert kinds == {"capacity", "step", "kill", "shedding", "triton_queue"}, kinds
    assert all(row.get("mismatched", 0) == 0 for row in scaling)
    assert [row["rejected"] > 0 for row in scaling if row["kind"] == "triton_queue"] == [False, True]
    notebook = nbformat.read(run / "10_scaling_out.ipynb", as_version=4)
    stderr = [o.text[:120] for c in notebook.cells if c.cell_type == "code" for o in c.outputs
              if o.get("name") == "stderr"]
    assert not stderr, f"notebook 10 printed on stderr in the container: {stderr[:3]}"
    # notebook 11: Model Analyzer in a container of its own (the Jupyter image here, NVIDIA's SDK image on
    # a GPU host: the same docker run) started the lab's Triton image and measured it
    searched = [json.loads(line) for line in (run / "model_analyzer.jsonl").read_text().splitlines()]
    assert searched and all(r["throughput"] > 0 for r in searched), searched[:3]
    config = (run / "model-analyzer" / "search-1" / "config.yaml").read_text()
    assert "triton_launch_mode: docker" in config and f"triton_docker_image: {ma.TRITON_IMAGE}" in config
    cells = nbformat.read(run / "11_model_analyzer.ipynb", as_version=4).cells
    shown = "".join(o.get("text", "") for c in cells if c.cell_type == "code" for o in c.outputs)
    assert "$ docker run --rm --init --pull never --no-healthcheck --name servelab-model-analyzer-" in shown
    assert f"{mad.JUPYTER_IMAGE} /opt/model-analyzer/bin/model-analyzer profile -f " in shown
    left = engine.docker("ps", "-aq", "--filter", f"label={mad.LABEL}").stdout.split()
    assert not left, f"Model Analyzer's containers were left: {left}"
    assert not_owned(REPO_ROOT) == [], "the run left files in the checkout not owned by its owner"

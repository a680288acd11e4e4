"""The student release, the answer key, the hand-in and the class table, on the lab's own notebooks."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import jupytext
import nbformat
import pytest

from servelab.lab import classwork, exercise, handin
from servelab.lab import step07_dynamic_batching as step07
from servelab.results.store import RESULTS_VARIABLE

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "lab"
    classwork.make_release(out)
    return out


def test_the_release_keeps_no_solution_and_no_model_answer(release: Path) -> None:
    sources = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    released = sorted(p.name for p in (release / "notebooks").glob("[0-9][0-9]_*.py"))
    assert released == [p.name for p in sources]
    for source in sources:
        student = (release / "notebooks" / source.name).read_text()
        assert "SOLUTION" not in student and "answer-key" not in student
        assert "model_answer(" not in student
        nb = nbformat.read(release / "notebooks" / f"{source.stem}.ipynb", as_version=4)
        assert not [c for c in nb.cells if c.cell_type == "code" and c.outputs]
        instructor = source.read_text()
        regions = instructor.count("BEGIN SOLUTION")
        assert student.count(classwork.CODE_STUB) + student.count(classwork.TEXT_STUB) >= regions
    assert (release / classwork.RELEASE_NOTE).is_file()
    assert (release / "servelab" / "lab" / "exercise.py").is_file()
    assert not (release / "tests").exists() and not (release / ".github").exists()
    readme = (release / "README.md").read_text()
    assert readme.startswith("> **This is the student release**") and "instructor's version**" not in readme
    assert classwork.STUDENT_LINE in readme  # the README's own paragraph says it too
    # 12's answer stays with the instructor; the members the student maps are there to read
    assert not (release / "models_staging" / "food_classifier_ensemble" / "config.pbtxt").exists()
    assert (release / "models_staging" / "food_preprocess" / "config.pbtxt").is_file()
    listed = (release / "provisioning" / "lab-files.txt").read_text().splitlines()
    assert classwork.RELEASE_NOTE in listed and all((release / name).is_file() for name in listed)
    assert not [name for name in listed if name.startswith("tests/")]


def test_the_release_of_07_asks_for_the_block_and_the_load_the_instructor_wrote(release: Path) -> None:
    student = jupytext.read(release / "notebooks" / "07_dynamic_batching.py")
    code = [c.source for c in student.cells if c.cell_type == "code"]
    edit = next(c for c in code if 'edit_config(triton, "food_classifier_onnx"' in c)
    assert "dynamic_batching" not in edit and classwork.CODE_STUB in edit
    command = next(c for c in code if "-f poisson.csv" in c)
    assert "--request-rate-range" not in command and "--request-distribution" not in command
    instructor = (ROOT / "notebooks" / "07_dynamic_batching.py").read_text()
    assert "preferred_batch_size: [ 4, 6, 8 ]" in instructor
    assert "--request-distribution poisson" in instructor


def _executed(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = 1
    return nb


def test_a_hand_in_packs_the_work_and_the_class_table_counts_it(tmp_path: Path, monkeypatch) -> None:
    students = tmp_path / "handins"
    for who, answered in (("ana", True), ("bo", False)):
        results = tmp_path / who / "results"
        results.mkdir(parents=True)
        monkeypatch.setenv(RESULTS_VARIABLE, str(results))
        nb = jupytext.read(ROOT / "notebooks" / "07_dynamic_batching.py")
        nb = classwork.student_version(nb)
        if answered:
            cell = next(c for c in nb.cells if "answer" in c.metadata.get("tags", []))
            cell.source = cell.source.replace(classwork.TEXT_STUB, "Bursts queue behind the busy instance.")
            exercise.predict(step07, "Poisson arrivals queue more", "yes")
            exercise.check(step07, "your config.pbtxt has a dynamic_batching block", True, "write one")
        with pytest.raises(exercise.CheckFailed, match="write the block"):
            exercise.check(step07, "your run formed executions of more than one request", False,
                           "write the block")
        nbformat.write(_executed(nb), results / "07_dynamic_batching.ipynb")
        (results / "report.html").write_text("<html></html>")
        packed = handin.pack(results, student=who, out=students / f"handin-{who}.zip")
        with zipfile.ZipFile(packed) as zf:
            names = set(zf.namelist())
            assert {"manifest.json", "answers.json", "notebooks/07_dynamic_batching.ipynb", "exercise.jsonl",
                    "report.html"} <= names
            assert json.loads(zf.read("manifest.json"))["executed"] == ["07_dynamic_batching.ipynb"]
    table = classwork.class_table(students)
    assert list(table["student"]) == ["ana", "bo"]
    ana, bo = table.iloc[0], table.iloc[1]
    assert (ana["notebooks run"], ana["checks passed"], ana["predictions made"]) == (1, "1 of 2", 1)
    assert ana["questions answered"] == "1 of 3" and bo["questions answered"] == "0 of 3"
    assert (bo["checks passed"], bo["predictions made"]) == ("0 of 1", 0)
    assert classwork.main(["class-table", str(students), "--csv", str(tmp_path / "class.csv")]) == 0
    assert (tmp_path / "class.csv").read_text().startswith("student,notebooks run,checks passed")


def test_a_failed_check_is_one_line_saying_what_to_do(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(RESULTS_VARIABLE, str(tmp_path))
    with pytest.raises(exercise.CheckFailed) as failed:
        exercise.check(step07, "your command sent poisson arrivals", False,
                       "add --request-distribution poisson")
    assert failed.value._render_traceback_() == [
        "✗ check “your command sent poisson arrivals”: add --request-distribution poisson"]
    with pytest.raises(exercise.StudentError, match='guess must be "yes" or "no"'):
        exercise.predict(step07, "Poisson arrivals queue more", "maybe")


def test_the_answer_key_renders_the_model_answers_of_a_run(tmp_path: Path) -> None:
    nb = jupytext.read(ROOT / "notebooks" / "07_dynamic_batching.py")
    for cell in nb.cells:
        if classwork.KEY_TAG in cell.metadata.get("tags", []):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                   text="Model answer to question 1: p99 12.5 ms\n")]
    nbformat.write(nb, tmp_path / "07_dynamic_batching.ipynb")
    page = classwork.write_key(tmp_path, tmp_path / "key.html").read_text()
    assert "Answer key (instructor only)" in page and "Model answer to question 1: p99 12.5 ms" in page
    assert "exercise.model_answer" not in page, "the key shows the answers, not their code"


def test_the_service_knobs_are_read_where_a_user_writes_them(capsys) -> None:
    from servelab.lab.step03_fastapi import workers_in
    from servelab.lab.step09_views import batching_in

    assert workers_in("\n# a comment\nWORKERS=4\n") == 4
    assert workers_in("\n# YOUR CODE HERE\n") == 1 and "no WORKERS line" in capsys.readouterr().out
    with pytest.raises(exercise.StudentError, match="WORKERS=four is not a number"):
        workers_in("WORKERS=four")
    assert batching_in("\n--batching static  # the flag\n") == "static"
    assert batching_in("\n# YOUR CODE HERE\n") == "continuous"
    with pytest.raises(exercise.StudentError, match="--batching statik is not a mode of the engine"):
        batching_in("--batching statik")


def test_the_autoscaling_config_is_read_as_a_serve_config_writes_it(capsys) -> None:
    from servelab.lab import params
    from servelab.lab import step10_scaling_out as step10

    p = params.resolve("local", "quick", scaling_max_replicas=None)
    auto = step10.policy_from("autoscaling_config:\n  min_replicas: 1\n  max_replicas: 3\n"
                              "  upscale_delay_s: 2\n", p)
    assert (auto.fixed, auto.max_replicas, auto.upscale_delay_s) == (None, 3, 2)
    assert step10.policy_from("\n# YOUR CODE HERE\n", p).fixed == 1
    assert "Serve runs one fixed replica" in capsys.readouterr().out
    with pytest.raises(exercise.StudentError, match="did you mean `max_replicas`"):
        step10.policy_from("max_replica: 2", p)
    with pytest.raises(exercise.StudentError, match="must be greater than or equal to min_replicas"):
        step10.policy_from("min_replicas: 3\nmax_replicas: 2", p)


def test_a_handout_page_holds_no_model_answer() -> None:
    from servelab.site.pages import source_notebook

    page = source_notebook(ROOT / "notebooks" / "07_dynamic_batching.py")
    assert not [c for c in page.cells if classwork.KEY_TAG in c.metadata.get("tags", [])]
    assert [c for c in page.cells if classwork.ANSWER_TAG in c.metadata.get("tags", [])], "answer cells stay"

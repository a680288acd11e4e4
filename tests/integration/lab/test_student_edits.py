"""What the student writes, against a real local Triton through the exercise path of 04-07: the
config.pbtxt text (a typo refused with its line, the model serving its last good config) and the
perf_analyzer command (what ran is what was typed: its range is the data's)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.lab import exercise, triton_edits, triton_steps
from servelab.results.schema import RunData
from servelab.results.store import RESULTS_VARIABLE
from servelab.targets.local import LocalStack
from servelab.triton.config import config_text, live_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
MODEL = "food_classifier_onnx"
GOOD = """
instance_group [
  {
    count: 2
    kind: KIND_CPU
  }
]
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[triton_steps.Triton]:
    root = tmp_path_factory.mktemp("student")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(RESULTS_VARIABLE, str(root / "results"))
        stack = LocalStack(root=root, log_dir=root / "logs", models=(MODEL,), gpus=0)
        try:
            yield triton_steps.triton_up(stack, [MODEL])
        finally:
            stack.down()


def _serving(triton: triton_steps.Triton) -> str:
    """The config the server runs now, and proof that it answers."""
    assert triton_steps.triton_try(triton, MODEL)["probability"].iloc[0] > 0
    return config_text(live_config(triton.client(), MODEL))


@pytest.mark.parametrize(("typo", "line", "said"), [
    ("dynamic_batching {\n  preferred_batch_size: [ 4, 6, 8 ]\n  max_queue_delay_microseconds: 100\n",
     3, "a block opened with `{` is not closed: add its `}`"),  # the missing brace
    ("dynamic_batching {\n  preferred_batch_size: [ 4, 6, 8 ]\n  max_queue_delay_microsecs: 100\n}\n",
     3, "`max_queue_delay_microsecs` is not a field of ModelDynamicBatching: did you mean "
        "`max_queue_delay_microseconds`?"),  # the unknown field
])
def test_a_typo_is_refused_naming_its_line_and_the_last_good_config_keeps_serving(
        live: triton_steps.Triton, typo: str, line: int, said: str) -> None:
    triton_edits.edit_config(live, MODEL, GOOD)
    good = _serving(live)
    assert [g.count for g in live_config(live.client(), MODEL).instance_group] == [2]
    on_disk = live.stack.read_file(f"models/{MODEL}/config.pbtxt").decode()
    with pytest.raises(exercise.StudentError) as refused:
        triton_edits.edit_config(live, MODEL, typo)
    message = str(refused.value)
    assert f"line {line}: {said}" in message, message
    assert "keeps serving its last good config" in message
    assert refused.value._render_traceback_()[0].startswith("✗ food_classifier_onnx/config.pbtxt")
    assert _serving(live) == good, "the server kept the last good config"
    assert live.stack.read_file(f"models/{MODEL}/config.pbtxt").decode() == on_disk, "the file is untouched"


def test_a_config_triton_refuses_restores_the_file_and_keeps_the_old_one(live: triton_steps.Triton) -> None:
    triton_edits.edit_config(live, MODEL, GOOD)
    good = _serving(live)
    with pytest.raises(exercise.StudentError, match="instance count must be at least 1"):
        triton_edits.edit_config(live, MODEL, "instance_group [ { kind: KIND_CPU } ]")  # count: 0
    assert _serving(live) == good


def test_the_typed_command_is_what_ran(live: triton_steps.Triton, capsys: pytest.CaptureFixture[str]) -> None:
    """A range other than the notebook's (2, 4, 6 clients) is found in the data, with the command."""
    url, inputs = triton_edits.perf_url(live, MODEL)
    command = (f"perf_analyzer -m {MODEL} -u {url} --input-data {inputs}\n"
               "    --concurrency-range 2:6:2  # the student's sweep\n"
               "    --measurement-mode count_windows --measurement-request-count 12\n"
               "    --stability-percentage 1000 --max-trials 4 -v -f typed-sweep.csv")
    rows = triton_edits.perf_analyzer(live, command, step="typed_sweep")
    typed = " ".join(shlex.quote(w) for w in shlex.split(command, comments=True))
    assert f"$ {typed}\n" in capsys.readouterr().out, "the command is printed as it runs"
    data = RunData.load(Path(live.stack.root) / "results").triton
    mine = data[data["step"] == "typed_sweep"]
    assert sorted(mine["concurrency"]) == [2.0, 4.0, 6.0] == sorted(rows["concurrency"])
    assert set(mine["command"]) == {typed} and (mine["throughput"] > 0).all()
    assert mine["cpu_util_pct"].notna().all()
    csv = Path(live.stack.root) / "results" / "perf" / "typed-sweep.csv"
    assert csv.is_file(), "its CSV, where -f named it"
    ran = exercise.records("command")
    assert ran["command"].iloc[-1] == typed and ran["levels"].iloc[-1] == [2.0, 4.0, 6.0]
    triton_edits.check_levels(rows, "04", "concurrency", 3, "add a range")


def test_a_command_the_lab_cannot_record_is_refused_in_one_line(live: triton_steps.Triton) -> None:
    with pytest.raises(exercise.StudentError, match=r"has no -f FILE\.csv"):
        triton_edits.perf_analyzer(live, f"perf_analyzer -m {MODEL} -u {live.url}", step="typed_sweep")
    with pytest.raises(exercise.StudentError, match="must start with perf_analyzer"):
        triton_edits.perf_analyzer(live, "curl -s localhost", step="typed_sweep")
    with pytest.raises(exercise.StudentError, match="the server has no model 'no_such_model'"):
        triton_edits.perf_analyzer(live, f"perf_analyzer -m no_such_model -u {live.url} -f x.csv",
                                   step="typed_sweep")
    with pytest.raises(exercise.StudentError, match="perf_analyzer did not measure"):
        triton_edits.perf_analyzer(live, f"perf_analyzer -m {MODEL} -u {live.url} --no-such-flag -f x.csv",
                                   step="typed_sweep")

"""The student's config.pbtxt text, read as Triton reads it: a typo refused with its line and the fix."""

from __future__ import annotations

import pytest

from servelab.triton.config import config_text, mc, parse_config
from servelab.triton.config_text import ConfigTextError, block_text, merge_edit, named_fields, parse_edit

LIVE = """name: "m"
backend: "onnxruntime"
max_batch_size: 16
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


@pytest.mark.parametrize(("text", "line", "fix"), [
    ("dynamic_batching {\n  preferred_batch_size: [ 4, 6 ]\n  max_queue_delay_microseconds: 100\n",
     3, "a block opened with `{` is not closed: add its `}`"),
    ("dynamic_batching {\n  preferred_batch_size: [ 4, 6 ]\n  max_queue_delay_microsecond: 100\n}\n",
     3, "`max_queue_delay_microsecond` is not a field of ModelDynamicBatching: did you mean "
        "`max_queue_delay_microseconds`?"),
    ("instance_grop [ { count: 2 } ]", 1, "did you mean `instance_group`?"),
    ("instance_group [\n  { count: 2 kind: KIND_CPUU }\n]", 2, "did you mean `KIND_CPU`?"),
    ("instance_group [\n  { count: 2 }\n", 2, "a list opened with `[` is not closed: add its `]`"),
    ("dynamic_batching {\n}\n}\n", 3, "a `}` closes a block that was never opened"),
])
def test_a_typo_is_refused_with_its_line_and_the_fix(text: str, line: int, fix: str) -> None:
    with pytest.raises(ConfigTextError) as refused:
        parse_edit(text, "m/config.pbtxt")
    said = str(refused.value)
    assert refused.value.line == line and f"m/config.pbtxt, line {line}: " in said
    assert fix in said and "Triton would refuse it" in said
    assert f"\n  {line} | " in said, "the line itself is shown"


def test_the_fields_written_replace_those_blocks_and_keep_the_rest() -> None:
    edit = parse_edit("# YOUR CODE HERE\ninstance_group [ { count: 2 kind: KIND_CPU } ]\n"
                      "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100 }")
    assert named_fields(edit) == ["instance_group", "dynamic_batching"]
    merged = merge_edit(parse_config(LIVE), edit)
    assert [g.count for g in merged.instance_group] == [2], "the block is replaced, not appended to"
    assert merged.backend == "onnxruntime" and merged.max_batch_size == 16
    assert list(merged.dynamic_batching.preferred_batch_size) == [4]
    assert "max_queue_delay_microseconds: 100" in block_text(merged, "dynamic_batching")
    assert block_text(parse_config(LIVE), "dynamic_batching") == ""


def test_a_text_of_comments_names_no_field() -> None:
    assert named_fields(parse_edit("\n# YOUR CODE HERE\n")) == []
    assert config_text(merge_edit(parse_config(LIVE), mc.ModelConfig())) == config_text(parse_config(LIVE))

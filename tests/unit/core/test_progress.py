"""The lab's progress bars go to stdout: in an executed notebook they are plain output, not red boxes."""

from __future__ import annotations

import pytest

from servelab.core.progress import bar


def test_a_bar_writes_to_stdout_only(capsys: pytest.CaptureFixture[str]) -> None:
    for _ in bar(range(3), desc="uploads", unit="img"):
        pass
    out, err = capsys.readouterr()
    assert "uploads" in out and "3/3" in out
    assert err == ""

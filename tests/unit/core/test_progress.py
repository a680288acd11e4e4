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


def test_a_headless_runs_kernels_draw_no_bar(monkeypatch, capsys) -> None:
    """The runner sets SERVELAB_HEADLESS for its kernels: a bar's redraws would stay in the executed
    notebook as one line each."""
    from servelab.core.progress import HEADLESS, bar

    monkeypatch.setenv(HEADLESS, "1")
    for _ in bar(range(3), desc="quiet"):
        pass
    assert "quiet" not in capsys.readouterr().out

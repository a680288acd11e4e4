"""servelab.core.console: output that a gone terminal cannot turn into an exception."""

from __future__ import annotations

import errno
import io
import sys
from pathlib import Path

import pytest

from servelab.core.console import SafeStream, logged_output, say


class GoneTerminal(io.StringIO):
    """A terminal after its window closed: every write fails with EIO."""

    def write(self, text: str) -> int:
        raise OSError(errno.EIO, "Input/output error")


def test_a_gone_terminal_costs_the_line_not_the_log(tmp_path: Path) -> None:
    terminal = io.StringIO()
    with open(tmp_path / "log", "w") as log:
        stream = SafeStream(terminal, log)
        stream.write("before\n")
        stream.terminal = GoneTerminal()
        stream.write("after\n")  # no exception
        stream.write("later\n")
        assert stream.terminal_lost and stream.terminal is None
    assert terminal.getvalue() == "before\n"
    assert (tmp_path / "log").read_text() == "before\nafter\nlater\n"


def test_say_drops_a_failed_write(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdout", GoneTerminal())
    monkeypatch.setattr(sys, "stderr", GoneTerminal())
    say("the teardown goes on")
    say("FAILED: ...", error=True)
    with pytest.raises(OSError):
        print("a bare print would have raised", flush=True)


def test_logged_output_tees_and_restores(tmp_path: Path, capsys) -> None:
    before = sys.stdout
    with logged_output(tmp_path / "run" / "controller.log"):
        print("to both")
        print("an error too", file=sys.stderr)
    assert sys.stdout is before
    assert capsys.readouterr().out == "to both\n"
    assert (tmp_path / "run" / "controller.log").read_text() == "to both\nan error too\n"


def test_after_the_terminal_is_gone_nothing_raises_any_more(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdout", GoneTerminal())
    with logged_output(tmp_path / "controller.log"):
        print("== teardown")
    print("results: ...")  # after the run: the gone terminal is not put back
    assert (tmp_path / "controller.log").read_text() == "== teardown\n"

"""Output that can never stop the program: a closed terminal costs the line, not the run.

After a terminal closes (SIGHUP), every write to it raises ``OSError`` (EIO); a program that
prints on its way out — the instructor's Chameleon run tearing its lease down — would die at its
first ``print``. Two helpers, used wherever the controller prints during a run and its teardown:

* :func:`say` prints one line, flushed; a failed write is dropped;
* :func:`logged_output` sends ``sys.stdout``/``sys.stderr`` to the terminal as long as it takes
  them and always to a log file, so everything printed inside (python-chi's and Fabric's output
  too) is in the run's folder even when nobody watches. Why: docs/decisions/2026-11-25-chameleon-robustness.md
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

WRITE_ERRORS = (OSError, ValueError)  # EIO/EPIPE from a gone terminal; ValueError: a closed file


class SafeStream(io.TextIOBase):
    """A text stream that writes to ``log`` (when given) and to ``terminal`` until the terminal fails;
    then it goes on with the log alone. ``write`` and ``flush`` never raise."""

    def __init__(self, terminal: TextIO | None, log: TextIO | None = None) -> None:
        super().__init__()
        self.terminal = terminal
        self.log = log
        self.terminal_lost = False

    def write(self, text: str) -> int:
        if self.log is not None:
            try:
                self.log.write(text)
                self.log.flush()  # on disk at once: the process may be killed next
            except WRITE_ERRORS:
                self.log = None
        if self.terminal is not None:
            try:
                self.terminal.write(text)
                if "\n" in text:
                    self.terminal.flush()
            except WRITE_ERRORS:
                self.terminal, self.terminal_lost = None, True
        return len(text)

    def flush(self) -> None:
        if self.terminal is not None:
            try:
                self.terminal.flush()
            except WRITE_ERRORS:
                self.terminal, self.terminal_lost = None, True

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase declares it read-only
        return "utf-8"


def say(text: str, end: str = "\n", error: bool = False) -> None:
    """``print(text, end=end)`` on the current ``sys.stdout`` (``sys.stderr`` with ``error``), flushed;
    a write that fails (the terminal is gone) is dropped instead of raising."""
    with contextlib.suppress(*WRITE_ERRORS):
        print(text, end=end, flush=True, file=sys.stderr if error else sys.stdout)


@contextlib.contextmanager
def logged_output(log_path: Path) -> Iterator[SafeStream]:
    """Inside, ``sys.stdout`` and ``sys.stderr`` write to the terminal while it takes them and always to
    ``log_path`` (appended). After, the previous streams come back — unless the terminal failed inside:
    then writes go nowhere (the terminal is gone) rather than raise."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    previous = sys.stdout, sys.stderr
    with open(log_path, "a", encoding="utf-8", errors="replace") as log:
        out, err = SafeStream(sys.stdout, log), SafeStream(sys.stderr, log)
        sys.stdout, sys.stderr = out, err
        try:
            yield out
        finally:
            lost = out.terminal_lost or err.terminal_lost
            sys.stdout, sys.stderr = (SafeStream(None), SafeStream(None)) if lost else previous

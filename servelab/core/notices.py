"""The lab's warnings, as a student reads them: one plain line in the cell's normal output.

Python shows a warning as ``/abs/path/module.py:305: SomeWarning: …`` followed by the source
line, on stderr, which Jupyter draws as a red box and papermill keeps in the executed notebook.
The lab's own warnings (a perf_analyzer level that did not settle, a skipped warm-up) derive
from :class:`LabWarning`; once :func:`show_plainly` is installed (importing ``servelab.lab``
does it, so every notebook has it), each is printed as ``warning: <message>`` on the current
``sys.stdout``, every time it happens (not once per code location). Every other warning is shown
as Python shows it. Code that catches or filters warnings (``pytest.warns``,
``warnings.catch_warnings``) still sees a :class:`LabWarning` as a warning.

An exception that is a person's to fix (a wrong parameter, a config the server must not get, a lease
that cannot be had) mixes in :class:`SaidPlainly`: Jupyter shows its message, marked ``✗``, instead of
a traceback; with ``SERVELAB_DEBUG=1`` it shows the traceback, causes included.
Why: docs/decisions/2026-11-25-quiet-run-output.md, 2026-12-02-errors-without-tracebacks.md
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from typing import Any, TextIO

PREFIX = "warning: "
DEBUG_VAR = "SERVELAB_DEBUG"  # set (to anything but 0): tracebacks in full, for whoever debugs the lab


class SaidPlainly:
    """A mix-in for an exception whose message says what to fix: IPython shows its lines (the first
    marked ``✗``) instead of a traceback, through its ``_render_traceback_`` hook; elsewhere it is raised
    and printed as any exception is."""

    def _render_traceback_(self) -> list[str]:
        if isinstance(self, BaseException) and os.environ.get(DEBUG_VAR, "0") not in ("", "0"):
            return "".join(traceback.format_exception(self)).splitlines()
        return [f"✗ {line}" if i == 0 else f"  {line}" for i, line in enumerate(str(self).splitlines())]


class LabWarning(UserWarning):
    """A warning meant for the person running the lab: its message says what happened and what to do."""


def plain_line(message: Warning | str) -> str:
    """The one line a lab warning prints: ``warning: `` and its message, with no file, line or source."""
    return PREFIX + " ".join(str(message).split())


def show_plainly() -> None:
    """Print :class:`LabWarning` s as :func:`plain_line` on stdout from now on; idempotent."""
    previous = warnings.showwarning
    if getattr(previous, "_servelab_plain", False):
        return

    def showwarning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                    file: TextIO | None = None, line: str | None = None) -> None:
        if issubclass(category, LabWarning) and file is None:
            print(plain_line(message), file=sys.stdout, flush=True)  # looked up now: kernels replace it
        else:
            previous(message, category, filename, lineno, file, line)

    marked: Any = showwarning
    marked._servelab_plain = True
    warnings.showwarning = showwarning
    warnings.filterwarnings("always", category=LabWarning)

"""The lab's warnings, as a student reads them: one plain line in the cell's normal output.

Python shows a warning as ``/abs/path/module.py:305: SomeWarning: …`` followed by the source
line, on stderr, which Jupyter draws as a red box and papermill keeps in the executed notebook.
The lab's own warnings (a perf_analyzer level that did not settle, a skipped warm-up) derive
from :class:`LabWarning`; once :func:`show_plainly` is installed (importing ``servelab.lab``
does it, so every notebook has it), each is printed as ``warning: <message>`` on the current
``sys.stdout``, every time it happens (not once per code location). Every other warning is shown
as Python shows it. Code that catches or filters warnings (``pytest.warns``,
``warnings.catch_warnings``) still sees a :class:`LabWarning` as a warning.
Why: docs/decisions/2026-11-25-quiet-run-output.md
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, TextIO

PREFIX = "warning: "


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

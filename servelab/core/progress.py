"""The lab's progress bars: text on stdout, so an executed notebook shows them as plain output.

tqdm writes to stderr by default, which Jupyter draws as a red box per bar (and papermill keeps
every one in the executed notebook); the widget bars of ``tqdm.auto`` need a live front end.
Every bar in the lab goes through :func:`bar`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

HEADLESS = "SERVELAB_HEADLESS"  # set by the headless runner for its kernels: nobody watches their cells


def bar(iterable: Any = None, **options: Any) -> Any:
    """``tqdm(iterable, **options)`` on the current ``sys.stdout``, redrawn at most once a second, on one
    line even when nested (a notebook's output area has no cursor movement). Off in a headless run
    (``HEADLESS``): its redraws would stay in the executed notebook as one line each, and the runner
    shows its own progress."""
    from tqdm import tqdm

    if os.environ.get(HEADLESS) == "1":
        options["disable"] = True
    options.setdefault("file", sys.stdout)
    options.setdefault("mininterval", 1.0)
    options.setdefault("position", 0)  # a bar inside another redraws the same line: no cursor-up escapes
    return tqdm(iterable, **options)

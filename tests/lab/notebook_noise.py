"""What an executed notebook shows that is not for its reader (the headless run's quietness check)."""

from __future__ import annotations

import re
from typing import Any

# How Python shows a warning: "<file>.py:<line>: <Category>: <message>" (then the source line)
WARNING_LINE = re.compile(r"^.*\.py:\d+: \w*Warning: ", re.M)


def noise(nb: Any) -> list[str]:
    """Each stderr output of ``nb``'s code cells (a red box in Jupyter), and each output of any kind
    holding a Python warning line (file, line number, category), as ``"cell N: <text>"``; [] when quiet.

    A lab warning (``servelab.core.notices.LabWarning``) printed the way Python prints warnings is
    caught either way: on stderr, or as a file:line line wherever it landed.
    """
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            if output.get("output_type") != "stream":
                data = output.get("data", {})
                text = data.get("text/plain", "") if isinstance(data, dict) else ""
            text = "".join(text) if isinstance(text, list) else str(text)
            if output.get("name") == "stderr" or WARNING_LINE.search(text):
                found.append(f"cell {index}: {text.strip()[:200]}")
    return found

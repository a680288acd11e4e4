"""``python -m servelab.site.diagram``: the architecture diagram (``docs/guides/architecture.svg``) drawn by
Graphviz's ``dot`` from its source, ``docs/guides/architecture.dot``, the one file to edit. The SVG carries
the source's digest (``source_digest``), so a test tells a source changed without its drawing; the README
and the site's index show the SVG. Why Graphviz: docs/decisions/2026-12-01-the-lab-as-a-course.md
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from servelab.site.guides import ARCHITECTURE, GUIDES_DIR

SOURCE = GUIDES_DIR / "architecture.dot"
DRAWING = GUIDES_DIR / ARCHITECTURE
MARK = "<!-- drawn from architecture.dot, sha256 "


class DiagramError(RuntimeError):
    """The diagram could not be drawn; the message says what to do."""


def source_digest(source: Path = SOURCE) -> str:
    """The sha256 of the diagram's source, as the drawing records it."""
    return hashlib.sha256(Path(source).read_bytes()).hexdigest()


def recorded_digest(drawing: Path = DRAWING) -> str:
    """The source digest the drawing was made from ("" when it records none)."""
    text = Path(drawing).read_text(encoding="utf-8")
    start = text.find(MARK)
    return text[start + len(MARK):].split(" ", 1)[0] if start >= 0 else ""


def draw(source: Path = SOURCE, drawing: Path = DRAWING) -> Path:
    """Draw ``source`` with ``dot -Tsvg`` into ``drawing``, its digest recorded after the XML declaration."""
    dot = shutil.which("dot")
    if dot is None:
        raise DiagramError("Graphviz's dot is not installed: apt-get install graphviz, then run this again")
    done = subprocess.run([dot, "-Tsvg", str(source)], capture_output=True, text=True, timeout=60,
                          check=False)
    if done.returncode != 0:
        raise DiagramError(f"dot could not draw {source}: {done.stderr.strip().splitlines()[-1:]}")
    svg = done.stdout
    head, sep, rest = svg.partition("?>\n")
    mark = f"{MARK}{source_digest(source)} -->\n"
    Path(drawing).write_text(head + sep + mark + rest if sep else mark + svg, encoding="utf-8")
    return Path(drawing)


def main() -> int:
    try:
        drawn = draw()
    except DiagramError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"drew {drawn} from {SOURCE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

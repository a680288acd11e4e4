"""The lab's guides (``docs/guides/*.md``) as pages of the handout site, listed in its sidebar after the
notebooks, in ``ORDER``; a guide not named there comes after them, by name. Each is rendered as MyST from
the checkout's file as it is now, with what the build generates filled in (``Fill``: the lease plan from
the run the site is built from, the runbook from the code's messages), and its images beside it. Why the
guides are pages of the site: docs/decisions/2026-12-01-the-lab-as-a-course.md
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from servelab.core.paths import REPO_ROOT

GUIDES_DIR = REPO_ROOT / "docs" / "guides"
# the sidebar's order: what a reader looks for first
ORDER = ("student", "instructor", "chameleon", "docker-host", "by-hand", "architecture", "security",
         "runbook", "glossary")
# a generated block in a guide: <!-- begin NAME --> … <!-- end NAME -->, replaced by the build
BLOCK = re.compile(r"(<!-- begin ([\w-]+)[^>]*-->\n)(.*?)(<!-- end \2 -->)", re.S)
Fill = Callable[[], str]  # a generated block's new text


def guide_paths(folder: Path = GUIDES_DIR) -> list[Path]:
    """The guides in the sidebar's order (``ORDER``, then any other by name)."""
    found = {p.stem: p for p in sorted(Path(folder).glob("*.md"))}
    return [found[name] for name in ORDER if name in found] + [p for n, p in found.items() if n not in ORDER]


def title(path: Path) -> str:
    """A guide's title: its first ``# `` heading, else its name."""
    found = re.search(r"^#\s+(.+?)\s*$", Path(path).read_text(encoding="utf-8"), re.M)
    return found.group(1) if found else Path(path).stem


def summary(path: Path) -> str:
    """A guide's first paragraph after its title, on one line (the index's "what it is for")."""
    text = Path(path).read_text(encoding="utf-8").split("\n# ", 1)[-1].split("\n", 1)[-1]
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if block and not block.startswith(("#", "<!--", "!", "|", "```")):
            return " ".join(block.split())
    return ""


def fill_blocks(text: str, fills: dict[str, Fill]) -> str:
    """``text`` with each generated block that ``fills`` names replaced by its new text (the markers kept,
    so the result can be filled again); blocks not named stay as they are."""
    def replace(match: re.Match[str]) -> str:
        fill = fills.get(match.group(2))
        if fill is None:
            return match.group(0)
        return f"{match.group(1)}{fill().strip()}\n{match.group(4)}"

    return BLOCK.sub(replace, text)


def block(text: str, name: str) -> str:
    """The text of generated block ``name`` in ``text`` ("" when it has none)."""
    for match in BLOCK.finditer(text):
        if match.group(2) == name:
            return match.group(3)
    return ""


IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)|<img\b[^>]*\bsrc=\"([^\"]+)\"")


def images(markdown: str) -> list[str]:
    """The relative image paths a guide shows (markdown images and ``<img>`` tags; no addresses)."""
    found = [a or b for a, b in IMAGE.findall(markdown)]
    return [path for path in found if "://" not in path and not path.startswith(("data:", "/"))]


ARCHITECTURE = "architecture.svg"  # the diagram of what runs where, beside the guides (its source: .dot)


def index_section(paths: list[Path], names: list[str]) -> tuple[list[str], list[str]]:
    """The index's parts on the guides: (near its top) the architecture diagram and a table of the guides,
    each linked by the title the sidebar shows, with its first paragraph; (at its end) their sidebar
    entries, after the notebooks'. ``names``: each guide's page in the Sphinx source."""
    if not paths:
        return [], []
    rows = "\n".join(f"| [{title(path)}]({name}.md) | {summary(path).replace('|', '/')} |"
                     for path, name in zip(paths, names, strict=True))
    top = ["## What runs where, and the guides"]
    if (Path(paths[0]).parent / ARCHITECTURE).is_file():
        top.append(f"![What runs where: the hub, the node, its containers and their ports]"
                   f"(docs/guides/{ARCHITECTURE})")
    top.append("| guide | what it is for |\n|---|---|\n" + rows)
    return top, ["```{toctree}\n:hidden:\n:maxdepth: 1\n:caption: Guides\n\n" + "\n".join(names) + "\n```"]


def copy_diagram(paths: list[Path], src: Path) -> None:
    """The architecture diagram beside the guides' pages in the Sphinx source ``src``, for the index."""
    if paths and (Path(paths[0]).parent / ARCHITECTURE).is_file():
        (src / "docs" / "guides").mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(paths[0]).parent / ARCHITECTURE, src / "docs" / "guides" / ARCHITECTURE)


def fills(run_dir: Path) -> dict[str, Fill]:
    """The guides' generated blocks for a site built from the run in ``run_dir``, by block name."""
    return {}

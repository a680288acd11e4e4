"""The class-day runbook drawn from the code's own messages: provisioning's catalog
(``provisioning/messages.py``: each message with what leads to it) and every error the rest of the lab
raises with a message of its own (an exception class defined in ``servelab/``), both found by reading the
source (``ast``; nothing is imported), grouped by where they come from, each with what to do as the message
itself says it. ``python -m servelab.site.runbook`` writes it into ``docs/guides/runbook.md``'s ``runbook``
block; a test fails when that block differs from what the code says now, and ``./lab site`` fills it anew.
Why: docs/decisions/2026-12-01-the-lab-as-a-course.md
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from servelab.core.paths import REPO_ROOT
from servelab.site.guides import GUIDES_DIR, fill_blocks

RUNBOOK = GUIDES_DIR / "runbook.md"
# where an error comes from, as a class-day reader looks for it: (title, folders or modules, in order)
AREAS = (
    ("Chameleon: reserving, launching, tearing down (01, 02, 08, `python -m provisioning`)",
     ("provisioning",)),
    ("The node: its images, its Jupyter, the copy back", ("servelab/targets", "servelab/remote",
                                                          "servelab/core/image_builds.py", "servelab/core")),
    ("The notebooks and the headless run", ("servelab/lab",)),
    ("The servers: FastAPI, Triton, the LLM engine, Ray Serve", ("servelab/serving", "servelab/triton",
                                                                   "servelab/llm", "servelab/scaling",
                                                                   "servelab/bench")),
    ("The handout site and the report", ("servelab/site", "servelab/report", "servelab/results")),
)
GUIDES_ERROR = "DiagramError"  # the guides' own tooling: not a class-day message
PLACEHOLDER = "…"


@dataclass(frozen=True)
class Message:
    """One error message as the code raises it: where, its class, its text (``…`` for what varies)."""

    path: str
    function: str
    kind: str
    text: str
    when: str = ""  # what leads to it, where the catalog says

    @property
    def cause_and_fix(self) -> tuple[str, str]:
        """(what happened, what to do): the message split at its last ``: `` outside parentheses, the way
        the lab's messages put what to do last; ("", text) when it has none."""
        depth, cut = 0, -1
        for i, ch in enumerate(self.text):
            depth += ch in "([{"
            depth -= ch in ")]}"
            if ch == ":" and depth == 0 and self.text[i + 1:i + 2] == " ":
                cut = i
        if cut < 0:
            return "", self.text
        return self.text[:cut].strip(), self.text[cut + 1:].strip()


def _text(node: ast.expr) -> str | None:
    """A message argument as text: constants kept, formatted values as ``…``; None when it is not text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else PLACEHOLDER for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


def lab_errors(root: Path = REPO_ROOT) -> set[str]:
    """The exception classes the lab defines (a base named ``…Error``, ``…Exception`` or one of them)."""
    found: set[str] = set()
    classes = []
    for path in _sources(root):
        classes += [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
    changed = True
    while changed:
        changed = False
        for cls in classes:
            bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                     for b in cls.bases}
            if cls.name not in found and any(b.endswith(("Error", "Exception")) or b in found for b in bases):
                found.add(cls.name)
                changed = True
    return found - {GUIDES_ERROR}


def _sources(root: Path) -> list[Path]:
    return sorted([*(root / "provisioning").glob("*.py"), *(root / "servelab").rglob("*.py")])


def catalog(root: Path = REPO_ROOT) -> list[Message]:
    """provisioning's messages (``NAME = M("text", "when")`` in ``provisioning/messages.py``), in order."""
    path = root / "provisioning" / "messages.py"
    if not path.is_file():
        return []
    found = []
    for node in ast.parse(path.read_text()).body:
        value = node.value if isinstance(node, ast.Assign) else None
        if isinstance(value, ast.Call) and len(value.args) >= 2 and isinstance(node, ast.Assign):
            text, when = _text(value.args[0]), _text(value.args[1])
            name = node.targets[0].id if isinstance(node.targets[0], ast.Name) else ""
            if text and when is not None:
                found.append(Message("provisioning/messages.py", name, "message",
                                     " ".join(re.sub(r"\{[^{}]*\}", PLACEHOLDER, text).split()), when))
    return found


def messages(root: Path = REPO_ROOT) -> list[Message]:
    """provisioning's catalog, then every ``raise LabError("…")`` in the rest of the lab's code, in file
    order."""
    errors = lab_errors(root)
    found = []
    for path in [p for p in _sources(root) if p.parts[-2:] != ("provisioning", "messages.py")]:
        tree = ast.parse(path.read_text())
        for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
            for node in ast.walk(function):
                if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                    continue
                func = node.exc.func
                kind = (func.id if isinstance(func, ast.Name)
                        else func.attr if isinstance(func, ast.Attribute) else "")
                text = _text(node.exc.args[0])
                if kind in errors and text:
                    found.append(Message(path.relative_to(root).as_posix(), function.name, kind,
                                         " ".join(text.split())))
    unique = {(m.path, m.text): m for m in found}  # a function nested in another is walked twice
    return catalog(root) + sorted(unique.values(), key=lambda m: (m.path, m.text))


def _area(path: str) -> int:
    for number, (_, prefixes) in enumerate(AREAS):
        if any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes):
            return number
    return len(AREAS) - 1


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("|", "\\|").replace("`", "'")).strip() or "—"


def runbook_markdown(root: Path = REPO_ROOT) -> str:
    """The runbook's tables: one per area, a row per message (what it says happened, what to do, where)."""
    found = messages(root)
    parts = [f"{len(found)} messages, read from the code by `python -m servelab.site.runbook`. "
             f"`{PLACEHOLDER}` stands for what the message fills in (a name, a number, the library's own "
             "words)."]
    for number, (title, _) in enumerate(AREAS):
        rows = [m for m in found if _area(m.path) == number]
        if not rows:
            continue
        table = [f"| {_cell(cause or m.text)} | {_cell(fix if cause else '')} | "
                 f"{_cell(m.when) if m.when else f'`{m.path}` {m.function}'} |"
                 for m in rows for cause, fix in [m.cause_and_fix]]
        header = "| the message says | what to do | when, or where |\n|---|---|---|\n"
        parts += [f"### {title}", header + "\n".join(table)]
    return "\n\n".join(parts) + "\n"


def write(path: Path = RUNBOOK, root: Path = REPO_ROOT) -> None:
    """Fill ``path``'s ``runbook`` block with what the code says now."""
    text = Path(path).read_text(encoding="utf-8")
    Path(path).write_text(fill_blocks(text, {"runbook": lambda: runbook_markdown(root)}), encoding="utf-8")


def main() -> int:
    write()
    print(f"wrote {len(messages())} messages into {RUNBOOK}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

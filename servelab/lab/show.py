"""What a notebook shows of the project as it is: a file, or its named functions, printed from disk
(comments included); and anything with an HTML view displayed as such in Jupyter, as text elsewhere."""

from __future__ import annotations

from typing import Any

from servelab.core.paths import REPO_ROOT


def show_file(relpath: str, lines: int = 40, start: str | None = None) -> None:
    """Print the first ``lines`` of a project file (from the line containing ``start`` if given)."""
    text = (REPO_ROOT / relpath).read_text().splitlines()
    first = next((i for i, line in enumerate(text) if start and start in line), None if start else 0)
    if first is None:
        raise LookupError(f"{relpath} has no line with {start!r}: the file changed; update the notebook cell")
    print(f"# {relpath} (lines {first + 1}-{min(len(text), first + lines)} of {len(text)})")
    print("\n".join(text[first:first + lines]))

def show_code(relpath: str, *names: str) -> None:
    """Print a project file as it is on disk, comments included: whole, or only the named top-level
    functions/classes or methods (``"Class.method"``), each with its line numbers."""
    import ast

    text = (REPO_ROOT / relpath).read_text()
    lines = text.splitlines()
    if not names:
        print(f"# {relpath} ({len(lines)} lines)\n{text.rstrip()}")
        return
    tree = ast.parse(text)
    for name in names:
        scope: list[ast.stmt] = tree.body
        node: ast.stmt | None = None
        for part in name.split("."):
            kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
            node = next((n for n in scope if isinstance(n, kinds) and n.name == part), None)
            if node is None:
                raise LookupError(f"{relpath} has no {name!r}: the file changed; update the notebook cell")
            scope = node.body if isinstance(node, ast.ClassDef) else []
        assert node is not None and node.end_lineno is not None
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        # one write: a kernel may send separate prints as separate outputs
        print("\n".join([f"# {relpath}, lines {start}-{node.end_lineno}: {name}",
                         *lines[start - 1:node.end_lineno], ""]))

def show(shown: Any) -> None:
    """Display ``shown`` (HTML and its text) in a notebook, or print its text elsewhere."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is in every environment the notebooks run in
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        from IPython.display import display

        display(shown)
    else:
        print(repr(shown))

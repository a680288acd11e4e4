"""provisioning's modules import one another one way: no cycle, not even through an import inside a
function (``config`` and ``times`` used to import each other, one of them lazily)."""

from __future__ import annotations

import ast
from pathlib import Path

import provisioning

PACKAGE = Path(provisioning.__file__).parent


def imports_of(path: Path) -> set[str]:
    """The provisioning modules this file imports, anywhere in it (the package's ``__init__`` excluded)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("provisioning."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "provisioning":  # from provisioning import x
            found.update(a.name for a in node.names if (PACKAGE / f"{a.name}.py").is_file())
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("provisioning."))
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = {p.stem: imports_of(p) for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert "errors" in graph["times"] and "config" not in graph["times"]

    def cycle_from(start: str, at: str, seen: tuple[str, ...]) -> tuple[str, ...] | None:
        for nxt in sorted(graph.get(at, ())):
            if nxt == start:
                return (*seen, nxt)
            if nxt not in seen:
                found = cycle_from(start, nxt, (*seen, nxt))
                if found:
                    return found
        return None

    cycles = [cycle for name in graph if (cycle := cycle_from(name, name, (name,)))]
    assert not cycles, f"import cycles: {cycles}"


def test_provisioning_error_is_one_class() -> None:
    from provisioning import config, errors, times

    assert config.ProvisioningError is errors.ProvisioningError is times.ProvisioningError

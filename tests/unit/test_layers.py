"""The package's shape: dependencies run one way, no import cycles, no module grows unexplained."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import grimp

from servelab.core.paths import REPO_ROOT

SIZE_LIMIT = 400
REASON = "Long on purpose:"  # a module over the limit says why in its docstring


def test_layers_contract_is_kept() -> None:
    """pyproject.toml's import-linter contract: core → results → serving | triton | llm | scaling | remote →
    provisioning → targets → report → lab → site (provisioning never imports targets, which drive it)."""
    tool = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(tool)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph.find_modules_directly_imported_by(module) & modules):
            if state.get(imported) == 1:
                found.append([*path[path.index(imported):], imported])
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(modules):
        if module not in state:
            visit(module, [module])
    return found


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("servelab", "provisioning")
    modules = {m for m in graph.modules if not m.endswith("__main__")}
    assert _cycles(graph, modules) == []


def test_provisioning_and_targets_depend_one_way() -> None:
    """servelab.targets' Chameleon run drives provisioning; provisioning reaches the node through
    servelab.remote, below both, never through servelab.targets (issue 42)."""
    graph = grimp.build_graph("servelab", "provisioning")
    chain = graph.find_shortest_chains(importer="provisioning", imported="servelab.targets")
    assert chain == set(), f"provisioning imports servelab.targets: {sorted(chain)}"
    assert graph.find_shortest_chains(importer="servelab.targets", imported="provisioning")  # it drives it
    assert graph.find_shortest_chains(importer="provisioning", imported="servelab.remote")


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    assert _cycles(graph, {"a.x", "a.y"}) == [["a.x", "a.y", "a.x"]]


def test_long_modules_say_why() -> None:
    long = []
    for folder in ("servelab", "provisioning", "fastapi_pt", "fastapi_onnx", "flask_app"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            text = path.read_text()
            docstring = ast.get_docstring(ast.parse(text)) or ""
            if len(text.splitlines()) > SIZE_LIMIT and REASON not in docstring:
                long.append(f"{path.relative_to(REPO_ROOT)} ({len(text.splitlines())} lines)")
    assert long == [], f"over {SIZE_LIMIT} lines without '{REASON} …' in the docstring: {long}"


# modules and folders that moved in the restructure: nothing tracked may point at them again
REMOVED = re.compile(r"servelab[./](steps|stacks|node_run|params|results\.py|serving\.py|lab\.py|report\.py|"
                     r"model\b|samples\b|labels\b|preprocess\b|monitor\b|procs\b|paths\b|gpu_configs|services\b)"
                     r"|servelab\.targets\.(stacks|node_shell|results_fetch)\b"
                     r"|servelab/targets/(node_shell|results_fetch)\.py"  # now servelab/remote/ (issue 42)
                     r"|servelab\.lab\.steps\b|servelab\.lab\.(plots|effects)\b"
                     r"|tests/(foundation|gpu_targets|flask|triton|notebooks)/")


def test_nothing_points_at_a_removed_module_or_folder() -> None:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    stale = []
    for name in listed.stdout.split():
        path = REPO_ROOT / name
        if name.startswith("data/") or name.endswith(".ipynb") or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        stale += [f"{name}:{i}: {line.strip()[:100]}" for i, line in enumerate(text.splitlines(), 1)
                  if REMOVED.search(line) and "REMOVED" not in line]
    assert stale == []

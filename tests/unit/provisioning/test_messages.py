"""Every one-line message provisioning raises (and every failure or retry line it prints) lives in
``provisioning.messages``, so that the class-day runbook can be drawn from one place (issue 53)."""

from __future__ import annotations

import ast
import string
from pathlib import Path

from provisioning import messages
from servelab.core.paths import REPO_ROOT

RAISED = {"ProvisioningError", "LeaseNotStarted", "NotOurs"}
PRINTED = {"print", "say"}
FAILING_WORDS = ("failed", "refused", "not released", "trying again", "could not")


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _literal(node: ast.AST) -> bool:
    """A message written where it is raised: a string, an f-string, or their concatenation."""
    if (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and (_literal(node.left) or _literal(node.right))


def _text(node: ast.AST) -> str:
    strings = [v.value for v in ast.walk(node) if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return " ".join(strings)


def test_no_message_is_written_where_it_is_raised_or_printed() -> None:
    found = []
    for path in sorted((REPO_ROOT / "provisioning").glob("*.py")):
        if path.name == "messages.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name, first = _name(node.func), node.args[0]
            where = f"{path.relative_to(REPO_ROOT)}:{node.lineno}"
            if name in RAISED and _literal(first):
                found.append(f"{where}: {name}({_text(first)[:60]!r}...)")
            if name in PRINTED and _literal(first) and any(word in _text(first) for word in FAILING_WORDS):
                found.append(f"{where}: {name}({_text(first)[:60]!r}...)")
    assert found == [], "write these as provisioning.messages.Message constants:\n" + "\n".join(found)


def test_every_message_is_one_line_with_its_fields_named() -> None:
    catalog = messages.catalog()
    assert len(catalog) > 80 and len({name for name, _ in catalog}) == len(catalog)
    for name, message in catalog:
        fields = {field for _, field, _, _ in string.Formatter().parse(message.text) if field is not None}
        assert all(field and field.isidentifier() for field in fields), (name, fields)
        filled = message(**{field: f"<{field}>" for field in fields})
        assert "\n" not in filled and filled == filled.strip() and message.when, name


def test_a_message_is_what_the_code_raises(fake_chi, student) -> None:
    """The constants are the texts the code raises (here: a lease id that names no lease)."""
    import pytest

    import provisioning
    from provisioning.config import from_env

    config = from_env(env={}, project="CHI-231095", lease_id="0a1b2c3d-0000-4000-8000-000000000001",
                      code_source="git", repo_url="https://git.example.org/lab.git")
    with pytest.raises(provisioning.ProvisioningError) as caught:
        provisioning.reserve(config, chi=fake_chi.api)
    expected = messages.NO_LEASE_WITH_ID(lease_id=config.lease_id, project="CHI-231095", site="CHI@TACC")
    assert str(caught.value) == expected


def test_the_catalog_is_the_modules_constants_in_order() -> None:
    source = Path(messages.__file__).read_text()
    names = [name for name, _ in messages.catalog()]
    assert names == sorted(names, key=lambda name: source.index(f"\n{name} = "))

"""``target = None`` in a parameters cell: $SERVELAB_TARGET where it is set (the node's Jupyter: docker), else
local; a given target wins, and a headless run always gives one."""

from __future__ import annotations

import pytest
import yaml

from servelab.core.paths import REPO_ROOT
from servelab.lab.params import TARGET_VARIABLE, ParameterError, resolve


def test_none_is_local_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TARGET_VARIABLE, raising=False)
    p = resolve(None, "quick")
    assert p.target == "local" and p.target_from == "default" and p.plan
    assert p.rows()[0] == {"parameter": "target", "value": "local", "from": "default",
                           "meaning": "where to run"}


def test_none_takes_the_variable_and_a_given_target_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TARGET_VARIABLE, "docker")
    p = resolve(None, "quick")
    assert p.target == "docker" and p.target_from == "$SERVELAB_TARGET"
    given = resolve("local", "quick")
    assert given.target == "local" and given.target_from == "given"


def test_a_bad_variable_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TARGET_VARIABLE, "moon")
    with pytest.raises(ParameterError) as info:
        resolve(None, "quick")
    assert str(info.value) == ("target=None takes $SERVELAB_TARGET='moon', which is unknown: set "
                               "SERVELAB_TARGET (or target in the parameters cell) to one of 'local', "
                               "'docker', 'chameleon'")


def test_the_node_s_jupyter_sets_docker() -> None:
    compose = yaml.safe_load((REPO_ROOT / "docker" / "docker-compose-jupyter.yaml").read_text())
    assert compose["services"]["jupyter"]["environment"][TARGET_VARIABLE] == "docker"

"""Real predictions on the node (issue 50): notebook 02's ``weights`` (and the sha256 that trusts a file
needing unpickling) reach the node's model build as ``./lab jupyter``'s environment."""

from __future__ import annotations

import pytest

from provisioning import from_env
from provisioning.node import JUPYTER_COMMAND, jupyter_command
from servelab.lab.params import ParameterError, resolve

URL = "https://example.org/models/food11.pth"
SHA = "ab" * 32


def test_the_weights_reach_the_nodes_model_build() -> None:
    config = from_env(env={}, project="CHI-1", weights=URL, weights_trusted=SHA)
    assert jupyter_command(config) == (f"cd serve-system-lab && env SERVELAB_WEIGHTS={URL} "
                                       f"SERVELAB_WEIGHTS_TRUSTED={SHA} {JUPYTER_COMMAND}")
    assert jupyter_command(from_env(env={}, project="CHI-1")) == f"cd serve-system-lab && {JUPYTER_COMMAND}"
    from_hub = from_env(env={"SERVELAB_WEIGHTS": URL}, project="CHI-1")
    assert f"SERVELAB_WEIGHTS={URL} " in jupyter_command(from_hub)


def test_02s_parameters_take_the_weights_and_a_sha256_only() -> None:
    given = resolve("chameleon", "quick", weights=URL, weights_sha256=SHA)
    assert (given.weights, given.weights_sha256) == (URL, SHA)
    with pytest.raises(ParameterError, match="weights_sha256='abc' is not valid"):
        resolve("chameleon", "quick", weights=URL, weights_sha256="abc")

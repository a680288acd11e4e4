"""``servelab.triton.config.apply_config``, the one way a config changes, with stand-ins for the file
and the server: the previous file comes back whenever the new config is not confirmed live."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tritonclient.utils import InferenceServerException

from servelab.triton.config import (
    ConfigError,
    apply_config,
    config_dict,
    config_text,
    parse_config,
    set_instances,
)

OLD = 'name: "m"\nbackend: "python"\nmax_batch_size: 16\ninstance_group { count: 1 kind: KIND_CPU }\n'


class File:
    def __init__(self, text: str) -> None:
        self.text = text
        self.writes: list[str] = []

    def read(self) -> str | None:
        return self.text

    def write(self, text: str) -> None:
        self.writes.append(text)
        self.text = text


class Client:
    """tritonclient's HTTP client as apply_config uses it: load_model, then get_model_config."""

    def __init__(self, load_error: Exception | None = None, live: str | None = None) -> None:
        self.load_error = load_error
        self.live = live
        self.loaded: str | None = None

    def load_model(self, name: str, config: str | None = None) -> None:
        if self.load_error:
            raise self.load_error
        self.loaded = config

    def get_model_config(self, name: str) -> dict[str, Any]:
        """What the server runs: ``live`` when set, else what was loaded last, else the old config."""
        if self.live is not None or not self.loaded:
            return config_dict(parse_config(self.live or OLD))
        return json.loads(self.loaded)


def two_instances() -> Any:
    return set_instances(parse_config(OLD), 2, "KIND_CPU")


def test_a_confirmed_config_stays_written() -> None:
    file = File(OLD)
    live = apply_config(Client(), "m", file, two_instances())
    assert sum(g.count for g in live.instance_group) == 2
    assert file.text == config_text(two_instances())


@pytest.mark.parametrize("problem", [
    InferenceServerException("failed to load 'm': bad instance_group"),  # Triton refuses it
    OSError("connection refused"),  # the server cannot be reached
])
def test_the_previous_file_comes_back_when_the_reload_fails(problem: Exception) -> None:
    file = File(OLD)
    with pytest.raises((ConfigError, OSError)):
        apply_config(Client(load_error=problem), "m", file, two_instances())
    assert file.text == OLD and len(file.writes) == 2  # written, then restored


def test_the_previous_file_comes_back_when_the_live_config_differs() -> None:
    file = File(OLD)
    with pytest.raises(ConfigError, match="instance_group"):
        apply_config(Client(live=OLD), "m", file, two_instances())  # the server still runs one instance
    assert file.text == OLD


def test_a_stack_reload_replaces_the_client_load() -> None:
    reloaded: list[str] = []
    client = Client(live=config_text(two_instances()))
    apply_config(client, "m", File(OLD), two_instances(), reload=lambda name, cfg: reloaded.append(name))
    assert reloaded == ["m"] and client.loaded is None

"""The engine's cache defaults live in one place (servelab/llm/engine.py) and everything that starts the
engine starts the same one: the README's command, notebook 09 (EngineOptions, the lab's parameters) and
the compose stack; ``--help`` says what each cache flag costs in memory."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import yaml

from servelab.core.paths import REPO_ROOT
from servelab.lab.params import resolve
from servelab.llm import engine
from servelab.llm.server import COMPOSE_FILE, EngineOptions
from servelab.llm.validation import CB_BLOCK_SIZE, CB_MAX_BATCH_TOKENS, CB_NUM_BLOCKS, describe_cache
from tests.readme_commands import engine_command


def test_the_readme_command_and_notebook_09_start_the_same_engine() -> None:
    argv = engine_command()
    assert argv[1:4] == ["-m", "servelab.llm.engine", "artifacts/llm"]
    assert argv[4:] == EngineOptions().argv() == ["--batching", "continuous"]  # no cache flag: the defaults
    p = resolve("local", "quick", llm_kv_blocks=None, llm_max_batch=None)
    notebook = EngineOptions("continuous", max_batch=p.llm_max_batch, cb_num_blocks=p.llm_kv_blocks)
    assert notebook.argv() == argv[4:]
    # the cache experiment names only what it changes
    assert EngineOptions("continuous", cb_num_blocks=9).argv() == ["--batching", "continuous",
                                                                    "--cb-num-blocks", "9"]


def test_the_cli_defaults_are_the_labs_and_help_says_what_they_cost(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        engine.main(["--help"])
    text = " ".join(capsys.readouterr().out.split()).split("options:")[1]
    for flag, default in (("--cb-num-blocks", CB_NUM_BLOCKS), ("--cb-block-size", CB_BLOCK_SIZE),
                          ("--cb-max-batch-tokens", CB_MAX_BATCH_TOKENS)):
        said = text[text.index(flag + " "):]
        said = said[:said.index(" --", len(flag))]
        assert f"(default {default})" in said and "Memory:" in said, said


def test_the_compose_stack_starts_the_same_cache() -> None:
    command = yaml.safe_load((REPO_ROOT / COMPOSE_FILE).read_text())["services"]["llm_server"]["command"]
    flags = dict(zip(command[::2], command[1::2], strict=False)) | dict(zip(command[1::2], command[2::2],
                                                                           strict=False))
    assert flags["--cb-num-blocks"] == f"${{LLM_KV_BLOCKS:-{CB_NUM_BLOCKS}}}"
    assert flags["--cb-block-size"] == str(CB_BLOCK_SIZE)
    assert flags["--cb-max-batch-tokens"] == str(CB_MAX_BATCH_TOKENS)


def test_the_engine_says_what_its_cache_holds() -> None:
    """The lab's model: 4 layers, 4 KV heads of 64, float32: 8 KiB per token."""
    config = SimpleNamespace(num_hidden_layers=4, num_key_value_heads=4, num_attention_heads=4, head_dim=64,
                             hidden_size=256)
    line = describe_cache(config, torch.float32, CB_BLOCK_SIZE, CB_NUM_BLOCKS, CB_MAX_BATCH_TOKENS)
    assert line.startswith("KV cache: 48 blocks x 32 tokens = 1,536 tokens x 8 KiB = 12.0 MiB")
    assert "up to 512 tokens per forward pass" in line

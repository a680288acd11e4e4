"""The lab's small language model: a Llama-shaped causal LM built here, in the Hugging Face layout.

``python -m servelab.llm.model build`` (run by set-up) writes ``artifacts/llm/``: a byte-level BPE
tokenizer trained with ``tokenizers`` on text the build generates, and a 4-layer Llama (hidden 256,
vocabulary 512) trained for a few seconds on the same text, so what it generates looks like that text
rather than noise. Deterministic (fixed seed, one thread). Nothing is downloaded: ``SERVELAB_LLM``
names a Hub id or a local folder of a real model instead (resolved by :func:`model_source`).
Why these sizes: docs/decisions/2026-11-23-llm-serving.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from servelab.core.paths import ARTIFACTS_DIR, REPO_ROOT

LLM_DIR = ARTIFACTS_DIR / "llm"
LLM_VARIABLE = "SERVELAB_LLM"
BUILD_FORMAT = 2  # bump when the recipe changes, so set-up rebuilds (2: readable by transformers 4)
SEED = 9
VOCAB = 512
HIDDEN = 256
LAYERS = 4
HEADS = 4
CONTEXT = 1024
TRAIN_STEPS = 60
TRAIN_BATCH = 16
TRAIN_LEN = 64
SPECIALS = ["<pad>", "<s>", "</s>"]
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")

_SUBJECTS = ["the cook", "a student", "the server", "our model", "the queue", "a request", "the kitchen",
             "every batch", "the chef", "a token", "the scheduler", "the cache"]
_VERBS = ["waits for", "serves", "prepares", "measures", "stirs", "batches", "tastes", "streams",
          "bakes", "schedules", "slices", "decodes"]
_OBJECTS = ["the soup", "a long prompt", "fresh bread", "the next token", "twelve noodles", "the rice",
            "a short answer", "the dessert", "warm tea", "the salad", "every sequence", "the sauce"]
_ENDINGS = ["before noon", "at every step", "with care", "in small batches", "while others wait",
            "as fast as it can", "one by one", "for the whole table"]


def corpus(sentences: int = 4000, seed: int = SEED) -> list[str]:
    """Generated sentences the tokenizer and the model learn from (the same every build)."""
    rng = random.Random(seed)
    return [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_ENDINGS)}."
            for _ in range(sentences)]


def model_source() -> str:
    """What the engine serves: ``$SERVELAB_LLM`` (a Hub id or a path) if set, else the built model."""
    return os.environ.get(LLM_VARIABLE) or str(LLM_DIR)


def is_hub_id(source: str) -> bool:
    """``SERVELAB_LLM`` names a Hugging Face Hub model ("org/model"), not a path on this machine."""
    return bool(source) and not Path(source).exists()


def served_name() -> str:
    """The model name clients send (and the engine's argument, run from the repository root): the Hub
    id or path when ``SERVELAB_LLM`` is set, else the built model's folder relative to the checkout."""
    source = model_source()
    if is_hub_id(source):  # not a path to resolve
        return source
    try:
        return str(Path(source).resolve().relative_to(REPO_ROOT.resolve()))
    except ValueError:
        return source


def _manifest(directory: Path) -> dict[str, Any]:
    path = directory / "servelab.json"
    return json.loads(path.read_text()) if path.exists() else {}


def is_built(directory: Path = LLM_DIR) -> bool:
    return _manifest(directory).get("format") == BUILD_FORMAT and (directory / "model.safetensors").exists()


def build_tokenizer(texts: list[str]) -> Any:
    """A byte-level BPE tokenizer of ``VOCAB`` entries, as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build(directory: Path = LLM_DIR, steps: int = TRAIN_STEPS, quiet: bool = False) -> Path:
    """Build the tokenizer and the model into ``directory`` (Hugging Face layout); returns it."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    started = time.monotonic()
    torch.manual_seed(SEED)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same weights on every machine
    try:
        texts = corpus()
        tokenizer = build_tokenizer(texts)
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                             num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                             max_position_embeddings=CONTEXT, pad_token_id=tokenizer.pad_token_id,
                             bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                             tie_word_embeddings=True)
        model = LlamaForCausalLM(config)
        ids = tokenizer(" ".join(texts))["input_ids"]
        data = torch.tensor(ids[: len(ids) // TRAIN_LEN * TRAIN_LEN]).view(-1, TRAIN_LEN)
        optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model.train()
        loss = torch.tensor(float("nan"))
        for step in range(steps):
            batch = data[torch.randint(0, len(data), (TRAIN_BATCH,))]
            loss = model(input_ids=batch, labels=batch).loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if not quiet and (step + 1) % 20 == 0:
                print(f"  training the small LM: step {step + 1}/{steps}, loss {loss.item():.2f}", flush=True)
        model.eval()
        # sampling defaults of the engine: greedy, so a rerun gives the same text
        model.generation_config = GenerationConfig(do_sample=False, eos_token_id=tokenizer.eos_token_id,
                                                   pad_token_id=tokenizer.pad_token_id)
        directory.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        readable_by_transformers_4(directory)
        (directory / "servelab.json").write_text(json.dumps({
            "format": BUILD_FORMAT, "seed": SEED, "train_steps": steps, "final_loss": round(loss.item(), 3),
            "parameters": sum(p.numel() for p in model.parameters()),
            "build_seconds": round(time.monotonic() - started, 1)}, indent=1))
    finally:
        torch.set_num_threads(threads)
    return directory


def readable_by_transformers_4(directory: Path) -> None:
    """Let transformers 4 (vLLM's, docs/decisions/2026-11-23-vllm.md) read what transformers 5 saved: the
    tokenizer under the class name both know, the RoPE base and dtype where 4.x looks for them."""
    config_path, tokenizer_path = directory / "config.json", directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.setdefault("rope_theta", (config.get("rope_parameters") or {}).get("rope_theta", 10000.0))
    config.setdefault("torch_dtype", config.get("dtype", "float32"))
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer = json.loads(tokenizer_path.read_text())
    tokenizer["tokenizer_class"] = "PreTrainedTokenizerFast"
    tokenizer_path.write_text(json.dumps(tokenizer, indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servelab.llm.model", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    if os.environ.get(LLM_VARIABLE):
        print(f"{LLM_VARIABLE}={os.environ[LLM_VARIABLE]}: the engine serves that model; nothing to build")
        return 0
    if is_built() and not args.force:
        print(f"small LM up to date in {LLM_DIR}")
        return 0
    print(f"building the small LM into {LLM_DIR} (about half a minute)", flush=True)
    out = build()
    info = _manifest(out)
    print(f"built {out}: {info['parameters']:,} parameters, loss {info['final_loss']}, "
          f"{info['build_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

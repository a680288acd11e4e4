"""An answer's minimum length: its end-of-sequence token held back until it has ``min_tokens`` tokens
(``ignore_eos``: ``max_tokens``), as vLLM's ``min_tokens`` holds it back.

- **continuous batching**: transformers' batching takes only ``max_new_tokens`` and the EOS ids per
  request. :class:`GenerationState` gives transformers' handlers a batching manager whose batch has one
  more per-request logits processor (:class:`CBMinTokens`) and which passes each request's minimum (its
  generation config's ``min_new_tokens``, set by the front) with the request;
- **static batching**: :class:`RowMinTokens`, a ``generate`` logits processor with a minimum per row.

Relies on transformers 5.23's continuous-batching internals (pinned in constraints.txt): the per-request
logits-processor interface and the manager's processor list, read when its thread starts.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from transformers import ContinuousBatchingConfig, GenerationConfig, LogitsProcessor
from transformers.cli.serving.utils import CBGenerateManager
from transformers.cli.serving.utils import GenerationState as _TransformersGenerationState
from transformers.generation.continuous_batching.cb_logits_processors import ContinuousBatchingLogitsProcessor
from transformers.generation.continuous_batching.continuous_api import ContinuousBatchingManager


def eos_ids(config: GenerationConfig) -> list[int]:
    """The end-of-sequence ids a generation config names (one, several or none)."""
    eos = config.eos_token_id
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    return [int(i) for i in ids if int(i) >= 0]


def hold_back_eos(scores: torch.Tensor, rows: torch.Tensor, eos: Sequence[int]) -> torch.Tensor:
    """``scores`` (one row per sequence) with every EOS id at -inf in the rows ``rows`` (a bool mask)
    marks: those sequences cannot end yet."""
    if eos and bool(rows.any()):
        ids = torch.tensor(list(eos), device=scores.device)
        scores[rows.nonzero(as_tuple=True)[0][:, None], ids] = float("-inf")
    return scores


class CBMinTokens(ContinuousBatchingLogitsProcessor):
    """A per-request logits processor of transformers' continuous batching: a request's EOS ids are held
    back while it has fewer tokens than its ``min_tokens`` (its ``logit_processor_kwargs``)."""

    def __init__(self, eos: Sequence[int]) -> None:
        self.supported_kwargs: dict[str, type] = {"min_tokens": int}
        self.ignored_kwargs: tuple[str, ...] = ()
        self.eos = list(eos)

    def fill_defaults(self, int32_tensor: torch.Tensor) -> None:
        int32_tensor.fill_(0)

    def prepare_tensor_args(self, requests_with_new_token: list[Any]) -> torch.Tensor:
        left = [max(0, int(r.state.logit_processor_kwargs.get("min_tokens", 0)) - r.state.generated_len())
                for r in requests_with_new_token]
        return torch.tensor(left, dtype=torch.int32)

    def __call__(self, scores: torch.Tensor, tensor_arg: torch.Tensor) -> torch.Tensor:
        return hold_back_eos(scores, tensor_arg[: scores.size(0)] > 0, self.eos)


class _Batching(ContinuousBatchingManager):
    """transformers' continuous-batching manager with :class:`CBMinTokens` in its batch; a request's
    minimum is registered (``minimums``) under its id before the request is added."""

    def __init__(self, model: Any, generation_config: GenerationConfig,
                 continuous_batching_config: ContinuousBatchingConfig) -> None:
        super().__init__(model, generation_config, continuous_batching_config)
        self.minimums: dict[str, int] = {}
        processors = self.logit_processor  # read by the batch processor the thread makes at start()
        processors.logits_processor.append(CBMinTokens(eos_ids(generation_config)))
        processors.tensors_required += 1
        processors.supported_keys["min_tokens"] = int
        processors.do_processing = True

    def add_request(self, input_ids: list[int], request_id: str | None = None,
                    max_new_tokens: int | None = None, streaming: bool = False,
                    record_timestamps: bool = False, eos_token_id: int | list[int] | None = None,
                    **kwargs: Any) -> str | None:
        least = self.minimums.pop(request_id, 0) if request_id is not None else 0
        if least:
            kwargs["min_tokens"] = least
        return super().add_request(input_ids, request_id, max_new_tokens, streaming, record_timestamps,
                                   eos_token_id, **kwargs)


class _CBManager(CBGenerateManager):
    """transformers serve's continuous-batching manager, running :class:`_Batching` and telling it each
    request's minimum (the generation config's ``min_new_tokens``) before the request goes in."""

    _cb: _Batching | None

    def init_cb(self, model: Any, gen_config: GenerationConfig) -> None:
        if self._cb is not None:
            return
        shared = copy.deepcopy(gen_config)  # the batch's own settings: no request's minimum
        shared.min_new_tokens = None
        if shared.eos_token_id is None:
            shared.eos_token_id = -1  # as model.init_continuous_batching does: no EOS
        self._cb = _Batching(model, shared, self._cb_config or ContinuousBatchingConfig())
        self._cb.start()

    def _register(self, request_id: str, gen_config: GenerationConfig) -> None:
        if self._cb is not None and gen_config.min_new_tokens:
            self._cb.minimums[request_id] = int(gen_config.min_new_tokens)

    def generate_streaming(self, model: Any, processor: Any, inputs: dict[str, Any],
                           gen_config: GenerationConfig, request_id: str, response_parser: Any = None) -> Any:
        self._register(request_id, gen_config)
        return super().generate_streaming(model, processor, inputs, gen_config, request_id, response_parser)

    async def generate_non_streaming(self, model: Any, processor: Any, inputs: dict[str, Any],
                                     gen_config: GenerationConfig, request_id: str) -> Any:
        self._register(request_id, gen_config)
        return await super().generate_non_streaming(model, processor, inputs, gen_config, request_id)


class GenerationState(_TransformersGenerationState):
    """transformers serve's generation state whose continuous batching honours a request's minimum length."""

    def get_manager(self, model_id: str, use_cb: bool = False) -> Any:
        if use_cb and self._cb_manager is None:
            self._cb_manager = _CBManager(cb_config=self._cb_config)
            self._cb_model_id = model_id
        return super().get_manager(model_id, use_cb)


class RowMinTokens(LogitsProcessor):
    """``generate``'s logits processor for a padded batch: row ``i``'s EOS ids are held back until it has
    ``minimums[i]`` new tokens (the prompts, left-padded, are ``prompt_width`` wide)."""

    def __init__(self, minimums: Sequence[int], prompt_width: int, eos: Sequence[int]) -> None:
        self.minimums = torch.tensor(list(minimums))
        self.prompt_width, self.eos = prompt_width, list(eos)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        made = input_ids.shape[1] - self.prompt_width
        return hold_back_eos(scores, (self.minimums > made).to(scores.device), self.eos)  # type: ignore[return-value]


__all__ = ["CBMinTokens", "GenerationState", "RowMinTokens", "eos_ids", "hold_back_eos"]

"""An answer's end-of-sequence token is held back until its minimum length (servelab/llm/min_tokens.py):
per request in transformers' continuous batching, per row in the static batcher's padded batch."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from servelab.llm.min_tokens import CBMinTokens, RowMinTokens, eos_ids, hold_back_eos


def request(minimum: int | None, made: int) -> SimpleNamespace:
    kwargs = {} if minimum is None else {"min_tokens": minimum}
    state = SimpleNamespace(logit_processor_kwargs=kwargs, generated_len=lambda: made)
    return SimpleNamespace(state=state)


def test_eos_ids_from_a_generation_config() -> None:
    assert eos_ids(SimpleNamespace(eos_token_id=2)) == [2]  # type: ignore[arg-type]
    assert eos_ids(SimpleNamespace(eos_token_id=[2, 268])) == [2, 268]  # type: ignore[arg-type]
    assert eos_ids(SimpleNamespace(eos_token_id=None)) == []  # type: ignore[arg-type]
    assert eos_ids(SimpleNamespace(eos_token_id=-1)) == []  # type: ignore[arg-type]


def test_only_the_marked_rows_lose_their_eos() -> None:
    scores = torch.zeros(3, 6)
    out = hold_back_eos(scores, torch.tensor([True, False, True]), [2, 5])
    assert torch.isinf(out[0, [2, 5]]).all() and torch.isinf(out[2, [2, 5]]).all()
    assert not torch.isinf(out[1]).any() and not torch.isinf(out[0, [0, 1, 3, 4]]).any()


def test_continuous_batching_holds_eos_back_per_request() -> None:
    """The tensor argument is each request's tokens still to come before its EOS may; only those rows of
    the batch's scores lose their EOS ids."""
    processor = CBMinTokens([2])
    left = processor.prepare_tensor_args([request(10, 3), request(None, 3), request(10, 10), request(4, 0)])
    assert left.tolist() == [7, 0, 0, 4] and left.dtype == torch.int32
    stored = torch.zeros(8, dtype=torch.int32)  # the batch's argument row, longer than the batch
    processor.fill_defaults(stored)
    stored[:4] = left
    scores = processor(torch.zeros(4, 5), stored)
    assert torch.isinf(scores[:, 2]).tolist() == [True, False, False, True]
    assert processor.supported_kwargs == {"min_tokens": int}


def test_the_static_batch_holds_eos_back_per_row() -> None:
    """Row minimums 3, 0 and 1 with a 4-token-wide prompt: at each step, which rows may end."""
    processor = RowMinTokens([3, 0, 1], prompt_width=4, eos=[2])
    for made, expected in ((0, [True, False, True]), (1, [True, False, False]), (3, [False, False, False])):
        scores = processor(torch.zeros(3, 4 + made, dtype=torch.long), torch.zeros(3, 5))  # type: ignore[arg-type]
        assert torch.isinf(scores[:, 2]).tolist() == expected, made

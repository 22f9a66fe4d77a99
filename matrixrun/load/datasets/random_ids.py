"""`random`: seeded token-id prompts, with SGLang's `range_ratio` (each length uniform in
[max(1, int(ratio x len)), len], inputs and outputs alike). At ratio 1 the prompts are exactly
`prompts.make_prompts`' (what every earlier run sent); below 1, prompt i is the first
`length_i` ids of the same row, so prompts stay prefix-stable in the count."""

from __future__ import annotations

import numpy as np

from matrixrun.load.datasets import Cell, DatasetConfig, Request
from matrixrun.load.prompts import make_prompts
from matrixrun.load.text_prompts import load_tokenizer, to_text

# streams of the lengths, apart from the prompts' (prompts.py uses 0-2)
_STREAM_INPUT_LENS = 5
_STREAM_OUTPUT_LENS = 6


def random_lens(seed: int, stream: int, count: int, full: int, ratio: float) -> list[int]:
    """SGLang's compute_random_lens, seeded: `count` lengths in [max(1, int(full*ratio)), full]."""
    if ratio >= 1:
        return [full] * count
    rng = np.random.default_rng([stream, seed])
    lens: list[int] = rng.integers(max(int(full * ratio), 1), full + 1, size=count).tolist()
    return lens


def random_requests(ds: DatasetConfig, cell: Cell) -> list[Request]:
    ids = make_prompts(cell.seed, cell.count, cell.input_len, ds.ids)
    ins = random_lens(cell.seed, _STREAM_INPUT_LENS, cell.count, cell.input_len, ds.range_ratio)
    outs = random_lens(cell.seed, _STREAM_OUTPUT_LENS, cell.count, cell.output_len, ds.range_ratio)
    if not cell.text:
        return [Request(p[:n], n, o) for p, n, o in zip(ids, ins, outs, strict=True)]
    if not cell.tokenizer:
        raise ValueError("text prompts need a tokenizer")
    tok = load_tokenizer(cell.tokenizer)
    out = []
    for p, n, o in zip(ids, ins, outs, strict=True):
        text, count = to_text(tok, p[:n], n)
        out.append(Request(text, count, o))
    return out

"""A cell's requests, arrivals and warm-up, whatever the dataset: the one entry the load client
calls (`client.measure_share`), cached per process so each client process builds them once."""

from __future__ import annotations

from functools import lru_cache

from matrixrun.load.datasets import Cell, DatasetConfig, Request
from matrixrun.load.datasets.random_ids import random_requests
from matrixrun.load.datasets.shared_prefix import shared_prefix_requests
from matrixrun.load.datasets.sharegpt import sharegpt_requests
from matrixrun.load.datasets.trace import trace_offsets, trace_requests
from matrixrun.load.prompts import arrival_offsets, make_warmup_prompts
from matrixrun.load.text_prompts import load_tokenizer, to_text

_BUILDERS = {
    "random": random_requests,
    "sharegpt": sharegpt_requests,
    "shared_prefix": shared_prefix_requests,
    "trace": trace_requests,
}


@lru_cache(maxsize=8)
def requests_for(ds: DatasetConfig, cell: Cell) -> tuple[Request, ...]:
    """The cell's requests in index order: request i is the same in every process and arm."""
    return tuple(_BUILDERS[ds.kind](ds, cell))


def arrivals(ds: DatasetConfig, cell: Cell, rate: float, burstiness: float = 1.0) -> list[float]:
    """When each request is due (seconds after the start): a trace's own schedule, else
    Poisson (or gamma) arrivals at `rate`, all at once for an infinite one."""
    if ds.kind == "trace":
        return trace_offsets(ds, cell.count)
    return arrival_offsets(cell.seed, cell.count, rate, burstiness)


def warmup_for(ds: DatasetConfig, cell: Cell, n: int, output_len: int) -> list[Request]:
    """`n` unmeasured requests: seeded ids from the warm-up stream (never a measured prompt,
    so no prefix cache is warmed for them), at the cell's lengths (a dataset's: its requests'
    lengths in turn), `output_len` tokens out."""
    if ds.kind == "random":
        lens = [cell.input_len] * n
    else:
        measured = requests_for(ds, cell)
        lens = [measured[i % len(measured)].prompt_tokens for i in range(n)] if measured else []
    if not lens:
        return []
    rows = make_warmup_prompts(cell.seed, n, max(lens), ds.ids)
    ids = [row[:length] for row, length in zip(rows, lens, strict=True)]
    if not cell.text:
        return [Request(p, len(p), output_len) for p in ids]
    if not cell.tokenizer:
        raise ValueError("text prompts need a tokenizer")
    tok = load_tokenizer(cell.tokenizer)
    return [Request(*to_text(tok, p, len(p)), output_len) for p in ids]

"""`trace`: replay of a request trace in the public Mooncake format (FAST'25 release): one
JSON object a line, `timestamp` (ms), `input_length`, `output_length`, and `hash_ids`, the
prompt's blocks of 512 tokens, where equal ids are equal blocks (shared prefixes).

Replay keeps the schedule: request i is due `(timestamp_i - timestamp_0) / 1000 x time_scale`
seconds after the cell starts (`time_scale` 2 replays at half the rate, like SGLang's
`--mooncake-slowdown-factor`); the cell's concurrency stays a cap on requests in flight. The
records are taken in timestamp order (stable), the first `count` of them.

The trace has no text, so prompts are token ids: each hash id is one block of 512 seeded ids
within the model's vocabulary (the same id gives the same block in every request, arm and
cell: the cache hits the trace records), concatenated and cut to `input_length`; a prompt
longer than its blocks is completed with ids of its own. SGLang's own mooncake reader sends
"hi"-filled chat text instead and ignores `input_length`; these prompts have the lengths and the
sharing the trace records.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from matrixrun.core.errors import InputError
from matrixrun.core.mooncake import BLOCK
from matrixrun.load.datasets import Cell, DatasetConfig, Request
from matrixrun.load.text_prompts import load_tokenizer, to_text

_STREAM_BLOCK = 12
_STREAM_TAIL = 13


@lru_cache(maxsize=2)
def records(path: str) -> list[tuple[float, int, int, tuple[int, ...]]]:
    """(timestamp ms, input_length, output_length, hash_ids) per record, in timestamp order."""
    try:
        lines = Path(path).expanduser().read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(
            f"cannot read the trace {path} ({exc.strerror}); check workload.path"
        ) from None
    out = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            out.append(_record(path, n, line))
    return sorted(out, key=lambda r: r[0])


def _record(path: str, n: int, line: str) -> tuple[float, int, int, tuple[int, ...]]:
    try:
        data: Any = json.loads(line)
        ts, ins, outs = (
            float(data["timestamp"]),
            int(data["input_length"]),
            int(data["output_length"]),
        )
        hashes = tuple(int(h) for h in data.get("hash_ids", []))
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"{path}:{n}: not a Mooncake trace record ({type(exc).__name__}: {exc}); each line "
            "needs timestamp, input_length, output_length (and hash_ids)"
        ) from None
    if ins < 1 or outs < 1 or any(h < 0 for h in hashes):
        raise InputError(f"{path}:{n}: lengths must be at least 1 and hash_ids not negative")
    return ts, ins, outs, hashes


def _usable(ds: DatasetConfig, count: int) -> list[tuple[float, int, int, tuple[int, ...]]]:
    assert ds.path is not None
    rows = records(ds.path)
    if len(rows) < count:
        raise InputError(
            f"the trace {ds.path} has {len(rows)} requests and a cell needs {count}; lower "
            "workload.num_prompts (or prompts_per_concurrency)"
        )
    return rows[:count]


def trace_offsets(ds: DatasetConfig, count: int) -> list[float]:
    """When each request is due, in seconds after the cell starts (module docstring)."""
    rows = _usable(ds, count)
    if not rows:
        return []
    t0 = rows[0][0]
    return [(ts - t0) / 1000.0 * ds.time_scale for ts, _, _, _ in rows]


def trace_requests(ds: DatasetConfig, cell: Cell) -> list[Request]:
    blocks: dict[int, list[int]] = {}

    def block(h: int) -> list[int]:
        if h not in blocks:
            rng = np.random.default_rng([_STREAM_BLOCK, cell.seed, h])
            blocks[h] = rng.integers(ds.id_low, ds.id_high, size=BLOCK).tolist()
        return blocks[h]

    tok = load_tokenizer(cell.tokenizer) if cell.text and cell.tokenizer else None
    out = []
    for i, (_, ins, outs, hashes) in enumerate(_usable(ds, cell.count)):
        ids = [t for h in hashes[: -(-ins // BLOCK)] for t in block(h)][:ins]
        if len(ids) < ins:
            rng = np.random.default_rng([_STREAM_TAIL, cell.seed, i])
            ids += rng.integers(ds.id_low, ds.id_high, size=ins - len(ids)).tolist()
        if tok is None:
            out.append(Request(ids, ins, outs))
        else:
            text, n = to_text(tok, ids, ins)
            out.append(Request(text, n, outs))
    return out

"""`sharegpt`: conversations from a local ShareGPT-format JSON file, as SGLang's and vLLM's
benchmark clients read them, never downloaded.

The file is a list of `{"conversations": [{"from": "human", "value": ...}, {"from": "gpt",
"value": ...}, ...]}` (`conversation` is accepted too, as SGLang does). Conversations with
fewer than two turns are dropped; the prompt is the first human turn, the completion the turn
after it, and the output length is the completion's token count unless `output_len` is given
(in the workload or swept). The order is a seeded shuffle (the same for every arm and cell), and
conversations are taken in it until the cell has enough that pass the filter:

- `sglang` (sample_sharegpt_requests): prompt or output below 2 tokens; prompt + output above
  `context_len` when it is given (`--sharegpt-context-len`).
- `vllm` (is_valid_sequence): prompt or output below 4 tokens (the output check skipped when
  the output length is fixed); prompt above 1024; prompt + output above 2048.

Counts are the model's tokenizer's, with its special tokens (BOS) as `tokenizer.encode` gives
them in both clients; the prompt goes as those ids (or as its text with `prompt_format: text`),
so the server sees exactly the counted tokens.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from matrixrun.core.errors import InputError
from matrixrun.load.datasets import Cell, DatasetConfig, Request
from matrixrun.load.text_prompts import load_tokenizer

_STREAM_SHUFFLE = 7


@lru_cache(maxsize=2)
def conversations(path: str) -> list[tuple[str, str]]:
    """(first human turn, the reply after it) of each usable conversation, in file order."""
    try:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"cannot read the ShareGPT file {path} ({exc}); workload.path must name a local "
            "ShareGPT-format JSON file (a list of {conversations: [...]})"
        ) from None
    if not isinstance(data, list):
        raise InputError(f"{path} is not a ShareGPT-format file: expected a JSON list")
    pairs = []
    for item in data:
        turns = (
            item.get("conversations", item.get("conversation")) if isinstance(item, dict) else None
        )
        pair = _first_exchange(turns) if isinstance(turns, list) and len(turns) >= 2 else None
        if pair is not None:
            pairs.append(pair)
    return pairs


def _first_exchange(turns: list[Any]) -> tuple[str, str] | None:
    for i, turn in enumerate(turns[:-1]):
        if isinstance(turn, dict) and turn.get("from") in ("human", "user"):
            reply = turns[i + 1]
            if isinstance(reply, dict) and isinstance(turn.get("value"), str):
                value = reply.get("value")
                return (turn["value"], value) if isinstance(value, str) else None
            return None
    return None


def keep(ds: DatasetConfig, prompt_len: int, output_len: int) -> bool:
    """Whether a conversation passes the chosen client's length filter (module docstring)."""
    if ds.length_filter == "vllm":
        short = prompt_len < 4 or (not ds.fixed_output and output_len < 4)
        return not (short or prompt_len > 1024 or prompt_len + output_len > 2048)
    if prompt_len < 2 or output_len < 2:
        return False
    return not (ds.context_len and prompt_len + output_len > ds.context_len)


def sharegpt_requests(ds: DatasetConfig, cell: Cell) -> list[Request]:
    assert ds.path is not None and ds.tokenizer is not None
    pairs = conversations(ds.path)
    tok = load_tokenizer(ds.tokenizer, "dataset sharegpt")
    order = np.random.default_rng([_STREAM_SHUFFLE, cell.seed]).permutation(len(pairs))
    out: list[Request] = []
    for j in order.tolist():
        if len(out) == cell.count:
            break
        prompt, completion = pairs[j]
        ids: list[int] = tok.encode(prompt).ids
        reply = cell.output_len if ds.fixed_output else len(tok.encode(completion).ids)
        if keep(ds, len(ids), reply):
            out.append(Request(prompt if cell.text else ids, len(ids), reply))
    if len(out) < cell.count:
        raise InputError(
            f"the ShareGPT file {ds.path} has {len(out)} conversations that pass the "
            f"{ds.length_filter} length filter, and a cell needs {cell.count}; lower "
            "workload.num_prompts (or prompts_per_concurrency) or use a larger file"
        )
    return out

"""`shared_prefix`: SGLang's generated-shared-prefix workload (bench_serving's
`generated-shared-prefix`, sample_generated_shared_prefix_requests), so a prefix cache and
`--schedule-policy lpm` have something to find.

`groups` system prompts of `system_len` tokens; each group has `prompts_per_group` prompts, its
system prompt followed by a question of `question_len` tokens; `output_len` tokens out. With
`range_ratio` below 1 each system prompt, question and output length is drawn in [ratio x len,
len] as SGLang does. The groups x prompts_per_group requests are shuffled once by the seed (as
SGLang shuffles them) and a cell sends the first `count` of that order, so every arm sees the
same interleaving of groups.

As token ids (the default) a group's prompts share the system prompt's exact ids, so a radix
cache can hit on every one after the first. SGLang builds text (random vocabulary tokens
decoded, "\\n\\n" between the two parts); with `prompt_format: text` so does this (each part
decoded from the same seeded ids, counted with the tokenizer), and the shared text prefix
tokenizes to a shared token prefix up to the joint.
"""

from __future__ import annotations

import numpy as np

from matrixrun.core.errors import InputError
from matrixrun.load.datasets import Cell, DatasetConfig, Request
from matrixrun.load.datasets.random_ids import random_lens
from matrixrun.load.text_prompts import load_tokenizer, to_text

_STREAM_SYSTEM = 8
_STREAM_QUESTION = 9
_STREAM_ORDER = 10
_STREAM_LENS = 11


def _ids(ds: DatasetConfig, key: list[int], length: int) -> list[int]:
    rng = np.random.default_rng(key)
    drawn: list[int] = rng.integers(ds.id_low, ds.id_high, size=length).tolist()
    return drawn


def shared_prefix_requests(ds: DatasetConfig, cell: Cell) -> list[Request]:
    groups, per = ds.groups, ds.prompts_per_group
    total = groups * per
    if cell.count > total:
        raise InputError(
            f"shared_prefix makes {total} prompts (groups x prompts_per_group) and a cell needs "
            f"{cell.count}; raise workload.groups or prompts_per_group, or lower num_prompts"
        )
    seed = cell.seed
    sys_lens = random_lens(seed, _STREAM_LENS, groups, ds.system_len, ds.range_ratio)
    q_lens = random_lens(seed, _STREAM_LENS + 100, total, ds.question_len, ds.range_ratio)
    out_lens = random_lens(seed, _STREAM_LENS + 200, total, cell.output_len, ds.range_ratio)
    order = np.random.default_rng([_STREAM_ORDER, seed]).permutation(total).tolist()[: cell.count]
    systems: dict[int, list[int]] = {}
    tok = load_tokenizer(cell.tokenizer) if cell.text and cell.tokenizer else None
    texts: dict[int, str] = {}
    out = []
    for k in order:
        g = k // per
        if g not in systems:
            systems[g] = _ids(ds, [_STREAM_SYSTEM, seed, g], sys_lens[g])
        question = _ids(ds, [_STREAM_QUESTION, seed, k], q_lens[k])
        if tok is None:
            prompt = systems[g] + question
            out.append(Request(prompt, len(prompt), out_lens[k]))
            continue
        if g not in texts:
            texts[g] = to_text(tok, systems[g], len(systems[g]))[0]
        text = f"{texts[g]}\n\n{to_text(tok, question, len(question))[0]}"
        out.append(Request(text, len(tok.encode(text, add_special_tokens=False).ids), out_lens[k]))
    return out

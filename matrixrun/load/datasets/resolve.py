"""From the spec to a cell's `DatasetConfig`, and the check that runs before any launch.

Why here and not in the spec loader: `matrixrun validate` runs where the model is not (a PR job,
a laptop), so a missing model folder cannot be a spec error; a run, though, must not start a
server it would then crash with out-of-range ids or a workload it cannot build. `check_workload`
builds what every cell would send, once, before the first launch, and says in one sentence
what is missing, where, and what to set.

The vocabulary rule (docs/spec.md, `model.vocab_size`): token-id prompts are drawn within the
vocabulary read from `model.tokenizer`, then `model.path` (`vocab.py`); `model.vocab_size`
gives it where neither has readable files. A real run with neither is refused. A rehearsal
with neither draws from the simulator's own vocabulary (the historical [1000, 30000): the
simulator accepts any id), so rehearsals of specs whose model exists only on the GPU node keep
working; where the files are readable a rehearsal uses them and sends exactly the real run's
prompts. Text prompts (`engine.prompt_format: text`) are mapped into the tokenizer's own
ordinary ids (`text_prompts.py`), so they need the tokenizer, not the vocabulary.
"""

from __future__ import annotations

from matrixrun.core.errors import InputError
from matrixrun.load.datasets import Cell, DatasetConfig
from matrixrun.load.datasets.build import requests_for
from matrixrun.load.text_prompts import load_tokenizer
from matrixrun.load.vocab import IdRange, Vocab, id_range, read_vocab, unreadable
from matrixrun.spec.models import ModelSpec, Spec
from matrixrun.spec.points import combinations, output_len_given


def ids_for(model: ModelSpec, prompt_format: str, required: bool) -> IdRange:
    """The token ids `model`'s prompts are drawn from (the module docstring gives the rule);
    an unreadable vocabulary is an error when `required`, else the default range."""
    if prompt_format == "text":
        return IdRange()
    read = read_vocab(model.tokenizer, model.path)
    if model.vocab_size is not None:
        special = read.special if read is not None else frozenset()
        return id_range(Vocab(model.vocab_size, special, "model.vocab_size"))
    if read is not None:
        return id_range(read)
    if not required:
        return IdRange()
    raise InputError(unreadable([p for p in (model.tokenizer, model.path) if p]))


def dataset_for(spec: Spec, model: ModelSpec, required: bool = False) -> DatasetConfig:
    """The `DatasetConfig` of every cell of `model` (identical for every arm). The runner
    calls it with `required` false: `check_workload` has refused a real run that needs a
    vocabulary it cannot read, before any launch."""
    w = spec.workload
    text = spec.engine.prompt_format == "text"
    # a ShareGPT prompt's ids are its tokenizer's own: it draws none
    sharegpt = w.dataset == "sharegpt"
    ids = IdRange() if sharegpt else ids_for(model, spec.engine.prompt_format, required)
    groups, per, system, question = w.shared_prefix_shape()
    tokenizer = model.tokenizer or model.path if sharegpt or text else None
    return DatasetConfig(
        kind=w.dataset,
        id_low=ids.low,
        id_high=ids.high,
        range_ratio=w.range_ratio,
        path=w.path,
        tokenizer=tokenizer,
        fixed_output=output_len_given(spec),
        length_filter=w.length_filter,
        context_len=w.context_len,
        groups=groups,
        prompts_per_group=per,
        system_len=system,
        question_len=question,
        time_scale=w.time_scale or 1.0,
    )


def check_workload(spec: Spec, rehearse: bool) -> None:
    """Before any launch: every model's cells can be built (vocabulary read, the dataset's
    file and tokenizer loaded, enough requests for the largest cell); raises `InputError`
    with one sentence otherwise. Builds the largest cell once (the others are its prefixes)."""
    text = spec.engine.prompt_format == "text"
    w = spec.workload
    largest = max(w.prompts_for(int(c["concurrency"])) for c in combinations(spec))
    for model in spec.models:
        ds = dataset_for(spec, model, required=not rehearse)
        if text:
            load_tokenizer(model.tokenizer or model.path)
        if ds.kind == "random":
            continue  # seeded ids (or their text): nothing more to read
        cell = Cell(w.seed, largest, w.input_len, w.output_len, text, ds.tokenizer)
        requests_for(ds, cell)

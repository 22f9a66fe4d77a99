"""What a cell sends: the workload's requests, identical for every arm, built the same way in
every client process from a small description (`DatasetConfig`) and the cell's sizes.

Why a description and not the prompts: a cell's `LoadConfig` is pickled to each client process
(`multi.py`); a few hundred bytes travel instead of megabytes of token ids, and every process
builds the same requests from the same seed (files and tokenizers are read once per process,
cached). Request i never depends on how many a cell draws, so a bigger cell extends a smaller
one instead of reshuffling it.

Kinds (`workload.dataset`; docs/spec.md):

- `random`: token ids (`random_ids.py`) of `input_len` tokens, or between `range_ratio` x
  `input_len` and `input_len` (outputs likewise), SGLang's `--random-range-ratio`.
- `sharegpt`: a local ShareGPT-format file (`sharegpt.py`), SGLang's and vLLM's filters.
- `shared_prefix`: SGLang's generated shared prefix (`shared_prefix.py`): groups of prompts
  that share a system prompt's exact token ids, so a prefix cache has something to find.
- `trace`: a Mooncake-format trace (`trace.py`): lengths, shared 512-token blocks and arrival
  times from the file.

Every kind sends token ids by default (the server sees exactly the counted tokens); with
`prompt_format: text` they go as text and are counted with the model's tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from matrixrun.load.vocab import DEFAULT_HIGH, DEFAULT_LOW, IdRange

DatasetKind = Literal["random", "sharegpt", "shared_prefix", "trace"]


class DatasetConfig(BaseModel):
    """How a cell's requests are made (everything but the cell's own sizes and seed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: DatasetKind = "random"
    id_low: int = Field(DEFAULT_LOW, ge=0, description="lowest token id drawn (inclusive)")
    id_high: int = Field(DEFAULT_HIGH, gt=0, description="highest token id drawn (exclusive)")
    range_ratio: float = Field(1.0, gt=0, le=1)
    path: str | None = Field(None, description="sharegpt, trace: the local file")
    tokenizer: str | None = Field(None, description="tokenizer.json (or folder), text datasets")
    fixed_output: bool = Field(False, description="sharegpt: output_len replaces reply lengths")
    length_filter: Literal["sglang", "vllm"] = "sglang"
    context_len: int | None = None
    groups: int = 64
    prompts_per_group: int = 16
    system_len: int = 2048
    question_len: int = 128
    time_scale: float = Field(1.0, gt=0, description="trace: multiplies its time offsets")

    @property
    def ids(self) -> IdRange:
        return IdRange(self.id_low, self.id_high)


@dataclass(frozen=True)
class Request:
    """One request as the client sends it: the prompt (token ids, or text for text prompts),
    its token count, and the output tokens asked for."""

    prompt: list[int] | str
    prompt_tokens: int
    output_len: int


@dataclass(frozen=True)
class Cell:
    """The sizes a cell gives a dataset (a trace or ShareGPT file ignores the lengths)."""

    seed: int
    count: int
    input_len: int
    output_len: int
    #: Send text (counted with the tokenizer) instead of token ids.
    text: bool = False
    #: The tokenizer for text prompts when the dataset has none of its own.
    tokenizer: str | None = None

"""What a cell sends: the workload's requests, identical for every arm, built the same way in
every client process from a small description (`DatasetConfig`) and the cell's sizes.

Why a description and not the prompts: a cell's `LoadConfig` is pickled to each client process
(`multi.py`); a few hundred bytes travel instead of megabytes of token ids, and every process
builds the same requests from the same seed (files and tokenizers are read once per process,
cached). Prompt i never depends on how many prompts a cell draws, so a bigger cell extends a
smaller one instead of reshuffling it.

Kinds (`workload.dataset`):

- `random`: token ids of `input_len` tokens (`random.py`), or between `range_ratio` ×
  `input_len` and `input_len` (and the same for outputs), as SGLang's `--random-range-ratio`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from matrixrun.load.vocab import DEFAULT_HIGH, DEFAULT_LOW, IdRange

DatasetKind = Literal["random"]


class DatasetConfig(BaseModel):
    """How a cell's requests are made (everything but the cell's own sizes and seed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: DatasetKind = "random"
    id_low: int = Field(DEFAULT_LOW, ge=0, description="lowest token id drawn (inclusive)")
    id_high: int = Field(DEFAULT_HIGH, gt=0, description="highest token id drawn (exclusive)")
    range_ratio: float = Field(1.0, gt=0, le=1)

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

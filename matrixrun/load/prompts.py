"""Random token-id prompts of exact lengths, reproducible from a seed.

No tokenizer is needed: prompts are sent as token ids (`input_ids` for SGLang's native API, a
list of ints as `prompt` for OpenAI completions), so the server sees exactly `input_len` prompt
tokens. The same (seed, count, length) gives the same prompts on every machine, arm and run, so
arms are compared on identical work; prompt i does not depend on how many prompts are drawn,
so a cell with more prompts extends, rather than reshuffles, a smaller one.

Ids are drawn uniformly from an `IdRange` within the model's vocabulary (`vocab.py` reads it
and says why: SGLang does not check input ids, and one out of range kills its scheduler). The
default, [`VOCAB_LOW`, `VOCAB_HIGH`), is the range for every vocabulary of 32,000 tokens or
more: special tokens sit at the two ends of every common vocabulary (BOS/EOS/PAD and
byte-fallback tokens at 0..~260 in Llama/Mistral-style vocabularies; chat and tool markers at
the top, e.g. Llama-3 128000+, Qwen/GLM 151000+), so `ignore_eos` generation runs its full
length and the prompt does not trip chat-template or image-token handling. A smaller
vocabulary gets the same range scaled down.

Measured and warmup prompts come from independent streams of the same seed, so warmup never
pre-fills the server's prefix cache with a measured prompt.
"""

from __future__ import annotations

import numpy as np

from matrixrun.load.vocab import DEFAULT_HIGH, DEFAULT_IDS, DEFAULT_LOW, IdRange

#: Lowest token id used by default (inclusive): above every low special/byte-fallback id.
VOCAB_LOW = DEFAULT_LOW
#: Highest token id used by default (exclusive): below every model's added/special tokens.
VOCAB_HIGH = DEFAULT_HIGH

# Independent random streams derived from one user seed.
_STREAM_MEASURED = 0
_STREAM_WARMUP = 1
_STREAM_ARRIVALS = 2


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([stream, seed])


def make_prompts(seed: int, count: int, length: int, ids: IdRange = DEFAULT_IDS) -> list[list[int]]:
    """`count` prompts of exactly `length` token ids from `ids`: the measured prompts for
    `seed`."""
    return _draw(_rng(seed, _STREAM_MEASURED), count, length, ids)


def make_warmup_prompts(
    seed: int, count: int, length: int, ids: IdRange = DEFAULT_IDS
) -> list[list[int]]:
    """Warmup prompts: same distribution as the measured ones, disjoint random stream."""
    return _draw(_rng(seed, _STREAM_WARMUP), count, length, ids)


def _draw(rng: np.random.Generator, count: int, length: int, span: IdRange) -> list[list[int]]:
    if count < 0 or length < 1:
        raise ValueError(f"need count >= 0 and length >= 1, got {count} and {length}")
    ids = rng.integers(span.low, span.high, size=(count, length), dtype=np.int64)
    rows: list[list[int]] = ids.tolist()
    return rows


def arrival_offsets(
    seed: int, count: int, request_rate: float, burstiness: float = 1.0
) -> list[float]:
    """When each request becomes due, in seconds after the benchmark starts.

    A Poisson process of `request_rate` requests/s (exponential gaps, the first request at 0,
    as bench_serving sends its first request at once); all zeros for an infinite rate. With
    `burstiness` other than 1, gamma gaps of that shape and the same mean (vLLM's
    `--burstiness`: below 1 burstier, above 1 more regular). Absolute offsets rather than gaps
    let the dispatcher sleep until each one, so its own scheduling delays do not accumulate
    into a lower rate.
    """
    if count == 0:
        return []
    if request_rate == float("inf"):
        return [0.0] * count
    if not request_rate > 0 or not burstiness > 0:
        raise ValueError(
            f"request_rate and burstiness must be > 0, got {request_rate} and {burstiness}"
        )
    rng = _rng(seed, _STREAM_ARRIVALS)
    if burstiness == 1.0:
        gaps = rng.exponential(1.0 / request_rate, size=count - 1)
    else:
        gaps = rng.gamma(burstiness, 1.0 / (request_rate * burstiness), size=count - 1)
    offsets: list[float] = [0.0, *np.cumsum(gaps).tolist()]
    return offsets

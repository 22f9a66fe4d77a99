"""Text prompts of exact token counts, for servers that take text only.

Some OpenAI-compatible servers (`transformers serve`, several hosted APIs) refuse token-id
prompts. The workload must stay the same as with ids: the same reproducible random prompts,
of `input_len` tokens as the model counts them. So the token-id prompts of `prompts.py` are
mapped into the tokenizer's ordinary vocabulary, decoded to text, and re-encoded; since
decode-then-encode does not round-trip in general (merges across token boundaries), the text
is trimmed to `input_len` tokens and checked again, a few times. What comes out is recorded
with the token count the tokenizer gives it, and the client prefers the server's own count
(`usage.prompt_tokens`) when the server reports one.

The tokenizer is the model's `tokenizer.json` (the Hugging Face `tokenizers` format that nearly
every model ships), read with the `tokenizers` package, a small Rust library, not with
transformers: the harness stays light and never imports an engine.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError

#: Tries at trimming a decoded text to the wanted token count before taking the closest.
_TRIES = 4


def tokenizer_file(path: str, needs: str = "prompt_format text") -> Path:
    """`path` itself when it is a file, else `path/tokenizer.json`; one sentence if missing."""
    p = Path(path).expanduser()
    candidate = p if p.is_file() else p / "tokenizer.json"
    if not candidate.is_file():
        raise InputError(
            f"{needs} needs the model's tokenizer.json, and {candidate} does not "
            "exist; set model.tokenizer to the file (or its folder)"
        )
    return candidate


@lru_cache(maxsize=4)
def load_tokenizer(path: str, needs: str = "prompt_format text") -> Any:
    """The `tokenizers` Tokenizer at `path` (a tokenizer.json or its folder), read once per
    process; `needs` names what needs it in the sentence a missing one gets."""
    try:
        from tokenizers import Tokenizer  # optional (matrixrun[text]): imported when used
    except ImportError:
        raise InputError(
            f"{needs} needs the `tokenizers` package: pip install 'matrixrun[text]'"
        ) from None
    try:
        return Tokenizer.from_file(str(tokenizer_file(path, needs)))
    except InputError:
        raise
    except Exception as exc:  # the library raises a bare Exception on a bad file
        raise InputError(f"cannot read the tokenizer at {path}: {exc}") from None


def _ordinary_range(tok: Any) -> tuple[int, int]:
    """[low, high) ids that are ordinary tokens: above every added/special token at the low
    end (BOS, EOS, PAD sit there in trained tokenizers), below the vocabulary's end."""
    size = int(tok.get_vocab_size(with_added_tokens=False))
    added = [int(i) for i in tok.get_added_tokens_decoder()]
    low = max((i + 1 for i in added if i < size // 2), default=0)
    if size - low < 2:
        raise InputError(f"the tokenizer has only {size} tokens; it cannot make prompts")
    return low, size


def to_text(tok: Any, ids: list[int], length: int) -> tuple[str, int]:
    """Text that `tok` encodes to (about) `length` tokens, from seed ids; (text, its count)."""
    low, high = _ordinary_range(tok)
    span = high - low
    mapped = [low + (i % span) for i in ids[:length]]
    text: str = tok.decode(mapped)
    best = (text, len(tok.encode(text, add_special_tokens=False).ids))
    for _ in range(_TRIES):
        enc = tok.encode(text, add_special_tokens=False).ids
        n = len(enc)
        if abs(n - length) < abs(best[1] - length):
            best = (text, n)
        if n == length:
            return text, n
        if n > length:
            text = tok.decode(enc[:length])
        else:  # merges shortened it: extend with more of the seed's tokens, cycled
            extra = [low + ((i * 7919 + n) % span) for i in ids[: length - n]]
            text = tok.decode(enc + extra)
    return best


def text_prompts(tokenizer: str, id_prompts: list[list[int]], length: int) -> list[tuple[str, int]]:
    """Each token-id prompt as text of `length` tokens of `tokenizer`: (text, token count)."""
    tok = load_tokenizer(tokenizer)
    return [to_text(tok, ids, length) for ids in id_prompts]

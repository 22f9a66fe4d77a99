"""The model's vocabulary, read from its files, and the token ids prompts may be drawn from.

Why: SGLang does not check `input_ids` against the vocabulary. An id at or above the
embedding's size kills its scheduler (`IndexError` in the embedding) and the server tears its
whole process tree down, so every cell of a model with a small vocabulary (a 2,048-token test
model) fails. Ids are therefore drawn within the model's own vocabulary, read without loading
the model or importing an engine:

- `config.json`'s `vocab_size` (the embedding's rows: what a server will index), also nested
  under `text_config`, `llm_config` or `language_config` for multimodal configs;
- `tokenizer.json` (the Hugging Face `tokenizers` format): its model's vocabulary and its
  `added_tokens` (ids and which are special);
- `tokenizer_config.json`'s `added_tokens_decoder` (the special ids transformers knows).

Where both a config and a tokenizer give a size, the smaller is used (a padded embedding has
rows no token maps to; a tokenizer larger than the embedding would crash the server).

The safe range (`id_range`): the historical [1000, 30000) for vocabularies of 32,000 tokens or
more (so prompts for every model we target stay exactly what they were), scaled by
size / 32,000 below that (2,048 tokens: [64, 1920)): clear of the byte-fallback and control
tokens at the low end and of the added tokens at the top. Where the tokenizer names its
special/added ids, the range also moves above every one of them in the lower half of the
vocabulary and below every one in the upper half, so a prompt never holds one (no early EOS
under `ignore_eos`, no chat or image markers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError

#: The range used for every vocabulary of at least `REFERENCE_SIZE` tokens (and, in a
#: rehearsal, when the model's vocabulary cannot be read: the simulator's own).
DEFAULT_LOW = 1000
DEFAULT_HIGH = 30000
#: Below this size the default range is scaled down in proportion.
REFERENCE_SIZE = 32000
#: Fewest ordinary ids a range must keep to make varied prompts.
MIN_IDS = 16
#: Config keys under which multimodal models nest their language model's config.
_NESTED = ("text_config", "llm_config", "language_config")


@dataclass(frozen=True)
class Vocab:
    """What is known of a model's vocabulary: its size (ids the server accepts are below
    it), the special/added ids its tokenizer names, and where the size was read."""

    size: int
    special: frozenset[int] = frozenset()
    source: str = ""


@dataclass(frozen=True)
class IdRange:
    """Token ids prompts are drawn from: [low, high)."""

    low: int = DEFAULT_LOW
    high: int = DEFAULT_HIGH


#: The range drawn from when nothing else is known (and for every vocabulary of 32k and more).
DEFAULT_IDS = IdRange()


def id_range(vocab: Vocab | None) -> IdRange:
    """The safe ids for `vocab` (the module docstring says why these); the default range when
    nothing is known. Raises `InputError` when the vocabulary leaves too few ordinary ids."""
    if vocab is None:
        return IdRange()
    size = vocab.size
    if size >= REFERENCE_SIZE:
        low, high = DEFAULT_LOW, DEFAULT_HIGH
    else:
        low = size * DEFAULT_LOW // REFERENCE_SIZE
        high = size * DEFAULT_HIGH // REFERENCE_SIZE
    half = size // 2
    low = max([low, *(i + 1 for i in vocab.special if i < half)])
    high = min([high, *(i for i in vocab.special if i >= half)])
    if high - low < MIN_IDS:
        raise InputError(
            f"the vocabulary of {size} tokens ({vocab.source}) leaves {max(high - low, 0)} "
            f"ordinary token ids once its special tokens are avoided; prompts need at least "
            f"{MIN_IDS}"
        )
    return IdRange(low, high)


def read_vocab(*paths: str | None) -> Vocab | None:
    """The vocabulary from the first of `paths` (model.tokenizer, then model.path: a folder,
    or a tokenizer.json / config.json file) that has one; None when none can be read."""
    sizes: list[tuple[int, str]] = []
    special: set[int] = set()
    for path in paths:
        if not path:
            continue
        found = _read_files(Path(path).expanduser())
        sizes += found[0]
        special |= found[1]
    if not sizes:
        return None
    size, source = min(sizes)
    return Vocab(size, frozenset(i for i in special if i < size), source)


@lru_cache(maxsize=16)
def _read_files(p: Path) -> tuple[list[tuple[int, str]], frozenset[int]]:
    """(sizes with where each was read, special ids) from one path's files."""
    files = {name: p / name for name in ("config.json", "tokenizer.json", "tokenizer_config.json")}
    if p.is_file():  # a file named directly: that file only, whatever its name
        files = {"config.json" if p.name == "config.json" else "tokenizer.json": p}
    sizes: list[tuple[int, str]] = []
    special: set[int] = set()
    config = _json(files.get("config.json"))
    if config is not None:
        size = _config_size(config)
        if size is not None:
            sizes.append((size, f"vocab_size in {files['config.json']}"))
    tokenizer = _json(files.get("tokenizer.json"))
    if tokenizer is not None:
        size, ids = _tokenizer_size(tokenizer)
        special |= ids
        if size is not None:
            sizes.append((size, str(files["tokenizer.json"])))
    tok_config = _json(files.get("tokenizer_config.json"))
    if tok_config is not None:
        decoder = tok_config.get("added_tokens_decoder")
        if isinstance(decoder, dict):
            special |= {int(k) for k in decoder if str(k).isdigit()}
    return sizes, frozenset(special)


def _json(path: Path | None) -> dict[str, Any] | None:
    """A JSON object from `path`, or None when it is missing or not a JSON object."""
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _config_size(config: dict[str, Any]) -> int | None:
    size = config.get("vocab_size")
    if isinstance(size, int) and size > 0:
        return size
    for key in _NESTED:
        nested = config.get(key)
        if isinstance(nested, dict):
            inner = _config_size(nested)
            if inner is not None:
                return inner
    return None


def _tokenizer_size(data: dict[str, Any]) -> tuple[int | None, frozenset[int]]:
    """(ids the tokenizer can produce: one past its largest, its added tokens' ids)."""
    model = data.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    top = -1
    if isinstance(vocab, dict):  # BPE, WordPiece, WordLevel: token -> id
        top = max((v for v in vocab.values() if isinstance(v, int)), default=-1)
    elif isinstance(vocab, list):  # Unigram: [token, score] in id order
        top = len(vocab) - 1
    added = data.get("added_tokens")
    ids = frozenset(
        int(t["id"])
        for t in (added if isinstance(added, list) else [])
        if isinstance(t, dict) and isinstance(t.get("id"), int)
    )
    top = max([top, *ids])
    return (top + 1 if top >= 0 else None), ids


def unreadable(paths: list[str]) -> str:
    """The sentence for a model whose vocabulary cannot be read and the spec does not give."""
    where = " or ".join(paths) or "the model"
    return (
        f"cannot read the model's vocabulary size from {where} (no config.json with "
        "vocab_size, tokenizer.json or tokenizer_config.json there), so token-id prompts "
        "could go out of range and crash the server; set model.vocab_size in the spec (or "
        "model.tokenizer to a local tokenizer.json)"
    )

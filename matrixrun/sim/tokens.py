"""Deterministic simulated tokens: what a simulated model "generates" and how text is tokenized.

Greedy output must be a pure function of (prompt token ids, position), so two simulated servers
launched with different flags produce the same tokens and a correctness gate that compares arms
passes, unless the profile says the arm diverges (`diverge_after_tokens`): then every token from
that position on differs from the reference, guaranteed. Sampling (`temperature > 0`) mixes in a
per-request random salt, so sampled output differs between requests, as on a real server.

Text rule (documented because `text` prompts are counted with it): a text is split on
whitespace; each word is one token. A word `t<N>` with N inside the vocabulary is token N (so
rendered output tokenizes back to the same ids); any other word hashes into the vocabulary.
Token N renders as the word `" t<N>"` (leading space), so output text is never empty and needs
no JSON escaping.
"""

from __future__ import annotations

import hashlib
import re
from array import array

VOCAB_LO = 1000
VOCAB_SIZE = 30000
_MASK = (1 << 64) - 1
_WORD = re.compile(r"t(\d{1,9})")


def prompt_key(ids: list[int]) -> int:
    """A 64-bit digest of the prompt: the seed of its greedy continuation."""
    data = array("q", ids).tobytes()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _mix(z: int) -> int:
    """splitmix64's finaliser: cheap, well spread, stable across Python versions."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def reference_token(key: int, pos: int) -> int:
    """The greedy token at output position `pos` (0-based) for a prompt with digest `key`."""
    return VOCAB_LO + _mix((key + (pos + 1) * 0x9E3779B97F4A7C15) & _MASK) % VOCAB_SIZE


class TokenSource:
    """The output tokens of one request: reference tokens, diverging from `diverge_after`.

    `salt` (sampling) replaces the whole sequence with another deterministic-per-salt one.
    A diverged token is shifted by a non-zero offset within the vocabulary, so it always
    differs from the reference token at that position.
    """

    __slots__ = ("diverge_after", "key")

    def __init__(self, key: int, diverge_after: int | None = None, salt: int | None = None) -> None:
        self.key = key if salt is None else _mix(key ^ (salt & _MASK))
        self.diverge_after = diverge_after

    def token(self, pos: int) -> int:
        ref = reference_token(self.key, pos)
        if self.diverge_after is None or pos < self.diverge_after:
            return ref
        shift = 1 + _mix(self.key ^ (pos * 0xD1B54A32D192ED03 & _MASK)) % (VOCAB_SIZE - 1)
        return VOCAB_LO + (ref - VOCAB_LO + shift) % VOCAB_SIZE


def render(token: int) -> str:
    """The text of one token."""
    return f" t{token}"


def text_to_ids(text: str) -> list[int]:
    """Tokenize text by the module's word rule (one token per whitespace-separated word)."""
    ids: list[int] = []
    for word in text.split():
        m = _WORD.fullmatch(word)
        if m is not None and VOCAB_LO <= int(m.group(1)) < VOCAB_LO + VOCAB_SIZE:
            ids.append(int(m.group(1)))
        else:
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            ids.append(VOCAB_LO + h % VOCAB_SIZE)
    return ids

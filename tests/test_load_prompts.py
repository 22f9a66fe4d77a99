"""Seeded prompts and arrivals (matrixrun.load.prompts)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from matrixrun.load.prompts import (
    VOCAB_HIGH,
    VOCAB_LOW,
    arrival_offsets,
    make_prompts,
    make_warmup_prompts,
)


def test_exact_lengths_and_safe_id_range() -> None:
    prompts = make_prompts(seed=7, count=50, length=333)
    assert len(prompts) == 50
    assert all(len(p) == 333 for p in prompts)
    ids = np.array(prompts)
    assert ids.min() >= VOCAB_LOW and ids.max() < VOCAB_HIGH
    assert all(type(x) is int for x in prompts[0])  # JSON-serialisable plain ints


def test_same_seed_same_prompts_and_prefix_stable() -> None:
    assert make_prompts(3, 10, 64) == make_prompts(3, 10, 64)
    assert make_prompts(3, 20, 64)[:10] == make_prompts(3, 10, 64)
    assert make_prompts(3, 10, 64) != make_prompts(4, 10, 64)
    assert len({tuple(p) for p in make_prompts(3, 100, 16)}) == 100


def test_warmup_prompts_are_disjoint_from_measured() -> None:
    measured = {tuple(p) for p in make_prompts(0, 100, 32)}
    warm = {tuple(p) for p in make_warmup_prompts(0, 100, 32)}
    assert not measured & warm
    assert make_warmup_prompts(0, 5, 32) == make_warmup_prompts(0, 5, 32)


def test_arrivals() -> None:
    assert arrival_offsets(0, 5, math.inf) == [0.0] * 5
    offs = arrival_offsets(1, 4000, 50.0)
    assert offs[0] == 0.0 and offs == sorted(offs)
    assert offs == arrival_offsets(1, 4000, 50.0)
    gaps = np.diff(offs)
    assert np.mean(gaps) == pytest.approx(1 / 50, rel=0.05)
    assert np.std(gaps) == pytest.approx(1 / 50, rel=0.1)  # exponential: std == mean
    with pytest.raises(ValueError):
        arrival_offsets(0, 3, 0.0)

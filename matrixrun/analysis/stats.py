"""Statistics primitives of the verdict engine: quantiles, pooled σ, intervals, the TOST-style
judgement, and the small estimates built on them. Pure functions of numbers."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from scipy import stats

from matrixrun.core.tuning import MIN_T_DF
from matrixrun.core.verdict import ArmSample, CellVerdict, LimitingArm


def quantile(level: float, df: float | None) -> float:
    """Two-sided quantile for a `level` interval: Student's t, or the normal when df is None
    (a declared prior is taken as known)."""
    p = 1 - (1 - level) / 2
    if df is None:
        return float(stats.norm.ppf(p))
    return float(stats.t.ppf(p, max(df, MIN_T_DF)))


def pooled_sigma(groups: Iterable[Sequence[float]]) -> tuple[float | None, int]:
    """Pooled standard deviation of log values that share a mean within each group, and its
    degrees of freedom Σ(nᵢ − 1). Groups of one value contribute nothing. (None, 0) when no
    group has two values."""
    ss = 0.0
    df = 0
    for g in groups:
        if len(g) < 2:
            continue
        mean = sum(g) / len(g)
        ss += sum((v - mean) ** 2 for v in g)
        df += len(g) - 1
    if df == 0:
        return None, 0
    return math.sqrt(ss / df), df


def interval(
    d: float, sigma: float, df: float | None, n_a: float, n_b: float, level: float
) -> tuple[float, float]:
    """Interval of a log ratio of two means of n_a and n_b log values with per-value σ."""
    half = quantile(level, df) * sigma * math.sqrt(1 / n_a + 1 / n_b)
    return d - half, d + half


def effective_n(instances: Sequence[str]) -> float:
    """An arm's runs as a fresh-server σ counts them: n² / Σ nᵢ² over its server instances
    (n when every run had a server of its own, 1 when all ran on one). Why: that σ is the
    spread of one run across servers, and repeats on one server do not average that server's
    own offset away, so counting a warm rerun as a full replicate would make the interval too
    narrow. (It gives repeats no credit for averaging within-server noise either, which errs
    on the wide side.)"""
    counts = Counter(instances)
    total = sum(counts.values())
    return total * total / sum(c * c for c in counts.values()) if total else 0.0


def look_of(baseline: ArmSample, candidate: ArmSample, looks: int) -> int:
    """A cell's data state for the look-dependent level: 1 + the most server instances beyond
    its first that either arm has. Each stage-2 round relaunches a group at most once, so an
    arm's extra instances never exceed the rounds that added to the cell: this never
    overcounts (with nondecreasing levels per look, undercounting is only conservative). Warm
    reruns on the first server are stage 1 and do not count."""
    extra = max(len(set(a.instances)) - 1 for a in (baseline, candidate))
    return min(1 + max(extra, 0), max(looks, 1))


def judge(lo: float, hi: float, margin: float) -> tuple[CellVerdict, bool]:
    """TOST-style verdict from the interval [lo, hi] of signed d against margin m (a fraction;
    ±ln(1 + m) on the log scale). Returns (verdict, small_change), where small_change marks an
    inconclusive interval that excludes 0: a change exists but is below the margin or not yet
    shown to exceed it."""
    m = math.log1p(margin)
    if lo > m:
        return CellVerdict.BETTER, False
    if hi < -m:
        return CellVerdict.WORSE, False
    if -m < lo and hi < m:
        return CellVerdict.SAME, False
    return CellVerdict.UNDECIDED, lo > 0 or hi < 0


def limiting_arm(n_baseline: int, n_candidate: int) -> LimitingArm:
    """The arm whose next run shrinks the interval most: the one with fewer runs. Rerunning
    only one arm cannot bring σ·√(1/n_a + 1/n_b) below σ·√(1/n_other)."""
    if n_baseline < n_candidate:
        return "baseline"
    if n_candidate < n_baseline:
        return "candidate"
    return "both"


def crossover_estimate(x1: float, x2: float, d1: float, d2: float) -> float | None:
    """Where d crosses zero between (x1, d1) and (x2, d2), interpolating linearly in log x:
    c* = x1·(x2/x1)^(d1/(d1 − d2)). None when x is not positive or d does not change sign."""
    if x1 <= 0 or x2 <= 0 or d1 == d2 or (d1 > 0) == (d2 > 0):
        return None
    return float(x1 * (x2 / x1) ** (d1 / (d1 - d2)))


def satterthwaite(parts: Sequence[tuple[float, float | None]]) -> float | None:
    """Welch–Satterthwaite df of a sum of variance estimates, each (value, df); df None is a
    known part (infinite df). None when every part is known (or the sum is 0)."""
    total = sum(v for v, _ in parts)
    denom = sum(v * v / df for v, df in parts if df is not None and df > 0 and v > 0)
    if total <= 0:
        return None
    if denom == 0:
        return None if all(df is None for v, df in parts if v > 0) else 0.0
    return total * total / denom

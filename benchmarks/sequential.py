"""Exact group-sequential levels (Lan–DeMets, O'Brien–Fleming): `verdicts13.py --what-if
group-sequential` judges each data state at these instead of the analysis's Bonferroni shares.
A what-if, not the method: it measures what the Bonferroni slack costs and what it hides.

Why it is not the method (docs/benchmarks.md, "Noise worlds: what was tried"): the
analysis gives each state a cell can stop in (n_b + n_c runs) the increment α(t_k) − α(t_{k−1})
of the spending function and relies on Bonferroni, which ignores that successive states of a
cell are strongly correlated and so spends far less than α (three runs per arm: the last state
at 98.2% where the design allows 96.3%). Lan & DeMets (1983) instead choose boundaries c_k so
that the probability of *first* crossing at state k is that increment under the joint law of
the statistics (Brownian motion in the information fraction). That is exact for z-statistics;
with σ on a few df, re-estimated at each state and stopping when it happens to be small, the
per-state intervals are themselves not calibrated enough to spend α exactly (the what-if fails
the gate in two worlds).

Crossing probabilities by the standard numerical integration (Armitage, McPherson & Rowe
1969; Jennison & Turnbull 2000, ch. 19): the sub-density of B(t_k) on the continuation region is
carried from state to state by the normal transition kernel on a grid; c_k by bisection.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

#: Grid points over the continuation region (a 4·10⁵-path Monte Carlo of three runs per arm
#: crosses with probability 0.0502 at α = 0.05).
GRID = 2001


def obrien_fleming(t: float, alpha: float) -> float:
    """Lan–DeMets O'Brien–Fleming spending function α(t) = 2 − 2Φ(z_{α/2}/√t)."""
    if t <= 0:
        return 0.0
    z = float(stats.norm.ppf(1 - alpha / 2))
    return float(2 - 2 * stats.norm.cdf(z / math.sqrt(t)))


@lru_cache(maxsize=64)
def nominal_alphas(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """Two-sided nominal α of each state, for states at the increasing information
    `fractions` (the last = 1), such that the probability of first crossing ±c_k at state k
    is α(t_k) − α(t_{k−1}) under the canonical joint law. A state's test at its nominal α is
    the O'Brien–Fleming boundary c_k = Φ⁻¹(1 − α_k/2)."""
    out: list[float] = []
    xs = np.zeros(1)
    dens = np.ones(1)
    dx = 1.0
    prev_t = 0.0
    for k, t in enumerate(fractions):
        target = obrien_fleming(t, alpha) - obrien_fleming(prev_t, alpha)
        step = math.sqrt(t - prev_t)
        if k == 0:
            bound = float(stats.norm.ppf(1 - target / 2)) * math.sqrt(t)
        else:
            bound = _bound_for(xs, dens, dx, step, target, math.sqrt(t))
        out.append(float(2 * stats.norm.sf(bound / math.sqrt(t))))
        grid = np.linspace(-bound, bound, GRID)
        if k == 0:
            dens = stats.norm.pdf(grid, scale=step)
        else:
            kernel = stats.norm.pdf((grid[:, None] - xs[None, :]) / step) / step
            dens = kernel @ dens * dx
        xs, dx = grid, float(grid[1] - grid[0])
        prev_t = t
    return tuple(out)


def _bound_for(
    xs: np.ndarray, dens: np.ndarray, dx: float, step: float, target: float, scale: float
) -> float:
    """The boundary b on B(t) whose exit probability from the carried sub-density is
    `target` (bisection: the exit probability falls as b grows)."""

    def exit_p(b: float) -> float:
        out = stats.norm.sf((b - xs) / step) + stats.norm.cdf((-b - xs) / step)
        return float(np.sum(dens * out) * dx)

    lo, hi = 0.0, 12.0 * scale
    for _ in range(70):
        mid = (lo + hi) / 2
        if exit_p(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def state_levels(states: int, confidence: float) -> tuple[float, ...]:
    """Confidence level of each state 1..`states` of a cell, state k having k + 1 of the
    2·L = states + 1 runs it can get (information fraction (k + 1)/(states + 1))."""
    total = states + 1
    fractions = tuple((k + 1) / total for k in range(1, total))
    alphas = nominal_alphas(fractions, round(1 - confidence, 12))
    return tuple(1 - a for a in alphas)

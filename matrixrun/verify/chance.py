"""The futility rule's input: the predicted chance that more runs settle a cell."""

from __future__ import annotations

import math
from statistics import NormalDist


def decide_chance(
    d: float, sigma: float, n_baseline: int, n_candidate: int, n_max: int, margin: float, q: float
) -> float:
    """Predicted chance that the cell's interval decides (better, worse or same) once both
    arms have `n_max` runs, given its estimate d now (flat prior: the final estimate is
    normal around d with variance σ²(1/n_b + 1/n_c) − σ²·2/n_max) and the final half-width
    q·σ·√(2/n_max). 0 when no more runs are allowed."""
    m = math.log1p(margin)
    v_end = sigma**2 * 2 / n_max
    spread = math.sqrt(max(sigma**2 * (1 / n_baseline + 1 / n_candidate) - v_end, 0.0))
    if spread == 0:
        return 0.0
    h = q * math.sqrt(v_end)
    z = NormalDist()
    p = z.cdf((d - m - h) / spread) + z.cdf((-m - h - d) / spread)
    if h < m:
        p += max(z.cdf((m - h - d) / spread) - z.cdf((-m + h - d) / spread), 0.0)
    return min(p, 1.0)


def narrowest_half_width(sigma: float, n_max: int, level: float) -> float:
    """The half-width (log scale) of a cell's interval when both arms have `n_max` runs, each
    on its own launch, and one run's noise is exactly `sigma` (known: the normal quantile, so
    the truth is wider still). What `plan` compares with the margin before a run: no interval
    narrower than this can exist, whatever the runs measure."""
    q = NormalDist().inv_cdf(0.5 + level / 2)
    return q * sigma * math.sqrt(2 / n_max)


def runs_for_half_width(sigma: float, half: float, level: float) -> int:
    """The fewest runs per arm whose `narrowest_half_width` is below `half`."""
    q = NormalDist().inv_cdf(0.5 + level / 2)
    return max(2, math.ceil(2 * (q * sigma / half) ** 2) + 1)

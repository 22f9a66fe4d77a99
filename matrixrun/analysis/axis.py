"""Along the main sweep axis: series, regimes, crossovers, and a candidate's overall verdict
on one metric (VERDICTS.md §8, §9)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from matrixrun.analysis.stats import crossover_estimate
from matrixrun.core.tuning import (
    CROSSOVER_DRAWS,
    CROSSOVER_LEVEL,
    CROSSOVER_MAX_CORRELATION,
    CROSSOVER_MIN_DRAWS,
    CROSSOVER_SEED,
    MIN_T_DF,
)
from matrixrun.core.verdict import (
    CellVerdict,
    Comparison,
    Crossover,
    Overall,
    OverallVerdict,
    Place,
    Regime,
    Sigma,
)
from matrixrun.plan import series_key


def regimes(cells: Sequence[Comparison]) -> list[Regime]:
    """Runs of consecutive cells (in axis order) with the same verdict."""
    out: list[Regime] = []
    for cell in cells:
        if out and out[-1].verdict == cell.verdict:
            out[-1].x_to = cell.x
            out[-1].point_ids.append(cell.point_id)
        else:
            out.append(
                Regime(verdict=cell.verdict, x_from=cell.x, x_to=cell.x, point_ids=[cell.point_id])
            )
    return out


def _shared(a: Sequence[str], b: Sequence[str]) -> float:
    """Σᵢ (nᵢᵃ/nᵃ)(nᵢᵇ/nᵇ): how much launch variance two cells' arm means share."""
    if not a or not b:
        return 0.0
    return sum((a.count(i) / len(a)) * (b.count(i) / len(b)) for i in set(a) & set(b))


def crossover_interval(
    a: Comparison, b: Comparison, sigma: Sigma | None, level: float = CROSSOVER_LEVEL
) -> tuple[float | None, float | None, float | None]:
    """A model-conditional interval for the interpolated crossover between cells a and b (x
    ascending): draw (d_a, d_b) from their joint normal under the noise model — correlated,
    because the same launches served both cells of an arm, and scaled by one χ² draw on the
    cells' df for σ's own uncertainty — interpolate each draw that still crosses in the same
    direction, and take the central `level` range. Returns (lo, hi, share of draws that
    cross). It is conditional on the straight line in log x being right: the only way to
    check that is to measure the bracket's midpoint."""
    if None in (a.x, b.x, a.d, b.d, a.se, b.se) or not a.x or not b.x or a.x <= 0 or b.x <= 0:
        return None, None, None
    if sigma is not None and sigma.launch is None and sigma.prior is None:
        return None, None, None  # warm repeats only: the launch part is unknown, no interval
    assert a.x is not None and b.x is not None and a.d is not None and b.d is not None
    assert a.se is not None and b.se is not None
    cov = 0.0
    if sigma is not None and sigma.launch:
        cov = sigma.launch**2 * (
            _shared(a.baseline.instances, b.baseline.instances)
            + _shared(a.candidate.instances, b.candidate.instances)
        )
    cov = min(cov, CROSSOVER_MAX_CORRELATION * a.se * b.se)
    rng = np.random.default_rng(CROSSOVER_SEED)
    z = rng.multivariate_normal([0.0, 0.0], [[a.se**2, cov], [cov, b.se**2]], CROSSOVER_DRAWS)
    dfs = [df for df in (a.df, b.df) if df is not None]
    if dfs:
        df = max(min(dfs), MIN_T_DF)
        z *= np.sqrt(df / rng.chisquare(df, CROSSOVER_DRAWS))[:, None]
    da, db = a.d + z[:, 0], b.d + z[:, 1]
    keep = (np.sign(da) == np.sign(a.d)) & (np.sign(db) == np.sign(b.d))
    share = float(keep.mean())
    if keep.sum() < CROSSOVER_MIN_DRAWS:
        return None, None, share
    la, lb = math.log(a.x), math.log(b.x)
    cx = np.exp(la + (lb - la) * da[keep] / (da[keep] - db[keep]))
    q = (1 - level) / 2
    return float(np.quantile(cx, q)), float(np.quantile(cx, 1 - q)), share


def crossovers(
    cells: Sequence[Comparison], sigma: Sigma | None = None
) -> tuple[list[Crossover], bool]:
    """Sign changes among confident cells along the axis: brackets between the last confident
    cell of one sign and the first of the other, with the log-interpolated estimate and its
    model-conditional interval (`crossover_interval`).
    Returns (crossovers, non_monotone) — more than one sign change means re-measure."""
    confident = [c for c in cells if c.confident and c.x is not None and c.d is not None]
    out: list[Crossover] = []
    for a, b in itertools.pairwise(confident):
        if a.verdict == b.verdict:
            continue
        assert a.x is not None and b.x is not None and a.d is not None and b.d is not None
        lo, hi, share = crossover_interval(a, b, sigma)
        out.append(
            Crossover(
                direction="better_to_worse" if a.verdict == "better" else "worse_to_better",
                x_lo=a.x,
                x_hi=b.x,
                estimate=crossover_estimate(a.x, b.x, a.d, b.d),
                estimate_lo=lo,
                estimate_hi=hi,
                bracket_share=share,
            )
        )
    return out, len(out) > 1


def _places(cells: Sequence[Comparison], axis: str) -> list[Place]:
    return [
        Place(point=c.point, x=c.x, change=c.change, series=series_key(c.point, axis))
        for c in cells
    ]


def overall(
    cells: Sequence[Comparison],
    *,
    metric: str,
    sigma: Sigma,
    axis: str,
    crossovers: Sequence[Crossover] = (),
    non_monotone: bool = False,
) -> Overall:
    """better / worse (confident cells of one sign only), mixed (both signs), same (every cell
    equivalent), inconclusive (what would settle it: `runs_needed`) — VERDICTS.md §8."""
    counts = {v: sum(1 for c in cells if c.verdict == v) for v in CellVerdict}
    better = [c for c in cells if c.verdict == CellVerdict.BETTER]
    worse = [c for c in cells if c.verdict == CellVerdict.WORSE]
    confident = better + worse
    provisional = any(c.provisional for c in confident) or (
        not confident and any(c.provisional for c in cells if c.verdict == CellVerdict.SAME)
    )
    needed = [c.runs_needed for c in cells if c.runs_needed is not None]
    if better and worse:
        verdict = OverallVerdict.MIXED
    elif better:
        verdict = OverallVerdict.BETTER
    elif worse:
        verdict = OverallVerdict.WORSE
    elif cells and counts[CellVerdict.SAME] == len(cells):
        verdict = OverallVerdict.SAME
    else:
        verdict = OverallVerdict.UNDECIDED
    mixed = verdict == OverallVerdict.MIXED
    return Overall(
        metric=metric,
        verdict=verdict,
        provisional=provisional,
        cells=len(cells),
        better=counts[CellVerdict.BETTER],
        worse=counts[CellVerdict.WORSE],
        same=counts[CellVerdict.SAME],
        undecided=counts[CellVerdict.UNDECIDED],
        runs_needed=(max(needed) if needed and verdict == OverallVerdict.UNDECIDED else None),
        better_at=_places(better, axis),
        worse_at=_places(worse, axis),
        crossovers=list(crossovers) if mixed else [],
        non_monotone=non_monotone and mixed,
        sigma=sigma.value,
        sigma_source=sigma.source,
    )

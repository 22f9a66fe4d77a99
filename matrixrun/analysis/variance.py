"""A noise record applied to one cell: the variance of d for arms measured on given launches, its
Satterthwaite df, and the declared prior's floor (docs/verdicts.md, "A cell"). The noise model
(`noise_model.NoiseModel`) answers through these; the estimate itself is `components`'. Pure: a
`Sigma` in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from matrixrun.analysis.stats import satterthwaite
from matrixrun.core.tuning import FLOOR_LEVEL
from matrixrun.core.verdict import OddGroup, Sigma


@dataclass(frozen=True)
class CellNoise:
    """A cell's variance of d, its df, and the parts (for the report and the bootstrap)."""

    var: float
    df: float | None
    launch: float
    run: float
    floored: bool


def run_noise_at(sigma: Sigma, x: float | None) -> tuple[float, float | None] | None:
    """Run-noise variance and df at point x (the moderated estimate), or the pooled one."""
    for at in sigma.by_x:
        if at.x == x:
            return at.run**2, at.run_df
    if sigma.run is not None:
        return sigma.run**2, sigma.run_df
    return None


def _odd_of(sigma: Sigma, instances: Sequence[str]) -> OddGroup | None:
    """The odd group (`Sigma.odd_groups`) an arm's runs were measured on, if any."""
    for og in sigma.odd_groups:
        if any(i in og.instances for i in instances):
            return og
    return None


def _weights(instances: Sequence[str]) -> tuple[float, float]:
    """(Σ (nᵢ/n)², 1/n): how much of the launch variance and of the run variance an arm's mean
    keeps. Repeats on one server do not average its offset away."""
    n = len(instances)
    counts: dict[str, int] = {}
    for i in instances:
        counts[i] = counts.get(i, 0) + 1
    return sum((c / n) ** 2 for c in counts.values()), 1 / n


def cell_variance(
    sigma: Sigma, x: float | None, baseline: Sequence[str], candidate: Sequence[str]
) -> CellNoise | None:
    """Var(d) for arms measured on these instances (one entry per run), its Satterthwaite df,
    and whether the declared prior's floor raised it.

    The prior (`Sigma.prior`, one run's relative σ) is a floor on one run's total variance
    σ_b² + σ_w²(x): with no launch estimate the launch part is whatever the prior leaves above
    the run noise (taken as known); with one, the estimate may undercut the prior only as far
    as its own 95% upper confidence limit on its df allows (`FLOOR_LEVEL`) — a few df of warm
    repeats cannot show the noise is small."""
    if not baseline or not candidate:
        return None
    run = run_noise_at(sigma, x)
    prior = math.log1p(sigma.prior) ** 2 if sigma.prior is not None else None
    if run is None and prior is None and sigma.launch is None:
        return None
    vw, df_w = run if run is not None else (0.0, None)
    vb: float = sigma.launch**2 if sigma.launch is not None else 0.0
    df_b: float | None = float(sigma.launch_df) if sigma.launch is not None else None
    floored = False
    if prior is not None:
        if sigma.launch is None:
            if vw < prior:
                vb, df_b, floored = prior - vw, None, True
        else:
            one = vb + vw
            df_one = satterthwaite([(vb, df_b), (vw, df_w)])
            ucl = one if not df_one else one * df_one / stats.chi2.ppf(1 - FLOOR_LEVEL, df_one)
            floor = min(prior, ucl)
            if one < floor:
                scale = floor / one if one > 0 else 0.0
                if one > 0:
                    vb, vw = vb * scale, vw * scale
                else:
                    vb = floor
                floored = True
    ab_b, aw_b = _weights(baseline)
    ab_c, aw_c = _weights(candidate)
    runv = (aw_b + aw_c) * vw
    odd = [(a, _odd_of(sigma, inst)) for a, inst in ((ab_b, baseline), (ab_c, candidate))]
    if any(og is not None for _, og in odd):
        # an odd group's arm carries its own launch variance on its own df; the other arm
        # the pooled one of the regular groups (`odd_groups`)
        pooled = sum(a for a, og in odd if og is None) * vb
        parts: list[tuple[float, float | None]] = [(pooled, df_b)] if pooled > 0 else []
        for a, og in odd:
            if og is not None:
                parts.append((a * og.launch**2, float(og.launch_df)))
        launch = sum(v for v, _ in parts)
        df = satterthwaite([*parts, (runv, df_w)])
        return CellNoise(var=launch + runv, df=df, launch=launch, run=runv, floored=floored)
    launch = (ab_b + ab_c) * vb
    df = satterthwaite([(launch, df_b), (runv, df_w)])
    if not floored and sigma.launch_var_sd is not None and ab_b + ab_c > 0:
        df = _moment_df(launch + runv, (ab_b + ab_c) * sigma.launch_var_sd, runv, df_w, df)
    return CellNoise(var=launch + runv, df=df, launch=launch, run=runv, floored=floored)


def _moment_df(
    total: float, launch_sd: float, runv: float, df_w: float | None, df: float | None
) -> float | None:
    """Satterthwaite's df, 2·V²/Var(V̂), with the launch part's variance taken from the
    spread of its estimate (`Sigma.launch_var_sd`, from `components`) rather than from σ̂_b⁴
    and launches − groups: a launch variance estimated near 0 still carries its uncertainty
    into the cell's df. Never more than the df from the launch count (`df`)."""
    denom = launch_sd * launch_sd / 2 + (runv * runv / df_w if df_w else 0.0)
    if total <= 0 or denom <= 0:
        return df
    moment = total * total / denom
    return moment if df is None else min(moment, df)


def one_run_sigma(sigma: Sigma, x: float | None, *, fresh: bool = True) -> float | None:
    """σ of one run at point x as the cells there are judged (floor applied): run noise plus,
    for a run on a fresh launch, the launch part. What one replicate's difference from
    another is set against (×√2) in the rerun log and the warmup check."""
    one = cell_variance(sigma, x, ["a"], ["b"])
    if one is None:
        return None
    launch = one.launch / 2 if fresh else 0.0
    return math.sqrt(launch + one.run / 2)

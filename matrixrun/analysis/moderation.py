"""Run noise along the sweep axis, moderated (docs/verdicts.md, "A cell"): each point's raw
s² shrunk toward the trend in ln x (or the pooled value) of the other points, by what that
centre is worth there. Split from `components` (the fit and the launch variance); pure numpy.

Why leave-one-out and why the centre's own uncertainty: with a handful of df per matrix the
trend is itself an estimate from a few df. Counted as known (limma's setting, thousands of
genes) it lends d₀ df everywhere — also at the end of the axis, where it is an extrapolation,
and also toward a value the point's own chance low s² helped pull down. That is how a noisy
high-concurrency point with 1–2 df got the quiet low points' σ (issue 13, world `hetero`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy import special

from matrixrun.core.tuning import (
    CENTRE_FLOOR_DF,
    CRUMB_DF,
    D0,
    D0_MIN,
    D0_TAIL,
    EXTRAPOLATE,
    TREND_MIN_DF,
    TREND_MIN_POINTS,
    TREND_POINT_DF,
)
from matrixrun.core.verdict import SigmaAt


def is_tail(metric: str) -> bool:
    """p95/p99/p999 and max metrics: estimated with less borrowing (`D0_TAIL`)."""
    m = metric.lower()
    return m.startswith(("p9", "max_")) or "_p9" in m


class Residuals(Protocol):
    """What a group's fit gives run noise: residual SS and df per point."""

    resid_ss: dict[float | None, float]
    resid_df: dict[float | None, float]


def _digamma_bias(df: float) -> float:
    """E[ln s²] − ln σ² for a variance estimate on df degrees of freedom."""
    return float(special.digamma(df / 2) - math.log(df / 2))


def _trend(
    raw: dict[float | None, tuple[float, float]],
    pooled: float,
    at: Iterable[float | None] | None = None,
) -> dict[float, float]:
    """s₀²(x) at the positive points `at` (default: those of `raw`): a weighted straight line
    of ln s² in ln x (bias-corrected for each df) when at least three positive points have
    df; empty otherwise (the pooled value then). Kept within `EXTRAPOLATE` of the range of
    the values it was fitted on, not within that range: read at an end point from the others,
    a clamp at their range holds the noisiest point of a growing spread below the quieter
    ones' largest value; how far an extrapolation can be trusted is `trend_uncertainty`'s to
    say (it lends such a centre few df)."""
    fit = _trend_fit(raw)
    out: dict[float, float] = {}
    if fit is None:
        return out
    slope, icpt = fit.coef
    lo = min(min(s2 for _, s2, _ in fit.points), pooled) / EXTRAPOLATE
    hi = max(max(s2 for _, s2, _ in fit.points), pooled) * EXTRAPOLATE
    for x in {x for x in (raw if at is None else at) if x is not None and x > 0}:
        out[x] = float(min(max(math.exp(icpt + slope * math.log(x)), lo), hi))
    return out


@dataclass(frozen=True)
class _TrendFit:
    """The trend's line (slope, intercept of bias-corrected ln s² on ln x) and its points."""

    coef: tuple[float, float]
    points: list[tuple[float, float, float]]  # (x, s², df)


def _trend_fit(raw: dict[float | None, tuple[float, float]]) -> _TrendFit | None:
    pts = [
        (x, s2, df)
        for x, (s2, df) in raw.items()
        if x is not None and x > 0 and df >= TREND_POINT_DF
    ]
    if len(pts) < TREND_MIN_POINTS or sum(p[2] for p in pts) < TREND_MIN_DF:
        return None
    if any(p[1] <= 0 for p in pts):
        return None
    lx = np.array([math.log(x) for x, _, _ in pts])
    if float(np.ptp(lx)) == 0:
        return None
    ly = np.array([math.log(s2) - _digamma_bias(df) for _, s2, df in pts])
    wt = np.array([df for _, _, df in pts])
    slope, icpt = np.polyfit(lx, ly, 1, w=np.sqrt(wt))
    return _TrendFit(coef=(float(slope), float(icpt)), points=pts)


def _log_var(df: float) -> float:
    """Var(ln s²) of a variance estimate on df degrees of freedom: trigamma(df/2)."""
    return float(special.polygamma(1, df / 2))


def _df_of_log_var(v: float, cap: float) -> float:
    """The df whose ln s² has variance v (inverse of `_log_var`), at most `cap`."""
    if v <= _log_var(cap):
        return cap
    lo, hi = 1e-3, cap
    for _ in range(60):  # trigamma is decreasing
        mid = (lo + hi) / 2
        if _log_var(mid) > v:
            lo = mid
        else:
            hi = mid
    return lo


def trend_uncertainty(
    raw: dict[float | None, tuple[float, float]],
    d0: float,
    pooled_df: float,
    at: Iterable[float | None] | None = None,
) -> dict[float, float]:
    """Var(ln s₀²(x)) of the centre itself at each positive point: what the trend (or pooled
    value) is worth is not only how far the true noise strays from it (d₀) but how well the
    few df it rests on place it — a line through three points with a df or two each, read at
    its end, is barely known. The trend's prediction variance is the sandwich of its
    df-weighted fit with each point's true Var(z) = trigamma(df/2) + trigamma(d₀/2). A pooled
    centre (no trend) is charged nothing here: it lends at most its df and d₀ is then already
    its floor `D0_MIN` ("nothing shows the noise is alike"), which says the same thing."""
    xs = [x for x in (raw if at is None else at) if x is not None and x > 0]
    fit = _trend_fit(raw)
    if fit is None:
        return dict.fromkeys(xs, 0.0) if pooled_df > 0 else {}
    pts = fit.points
    design = np.array([[1.0, math.log(x)] for x, _, _ in pts])
    w = np.array([df for _, _, df in pts])
    v_z = np.array([_log_var(df) + _log_var(d0) for _, _, df in pts])
    bread = np.linalg.pinv(design.T @ (design * w[:, None]))
    meat = design.T @ (design * (w * w * v_z)[:, None])
    cov = bread @ meat @ bread
    out = {}
    for x in xs:
        h = np.array([1.0, math.log(x)])
        out[x] = float(h @ cov @ h)
    return out


def prior_df(
    raw: dict[float | None, tuple[float, float]], centre: dict[float, float], cap: float
) -> float:
    """How many df the trend (or pooled value) is worth at one point: Smyth's moment estimate
    (limma), trigamma(d₀/2) = Var(zₓ) − mean trigamma(dfₓ/2), zₓ the bias-corrected ln sₓ²
    around the centre. Noise that truly changes along the axis shows as excess spread and
    lends less; none lends `cap`. At least `D0_MIN`, never more than `cap`; `D0_MIN` when
    fewer than three points have a df of their own (nothing shows the noise is the same along
    the axis, and on real GPUs it is not)."""
    zs = []
    tri = []
    for x, (s2, df) in raw.items():
        if x is None or x not in centre or df < 1 or s2 <= 0:
            continue
        zs.append(math.log(s2) - _digamma_bias(df) - math.log(centre[x]))
        tri.append(float(special.polygamma(1, df / 2)))
    if len(zs) < 3:
        return min(D0_MIN, cap)  # no evidence that the points agree: lend little
    excess = float(np.var(zs, ddof=1)) - float(np.mean(tri))
    if excess <= float(special.polygamma(1, cap / 2)):
        return cap
    lo, hi = 1e-3, cap
    for _ in range(60):  # trigamma is decreasing: bisect trigamma(d/2) = excess
        mid = (lo + hi) / 2
        if float(special.polygamma(1, mid / 2)) > excess:
            lo = mid
        else:
            hi = mid
    return max(lo, D0_MIN)


@dataclass
class RunNoise:
    """Run noise along the axis: pooled, per point moderated (value, df), and as SigmaAt."""

    pooled: float
    df: float
    at: dict[float | None, tuple[float, float]]
    by_x: list[SigmaAt]


def run_noise(
    fits: Sequence[Residuals],
    within_ss: dict[float | None, float],
    within_df: dict[float | None, float],
    points: list[float | None],
    metric: str,
) -> RunNoise | None:
    """Raw s²(x) from repeats within a launch plus the fits' residuals at x, moderated toward
    the trend (or pooled value) by what the trend is worth at x (`prior_df`, and how well its
    few df place it there, `trend_uncertainty`); a point with fewer than `CENTRE_FLOOR_DF`
    own df is not put below its centre. None when nothing separates run noise."""
    raw_ss = dict(within_ss)
    raw_df = dict(within_df)
    for f in fits:
        for x, ss in f.resid_ss.items():
            raw_ss[x] = raw_ss.get(x, 0.0) + ss
            raw_df[x] = raw_df.get(x, 0.0) + f.resid_df[x]
    # residual df below a tenth are numerical crumbs of leverage, not information
    raw = {x: (raw_ss[x] / df, df) for x, df in raw_df.items() if df > CRUMB_DF}
    total = sum(df for _, df in raw.values())
    if total <= 0:
        return None
    pooled = sum(raw_ss[x] for x in raw) / total
    trend = _trend(raw, pooled)
    cap = D0_TAIL if is_tail(metric) else D0
    d0 = prior_df(raw, {x: trend.get(x, pooled) for x in raw if x is not None}, cap)
    at: dict[float | None, tuple[float, float]] = {}
    by_x: list[SigmaAt] = []
    for x in points:
        s2, df = raw.get(x, (0.0, 0.0))
        s0, borrow = _centre(raw, x, d0, pooled)
        borrow = min(borrow, total - df)
        value = (borrow * s0 + df * s2) / (borrow + df) if borrow + df > 0 else s0
        if df < CENTRE_FLOOR_DF:
            value = max(value, s0)
        at[x] = (value, borrow + df)
        by_x.append(
            SigmaAt(
                x=x,
                run=math.sqrt(value),
                run_df=borrow + df,
                raw=math.sqrt(s2) if df > 0 else None,
                raw_df=df,
            )
        )
    return RunNoise(pooled=pooled, df=total, at=at, by_x=by_x)


def _centre(
    raw: dict[float | None, tuple[float, float]], x: float | None, d0: float, pooled: float
) -> tuple[float, float]:
    """What point x is moderated toward, and how many df it lends: the trend (or pooled
    value) of the *other* points, read at x — leave-one-out, so a point's own chance low s²
    does not also pull down the value it is shrunk toward (that would count its df twice) —
    worth d₀ less what the others' few df leave unknown about it there
    (`trend_uncertainty`); the trend's slope costs one df of the others'."""
    others = {k: v for k, v in raw.items() if k != x}
    df_o = sum(df for _, df in others.values())
    if df_o <= 0 or x is None:
        return pooled, min(d0, df_o)
    pooled_o = sum(s2 * df for s2, df in others.values()) / df_o
    trend = _trend(others, pooled_o, [x])
    unsure = trend_uncertainty(others, d0, df_o, [x])
    worth = _df_of_log_var(_log_var(d0) + unsure[x], d0) if x in unsure else d0
    return trend.get(x, pooled_o), max(min(worth, df_o - (1 if trend else 0)), 0.0)

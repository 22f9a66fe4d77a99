"""The noise model: a launch effect shared by every cell of a server instance, and run noise
within an instance that changes with the sweep point (docs/verdicts.md, "The noise model").

Model, per metric, on log values: y[g, c, i, r] = μ[g, c] + b[g, i] + e[g, c, i, r], where g is
a server group (one launch configuration), c a cell of it, i a launch (server instance) of the
group and r a run on it; b ~ N(0, σ_b²) is the launch offset every cell of that launch shares,
e ~ N(0, σ_w²(x)) the run noise at the cell's sweep point x.

Why this shape: arms are always compared across launches, so a verdict needs both parts; but a
launch offset is shared by all the cells measured on it, so replicates of many cells on two
launches are one contrast of σ_b, not many. Counting cells as degrees of freedom (as pooling
instance means per cell does) makes σ look known when it rests on two servers.

Estimation (Henderson's method III, moments, no iteration; pure numpy):

1. per group, the cell-by-launch means ȳ[c, i] (n[c, i] runs each) are fitted by weighted least
   squares (weights n) to cell + launch effects; the weighted residuals carry run noise only
   (the launch effects absorb the offsets), each with its leverage's share of the residual df;
2. run noise per point x: the within-launch repeats at x plus the residuals at x, a raw
   s²(x) with df(x); moderated toward a trend in log x (or the pooled value) like limma's
   moderated variances: s̃²(x) = (d₀·s₀²(x) + df(x)·s²(x)) / (d₀ + df(x));
3. the launch variance from the launch sum of squares after cells: E[SS] = Σ tr(A·Σ_w) +
   σ_b²·tr(Z'(I − P_C)Z), solved for σ_b² (clamped at 0), with df = launches − groups (the
   rank the launch effects add: the number of launches, not of cells).

A cell's variance and its Satterthwaite df are then `cell_variance`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special, stats

from matrixrun.measurement import Measurement
from matrixrun.verdict import Sigma, SigmaAt, SigmaSource

#: Prior df of the moderation: how many runs' worth the trend (or pooled value) counts for at
#: one point. Small on purpose: noise on real GPUs changes with concurrency by more than 10×.
D0 = 4.0
#: Tail-latency metrics (p95/p99/max) borrow less: at low concurrency a p99 is the maximum of
#: a few requests and behaves unlike the same metric at high concurrency.
D0_TAIL = 1.0
#: A trend in log x is fitted only on at least three points with half a df each and this many df
#: in all; it costs the points it lends to one df (its slope).
TREND_MIN_DF = 4.0
TREND_MIN_POINTS = 3
#: The least the trend lends a point, however much the points disagree with it.
D0_MIN = 1.0
#: One-sided level of the upper confidence limit a declared prior is floored at.
FLOOR_LEVEL = 0.95


def value_of(m: Measurement, metric: str) -> float | None:
    """The metric of a successful measurement, when it is a positive finite number (the
    analysis works on logs); None otherwise."""
    if not m.ok or m.metrics is None:
        return None
    v = m.metrics.get(metric)
    if v is None or not math.isfinite(v) or v <= 0:
        return None
    return v


def is_tail(metric: str) -> bool:
    """p95/p99/p999 and max metrics: estimated with less borrowing (`D0_TAIL`)."""
    m = metric.lower()
    return m.startswith(("p9", "max_")) or "_p9" in m


@dataclass
class _Group:
    """Cell-by-launch means of one server group."""

    cells: list[tuple[str, float | None]] = field(default_factory=list)  # (key, x)
    launches: list[str] = field(default_factory=list)
    runs: dict[tuple[int, int], list[float]] = field(default_factory=dict)


@dataclass
class _Fit:
    """What one group's fit contributes."""

    resid_ss: dict[float | None, float]
    resid_df: dict[float | None, float]
    launch_ss: float
    launch_df: int
    # E[launch SS] = Σ_x run_coef[x]·σ_w²(x) + launch_coef·σ_b²
    run_coef: dict[float | None, float]
    launch_coef: float


def _projection(x: np.ndarray) -> np.ndarray:
    return np.asarray(x @ np.linalg.pinv(x))


def _rank(x: np.ndarray) -> int:
    return int(np.linalg.matrix_rank(x)) if x.size else 0


def _fit(g: _Group) -> _Fit:
    keys = sorted(g.runs)
    n = np.array([len(g.runs[k]) for k in keys], dtype=float)
    y = np.array([float(np.mean(g.runs[k])) for k in keys])
    w = np.sqrt(n)
    c_mat = np.zeros((len(keys), len(g.cells)))
    z_mat = np.zeros((len(keys), len(g.launches)))
    for row, (c, i) in enumerate(keys):
        c_mat[row, c] = 1.0
        z_mat[row, i] = 1.0
    cw = c_mat * w[:, None]
    zw = z_mat * w[:, None]
    full = np.hstack([cw, zw])
    yw = y * w
    p_c = _projection(cw)
    p_full = _projection(full)
    eye = np.eye(len(keys))
    resid = (eye - p_full) @ yw
    lev = np.diag(p_full)
    xs = [g.cells[c][1] for c, _ in keys]
    resid_ss: dict[float | None, float] = {}
    resid_df: dict[float | None, float] = {}
    for row, x in enumerate(xs):
        resid_ss[x] = resid_ss.get(x, 0.0) + float(resid[row] ** 2)
        resid_df[x] = resid_df.get(x, 0.0) + max(1.0 - float(lev[row]), 0.0)
    a = p_full - p_c
    launch_df = _rank(full) - _rank(cw)
    run_coef: dict[float | None, float] = {}
    for row, x in enumerate(xs):
        run_coef[x] = run_coef.get(x, 0.0) + float(a[row, row])
    launch_coef = float(np.trace(zw.T @ (eye - p_c) @ zw))
    return _Fit(
        resid_ss=resid_ss,
        resid_df=resid_df,
        launch_ss=float(yw @ a @ yw),
        launch_df=launch_df,
        run_coef=run_coef,
        launch_coef=launch_coef,
    )


def _digamma_bias(df: float) -> float:
    """E[ln s²] − ln σ² for a variance estimate on df degrees of freedom."""
    return float(special.digamma(df / 2) - math.log(df / 2))


def _trend(raw: dict[float | None, tuple[float, float]], pooled: float) -> dict[float, float]:
    """s₀²(x): a weighted straight line of ln s² in ln x (bias-corrected for each df) when at
    least three positive points have df, kept within the range of the raw values; otherwise
    the pooled value at every point."""
    pts = [(x, s2, df) for x, (s2, df) in raw.items() if x is not None and x > 0 and df >= 0.5]
    out: dict[float, float] = {}
    if len(pts) < TREND_MIN_POINTS or sum(p[2] for p in pts) < TREND_MIN_DF:
        return out
    if any(p[1] <= 0 for p in pts):
        return out
    lx = np.array([math.log(x) for x, _, _ in pts])
    ly = np.array([math.log(s2) - _digamma_bias(df) for _, s2, df in pts])
    wt = np.array([df for _, _, df in pts])
    if float(np.ptp(lx)) == 0:
        return out
    slope, icpt = np.polyfit(lx, ly, 1, w=np.sqrt(wt))
    lo = min(s2 for _, s2, _ in pts)
    hi = max(s2 for _, s2, _ in pts)
    lo, hi = min(lo, pooled), max(hi, pooled)
    for x in {x for x in raw if x is not None and x > 0}:
        out[x] = float(min(max(math.exp(icpt + slope * math.log(x)), lo), hi))
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


def estimate_components(
    measurements: Iterable[Measurement],
    metric: str,
    *,
    axis: str = "concurrency",
    prior: float | None = None,
) -> Sigma:
    """The noise model for `metric` (module docstring): run noise per point, moderated; the
    launch variance with df = launches − groups; the declared prior, if any, kept beside them
    (applied per cell by `cell_variance`, where it is a floor)."""
    groups: dict[str, _Group] = {}
    cell_index: dict[str, dict[str, int]] = {}
    launch_index: dict[str, dict[str, int]] = {}
    within_ss: dict[float | None, float] = {}
    within_df: dict[float | None, float] = {}
    per_cell: dict[tuple[str, str, str, str], list[float]] = {}
    xs_of: dict[tuple[str, str, str, str], float | None] = {}
    for m in measurements:
        v = value_of(m, metric)
        if v is None:
            continue
        raw_x = m.point.get(axis)
        x = float(raw_x) if isinstance(raw_x, int | float) and not isinstance(raw_x, bool) else None
        key = (m.group_id or m.arm, m.slice, m.point_id + "/" + m.arm, m.instance)
        per_cell.setdefault(key, []).append(math.log(v))
        xs_of[key] = x
    for (gid, sl, cid, inst), vals in per_cell.items():
        gkey = f"{sl}/{gid}"
        g = groups.setdefault(gkey, _Group())
        ci = cell_index.setdefault(gkey, {})
        if cid not in ci:
            ci[cid] = len(g.cells)
            g.cells.append((cid, xs_of[(gid, sl, cid, inst)]))
        li = launch_index.setdefault(gkey, {})
        if inst not in li:
            li[inst] = len(g.launches)
            g.launches.append(inst)
        g.runs[(ci[cid], li[inst])] = vals
        x = xs_of[(gid, sl, cid, inst)]
        if len(vals) > 1:
            mean = sum(vals) / len(vals)
            within_ss[x] = within_ss.get(x, 0.0) + sum((u - mean) ** 2 for u in vals)
            within_df[x] = within_df.get(x, 0.0) + len(vals) - 1
    fits = [_fit(g) for g in groups.values() if g.runs]
    raw_ss = dict(within_ss)
    raw_df = dict(within_df)
    for f in fits:
        for x, ss in f.resid_ss.items():
            raw_ss[x] = raw_ss.get(x, 0.0) + ss
            raw_df[x] = raw_df.get(x, 0.0) + f.resid_df[x]
    # residual df below a tenth are numerical crumbs of leverage, not information
    raw = {x: (raw_ss[x] / df, df) for x, df in raw_df.items() if df > 0.1}
    run_df_total = sum(df for _, df in raw.values())
    pooled = sum(raw_ss[x] for x in raw) / run_df_total if run_df_total > 0 else None
    points = sorted({x for x in xs_of.values()}, key=lambda v: (v is None, v or 0.0))
    by_x: list[SigmaAt] = []
    run_at: dict[float | None, tuple[float, float]] = {}
    if pooled is not None:
        trend = _trend(raw, pooled)
        cap = D0_TAIL if is_tail(metric) else D0
        d0 = prior_df(raw, {x: trend.get(x, pooled) for x in raw if x is not None}, cap)
        for x in points:
            s0 = trend.get(x, pooled) if x is not None else pooled
            s2, df = raw.get(x, (0.0, 0.0))
            borrow = max(min(d0, run_df_total - df - (1 if trend else 0)), 0.0)
            value = (borrow * s0 + df * s2) / (borrow + df) if borrow + df > 0 else s0
            run_at[x] = (value, borrow + df)
            by_x.append(
                SigmaAt(
                    x=x,
                    run=math.sqrt(value),
                    run_df=borrow + df,
                    raw=math.sqrt(s2) if df > 0 else None,
                    raw_df=df,
                )
            )
    launch_df = sum(f.launch_df for f in fits)
    launch_var = _launch_variance(fits, run_at, pooled) if launch_df > 0 else None
    return _sigma(metric, prior, pooled, run_df_total, launch_var, launch_df, by_x)


def _launch_variance(
    fits: list[_Fit], run_at: dict[float | None, tuple[float, float]], pooled: float | None
) -> float | None:
    """σ_b² by moments: the launch sum of squares less what run noise puts into it, over its
    coefficient (Henderson III), clamped at 0."""
    ss = sum(f.launch_ss for f in fits)
    coef = sum(f.launch_coef for f in fits)
    if coef <= 0:
        return None
    if pooled is None:
        # no run noise separable: the launch mean square is the whole of one run's
        # variance, all of it charged to the launch part (which nothing averages away)
        return max(ss, 0.0) / coef
    expected_run = sum(
        c * run_at.get(x, (0.0, 0.0))[0] for f in fits for x, c in f.run_coef.items()
    )
    return max(ss - expected_run, 0.0) / coef


def _sigma(
    metric: str,
    prior: float | None,
    pooled: float | None,
    run_df: float,
    launch_var: float | None,
    launch_df: int,
    by_x: list[SigmaAt],
) -> Sigma:
    """The `Sigma` record: σ of one run on a fresh launch (launch + pooled run noise), with
    its Satterthwaite df, and its source (fresh launches, warm repeats, prior, none)."""
    if launch_var is not None:
        run = pooled or 0.0
        total = launch_var + run
        df = satterthwaite([(launch_var, float(launch_df)), (run, run_df)])
        value: float | None = math.sqrt(total)
        source = SigmaSource.FRESH_SERVER
    elif pooled is not None:
        value, df, source = math.sqrt(pooled), run_df, SigmaSource.WARM
    elif prior is not None:
        value, df, source = math.log1p(prior), None, SigmaSource.PRIOR
    else:
        value, df, source = None, None, SigmaSource.NONE
    return Sigma(
        metric=metric,
        value=value,
        df=_round_df(df),
        source=source,
        fresh_value=value if launch_var is not None else None,
        fresh_df=launch_df,
        warm_value=math.sqrt(pooled) if pooled is not None else None,
        warm_df=round(run_df),
        prior=prior,
        launch=math.sqrt(launch_var) if launch_var is not None else None,
        launch_df=launch_df,
        run=math.sqrt(pooled) if pooled is not None else None,
        run_df=_round_df(run_df) or 0.0,
        by_x=by_x,
    )


def _round_df(df: float | None) -> float | None:
    if df is None or not math.isfinite(df):
        return None
    return round(df, 2)


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


def _legacy(sigma: Sigma) -> Sigma:
    """A σ given only as one number (built by hand, or read from an older verdict.json): a
    fresh-server one is all launch variance (so repeats on one server count once, as before),
    a warm one all run noise, a prior one the floor alone."""
    if sigma.df is None and sigma.value is not None:  # known (infinite df): as a prior
        return sigma.model_copy(update={"prior": math.expm1(sigma.value)})
    if sigma.source == SigmaSource.FRESH_SERVER:
        return sigma.model_copy(
            update={"launch": sigma.value, "launch_df": int(sigma.df or 0) or 1}
        )
    if sigma.source == SigmaSource.WARM:
        return sigma.model_copy(update={"run": sigma.value, "run_df": sigma.df or 0.0})
    return sigma


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
    if sigma.launch is None and sigma.run is None and sigma.value is not None:
        sigma = _legacy(sigma)
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
    launch = (ab_b + ab_c) * vb
    runv = (aw_b + aw_c) * vw
    df = satterthwaite([(launch, df_b), (runv, df_w)])
    return CellNoise(var=launch + runv, df=df, launch=launch, run=runv, floored=floored)


def one_run_sigma(sigma: Sigma, x: float | None, *, fresh: bool = True) -> float | None:
    """σ of one run at point x as the cells there are judged (floor applied): run noise plus,
    for a run on a fresh launch, the launch part. What one replicate's difference from
    another is set against (×√2) in the rerun log and the warmup check."""
    one = cell_variance(sigma, x, ["a"], ["b"])
    if one is None:
        return None
    launch = one.launch / 2 if fresh else 0.0
    return math.sqrt(launch + one.run / 2)

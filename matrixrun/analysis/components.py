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
#: How far beyond the range of the variances it was fitted on a trend may be read (×4 in
#: variance, ×2 in σ): enough for spread that grows along the axis, not a line through two
#: chance values taken to any length.
EXTRAPOLATE = 4.0
#: Passes of the fit: the first unweighted, each later one weighted by the run noise per point
#: the one before found (iterated weighted least squares; two reweightings settle it).
REWEIGHT_PASSES = 3
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
    # for the spread of the launch SS: A = P_full − P_C, the weighted launch columns, and
    # each row's point and assumed run variance (the weights' scale)
    a: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    zw: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    rows: list[tuple[float | None, float]] = field(default_factory=list)


def _projection(x: np.ndarray) -> np.ndarray:
    return np.asarray(x @ np.linalg.pinv(x))


def _rank(x: np.ndarray) -> int:
    return int(np.linalg.matrix_rank(x)) if x.size else 0


def _fit(g: _Group, scale: dict[float | None, float] | None = None) -> _Fit:
    """One group's weighted fit of cell + launch effects. `scale` is the run variance assumed
    at each point (1 everywhere on the first pass): rows are weighted by n / scale, so that,
    once the scale is right, every whitened residual carries the same noise and its
    1 − leverage share of df is its true share. Unweighted, a residual at a noisy point is
    partly made of the quiet points' noise and the reverse (the fit spreads each row's noise
    over the rows it shares a cell or launch with): that flattens run noise along the axis,
    low points read high and high points low."""
    keys = sorted(g.runs)
    xs = [g.cells[c][1] for c, _ in keys]
    s2 = np.array([(scale or {}).get(x, 1.0) for x in xs])
    s2 = np.where(s2 > 0, s2, 1.0)
    n = np.array([len(g.runs[k]) for k in keys], dtype=float)
    y = np.array([float(np.mean(g.runs[k])) for k in keys])
    w = np.sqrt(n / s2)
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
    a = p_full - p_c
    resid_ss: dict[float | None, float] = {}
    resid_df: dict[float | None, float] = {}
    run_coef: dict[float | None, float] = {}
    for row, x in enumerate(xs):
        # back on the run-variance scale of point x: r² · scale(x)
        resid_ss[x] = resid_ss.get(x, 0.0) + float(resid[row] ** 2 * s2[row])
        resid_df[x] = resid_df.get(x, 0.0) + max(1.0 - float(lev[row]), 0.0)
        # E[yw'A yw] gets A_rr · σ_w²(x) / scale(x) from row r's run noise
        run_coef[x] = run_coef.get(x, 0.0) + float(a[row, row] / s2[row])
    return _Fit(
        resid_ss=resid_ss,
        resid_df=resid_df,
        launch_ss=float(yw @ a @ yw),
        launch_df=_rank(full) - _rank(cw),
        run_coef=run_coef,
        launch_coef=float(np.trace(zw.T @ (eye - p_c) @ zw)),
        a=a,
        zw=zw,
        rows=[(x, float(v)) for x, v in zip(xs, s2, strict=True)],
    )


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
    pts = [(x, s2, df) for x, (s2, df) in raw.items() if x is not None and x > 0 and df >= 0.5]
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
    df-weighted fit with each point's true Var(z) = trigamma(df/2) + trigamma(d₀/2); the
    pooled value's is trigamma(pooled df / 2)."""
    xs = [x for x in (raw if at is None else at) if x is not None and x > 0]
    fit = _trend_fit(raw)
    if fit is None:
        v = _log_var(pooled_df) if pooled_df > 0 else math.inf
        return dict.fromkeys(xs, v)
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
class _RunNoise:
    """Run noise along the axis: pooled, per point moderated (value, df), and as SigmaAt."""

    pooled: float
    df: float
    at: dict[float | None, tuple[float, float]]
    by_x: list[SigmaAt]


def _run_noise(
    fits: list[_Fit],
    within_ss: dict[float | None, float],
    within_df: dict[float | None, float],
    points: list[float | None],
    metric: str,
) -> _RunNoise | None:
    """Raw s²(x) from repeats within a launch plus the fits' residuals at x, moderated toward
    the trend (or pooled value) by what the trend is worth at x (`prior_df`, and how well its
    few df place it there, `trend_uncertainty`). None when nothing separates run noise."""
    raw_ss = dict(within_ss)
    raw_df = dict(within_df)
    for f in fits:
        for x, ss in f.resid_ss.items():
            raw_ss[x] = raw_ss.get(x, 0.0) + ss
            raw_df[x] = raw_df.get(x, 0.0) + f.resid_df[x]
    # residual df below a tenth are numerical crumbs of leverage, not information
    raw = {x: (raw_ss[x] / df, df) for x, df in raw_df.items() if df > 0.1}
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
    return _RunNoise(pooled=pooled, df=total, at=at, by_x=by_x)


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
    points = sorted({x for x in xs_of.values()}, key=lambda v: (v is None, v or 0.0))
    found = [g for g in groups.values() if g.runs]
    scale: dict[float | None, float] | None = None
    for _ in range(REWEIGHT_PASSES):
        fits = [_fit(g, scale) for g in found]
        run = _run_noise(fits, within_ss, within_df, points, metric)
        if run is None or not any(f.resid_ss for f in fits):
            break
        scale = {x: v for x, (v, _) in run.at.items() if v > 0}
    pooled = run.pooled if run is not None else None
    run_df_total = run.df if run is not None else 0.0
    by_x = run.by_x if run is not None else []
    run_at = run.at if run is not None else {}
    launch_df = sum(f.launch_df for f in fits)
    launch = _launch_variance(fits, run_at, pooled) if launch_df > 0 else None
    sigma = _sigma(
        metric, prior, pooled, run_df_total, launch[0] if launch else None, launch_df, by_x
    )
    if launch is not None and math.isfinite(launch[1]):
        sigma = sigma.model_copy(update={"launch_var_sd": math.sqrt(launch[1])})
    return sigma


def _launch_variance(
    fits: list[_Fit], run_at: dict[float | None, tuple[float, float]], pooled: float | None
) -> tuple[float, float] | None:
    """σ_b² by moments — the launch sum of squares less what run noise puts into it, over its
    coefficient (Henderson III), clamped at 0 — and the variance of that estimate.

    Why the variance, not df = launches − groups alone: SS_L = y'Ay is a sum of independent
    χ²₁ terms with weights λ (the eigenvalues of A·V), equal only in a balanced design. A
    relaunch that served one or two cells contributes a contrast mostly of run noise, so
    Var(SS_L) = 2Σλ² is larger than (launches − groups) equal terms would give; and an
    estimate near 0 is not known to be near 0 (its spread stays that of the run noise in it),
    which a df read off the estimate (2σ̂_b⁴/Var) would hide. The run part's own uncertainty
    (its df per point) is added."""
    ss = sum(f.launch_ss for f in fits)
    coef = sum(f.launch_coef for f in fits)
    if coef <= 0:
        return None
    if pooled is None:
        # no run noise separable: the launch mean square is the whole of one run's
        # variance, all of it charged to the launch part (which nothing averages away)
        df = sum(f.launch_df for f in fits)
        value = max(ss, 0.0) / coef
        return value, 2 * value * value / df if df > 0 else math.inf
    expected_run = sum(
        c * run_at.get(x, (0.0, 0.0))[0] for f in fits for x, c in f.run_coef.items()
    )
    value = max(ss - expected_run, 0.0) / coef
    lam2 = 0.0
    for f in fits:
        if not f.rows:
            continue
        run = np.array([run_at.get(x, (0.0, 0.0))[0] / s2 for x, s2 in f.rows])
        cov = value * (f.zw @ f.zw.T) + np.diag(run)
        av = f.a @ cov
        lam2 += float(np.trace(av @ av))  # Σλ² = tr((AV)²)
    var_run = 0.0
    for x, (v, df) in run_at.items():
        c = sum(f.run_coef.get(x, 0.0) for f in fits)
        if c and df > 0:
            var_run += c * c * 2 * v * v / df
    return value, (2 * lam2 + var_run) / (coef * coef)


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
    if not floored and sigma.launch_var_sd is not None and ab_b + ab_c > 0:
        df = _moment_df(launch + runv, (ab_b + ab_c) * sigma.launch_var_sd, runv, df_w, df)
    return CellNoise(var=launch + runv, df=df, launch=launch, run=runv, floored=floored)


def _moment_df(
    total: float, launch_sd: float, runv: float, df_w: float | None, df: float | None
) -> float | None:
    """Satterthwaite's df, 2·V²/Var(V̂), with the launch part's variance taken from the
    spread of its estimate (`_launch_variance`) rather than from σ̂_b⁴ and launches − groups:
    a launch variance estimated near 0 still carries its uncertainty into the cell's df. Never
    more than the df from the launch count (`df`)."""
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

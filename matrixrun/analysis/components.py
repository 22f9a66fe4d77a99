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
from scipy import stats

from matrixrun.analysis.moderation import run_noise
from matrixrun.core.measurement import Measurement
from matrixrun.core.verdict import OddGroup, Sigma, SigmaAt, SigmaSource

#: Passes of the fit: the first unweighted, each later one weighted by the run noise per point
#: the one before found (iterated weighted least squares). Not converged at 3 when noise grows
#: ×48 along the axis (the quiet end's raw σ² reads 100× its truth unweighted, 13× after one
#: reweighting, 3× after two: tests/test_components.py), but each pass costs a fit.
REWEIGHT_PASSES = 3
#: One-sided level of the upper confidence limit a declared prior is floored at.
FLOOR_LEVEL = 0.95
#: Family-wise level (Bonferroni over the groups tested) at which one group's launch spread
#: is called larger than the others' and the group gets a launch variance of its own.
ODD_ALPHA = 0.01


def value_of(m: Measurement, metric: str) -> float | None:
    """The metric of a successful measurement, when it is a positive finite number (the
    analysis works on logs); None otherwise."""
    if not m.ok or m.metrics is None:
        return None
    v = m.metrics.get(metric)
    if v is None or not math.isfinite(v) or v <= 0:
        return None
    return v


@dataclass
class _Group:
    """Cell-by-launch means of one server group."""

    cells: list[tuple[str, float | None]] = field(default_factory=list)  # (key, x)
    launches: list[str] = field(default_factory=list)
    arm: str = ""
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
    arms_of: dict[tuple[str, str, str, str], str] = {}
    for m in measurements:
        v = value_of(m, metric)
        if v is None:
            continue
        raw_x = m.point.get(axis)
        x = float(raw_x) if isinstance(raw_x, int | float) and not isinstance(raw_x, bool) else None
        key = (m.group_id or m.arm, m.slice, m.point_id + "/" + m.arm, m.instance)
        per_cell.setdefault(key, []).append(math.log(v))
        xs_of[key] = x
        arms_of[key] = m.arm
    for (gid, sl, cid, inst), vals in per_cell.items():
        gkey = f"{sl}/{gid}"
        g = groups.setdefault(gkey, _Group(arm=arms_of[(gid, sl, cid, inst)]))
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
        run = run_noise(fits, within_ss, within_df, points, metric)
        if run is None or not any(f.resid_ss for f in fits):
            break
        scale = {x: v for x, (v, _) in run.at.items() if v > 0}
    pooled = run.pooled if run is not None else None
    run_df_total = run.df if run is not None else 0.0
    by_x = run.by_x if run is not None else []
    run_at = run.at if run is not None else {}
    keys = [k for k, g in groups.items() if g.runs]
    odd = odd_groups(fits)
    regular = [f for i, f in enumerate(fits) if i not in odd]
    launch_df = sum(f.launch_df for f in regular)
    launch = _launch_variance(regular, run_at, pooled) if launch_df > 0 else None
    sigma = _sigma(
        metric, prior, pooled, run_df_total, launch[0] if launch else None, launch_df, by_x
    )
    if launch is not None and math.isfinite(launch[1]):
        sigma = sigma.model_copy(update={"launch_var_sd": math.sqrt(launch[1])})
    records = []
    for i, (f_ratio, p) in odd.items():
        own = _launch_variance([fits[i]], run_at, pooled)
        if own is None:
            continue
        records.append(
            OddGroup(
                group=keys[i],
                arm=found[i].arm,
                instances=list(found[i].launches),
                launch=math.sqrt(own[0]),
                launch_df=fits[i].launch_df,
                launch_var_sd=math.sqrt(own[1]) if math.isfinite(own[1]) else None,
                f=f_ratio,
                p=p,
            )
        )
    return sigma.model_copy(update={"odd_groups": records}) if records else sigma


def odd_groups(fits: Sequence[_Fit]) -> dict[int, tuple[float, float]]:
    """Groups whose launches spread more than the other groups' do: index → (F, p).

    Each group with launch df is tested against the others pooled, F = (SS_g/df_g) /
    (ΣSS_rest/Σdf_rest) on (df_g, Σdf_rest), one-sided, Bonferroni over the groups tested at
    `ODD_ALPHA`. Under the model every group's launch mean square estimates the same
    σ_w-part + σ_b²·(its design's coefficient), equal for groups of the same shape (the usual
    case: every arm measures the same cells); one configuration whose launches are unstable
    breaks that, and pooled with the others it would set σ_b for every cell. Such a group is
    given its own launch variance (on its own df) and left out of the pooled one — only while
    at least one other group keeps launch df, so the rest are never left without a launch
    part; and never more than half of the groups (if most disagree, the pooled value is what
    the engine does, not an outlier)."""
    tested = [i for i, f in enumerate(fits) if f.launch_df > 0 and f.launch_ss > 0]
    if len(tested) < 2:
        return {}
    out: dict[int, tuple[float, float]] = {}
    for i in tested:
        rest = [fits[j] for j in tested if j != i]
        ss_r, df_r = sum(f.launch_ss for f in rest), sum(f.launch_df for f in rest)
        if df_r == 0 or ss_r <= 0:
            continue
        f_ratio = (fits[i].launch_ss / fits[i].launch_df) / (ss_r / df_r)
        p = float(stats.f.sf(f_ratio, fits[i].launch_df, df_r))
        if p * len(tested) < ODD_ALPHA:
            out[i] = (f_ratio, p)
    if len(out) * 2 > len(tested):
        return {}
    return out


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
        launches = sum(f.launch_df for f in fits)
        value = max(ss, 0.0) / coef
        return value, 2 * value * value / launches if launches > 0 else math.inf
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
        coef_x = sum((f.run_coef.get(x, 0.0) for f in fits), 0.0)
        if coef_x and df > 0:
            var_run += coef_x * coef_x * 2 * v * v / df
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

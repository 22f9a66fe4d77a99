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

A cell's variance and its Satterthwaite df are then `variance.cell_variance`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from matrixrun.analysis.moderation import RunNoise, run_noise
from matrixrun.analysis.samples import value_of
from matrixrun.analysis.stats import satterthwaite
from matrixrun.core.measurement import Measurement
from matrixrun.core.tuning import ODD_ALPHA, REWEIGHT_PASSES
from matrixrun.core.verdict import OddGroup, Sigma, SigmaAt, SigmaSource

#: A server group within its slice: (slice, group id).
GroupKey = tuple[str, str]
#: A cell of a group: (point id, arm).
CellKey = tuple[str, str]


@dataclass
class _Group:
    """Cell-by-launch means of one server group."""

    cells: list[tuple[CellKey, float | None]] = field(default_factory=list)  # (cell, x)
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


@dataclass
class _Data:
    """A metric's log values laid out for the fit: the groups' cell-by-launch means, the
    within-launch sums of squares and df per point, and the points in axis order."""

    groups: dict[GroupKey, _Group]
    within_ss: dict[float | None, float]
    within_df: dict[float | None, float]
    points: list[float | None]


def _collect(measurements: Iterable[Measurement], metric: str, axis: str) -> _Data:
    """Every successful run's log value, by (group, slice, cell, launch), laid out per group
    (`_Group`: its cells, its launches, the runs of each pair) with the within-launch repeats'
    sums of squares per point."""
    data = _Data(groups={}, within_ss={}, within_df={}, points=[])
    cell_index: dict[GroupKey, dict[CellKey, int]] = {}
    launch_index: dict[GroupKey, dict[str, int]] = {}
    per_cell: dict[tuple[str, str, CellKey, str], list[float]] = {}
    xs_of: dict[tuple[str, str, CellKey, str], float | None] = {}
    arms_of: dict[tuple[str, str, CellKey, str], str] = {}
    for m in measurements:
        v = value_of(m, metric)
        if v is None:
            continue
        raw_x = m.point.get(axis)
        x = float(raw_x) if isinstance(raw_x, int | float) and not isinstance(raw_x, bool) else None
        key = (m.group_id or m.arm, m.slice, (m.point_id, m.arm), m.instance)
        per_cell.setdefault(key, []).append(math.log(v))
        xs_of[key] = x
        arms_of[key] = m.arm
    for (gid, sl, cid, inst), vals in per_cell.items():
        gkey = (sl, gid)
        g = data.groups.setdefault(gkey, _Group(arm=arms_of[(gid, sl, cid, inst)]))
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
            data.within_ss[x] = data.within_ss.get(x, 0.0) + sum((u - mean) ** 2 for u in vals)
            data.within_df[x] = data.within_df.get(x, 0.0) + len(vals) - 1
    data.points = sorted({x for x in xs_of.values()}, key=lambda v: (v is None, v or 0.0))
    return data


def _reweighted(
    found: list[_Group], data: _Data, metric: str
) -> tuple[list[_Fit], RunNoise | None]:
    """The groups' fits and the run noise they give, reweighted `REWEIGHT_PASSES` times by the
    run noise per point the pass before found (`_fit`)."""
    scale: dict[float | None, float] | None = None
    for _ in range(REWEIGHT_PASSES):
        fits = [_fit(g, scale) for g in found]
        run = run_noise(fits, data.within_ss, data.within_df, data.points, metric)
        if run is None or not any(f.resid_ss for f in fits):
            break
        scale = {x: v for x, (v, _) in run.at.items() if v > 0}
    return fits, run


def estimate_components(
    measurements: Iterable[Measurement],
    metric: str,
    *,
    axis: str = "concurrency",
    prior: float | None = None,
) -> Sigma:
    """The noise model for `metric` (module docstring): run noise per point, moderated; the
    launch variance with df = launches − groups; the declared prior, if any, kept beside them
    (applied per cell by `variance.cell_variance`, where it is a floor)."""
    data = _collect(measurements, metric, axis)
    found = [g for g in data.groups.values() if g.runs]
    fits, run = _reweighted(found, data, metric)
    pooled = run.pooled if run is not None else None
    run_df_total = run.df if run is not None else 0.0
    by_x = run.by_x if run is not None else []
    run_at = run.at if run is not None else {}
    keys = [k for k, g in data.groups.items() if g.runs]
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
                group="/".join(keys[i]),  # verdict.json's name of it: slice/group
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

"""The verdict engine: measurements in, a `Verdict` out, by the method of VERDICTS.md.

Pure functions only: no files, clocks or printing. The runner's verify policy calls
`surprising_cells` / `inconclusive_cells` between stages, `report` renders the `Verdict`, and
`ingest` feeds it measurements built from bench_serving files.

Why it is built this way: n per cell is 1 to 5, so rank tests and bootstraps cannot decide.
Every comparison is a log ratio d = ln(candidate / baseline) of geometric means, signed so + is
better; its interval uses one noise σ per metric pooled over the whole run on the log scale
(best source first: fresh-server replicates, then warm repeats, then the declared prior) with
Student's t at the pooled degrees of freedom; the verdict is TOST-style against the practical
margin m, taken as ±ln(1 + m) on the log scale so the band is symmetric in ratio terms.
Multiplicity: with many cells, about (1 − confidence) of them may flag by chance; we state that
(`Verdict.multiplicity`) rather than apply Holm, because the margin test already demands more
than significance and the verify policy re-measures isolated flags.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from scipy import stats

from matrixrun.measurement import Measurement
from matrixrun.metrics import higher_is_better, unit
from matrixrun.verdict import (
    AnalysisSettings,
    ArmSample,
    CandidateResult,
    Cell,
    CellRef,
    CellVerdict,
    Crossover,
    LimitingArm,
    MetricResult,
    Overall,
    Regime,
    Rerun,
    Series,
    Sigma,
    SigmaSource,
    SliceResult,
    Verdict,
)

__all__ = [
    "AnalysisSettings",
    "Verdict",
    "analyse",
    "arm_sample",
    "compare",
    "crossover_estimate",
    "estimate_sigma",
    "format_cell",
    "format_change",
    "format_sigma",
    "inconclusive_cells",
    "interval",
    "iter_cells",
    "judge",
    "limiting_arm",
    "look_of",
    "pooled_sigma",
    "quantile",
    "reruns",
    "runs_needed",
    "surprising_cells",
]

MINUS = "\u2212"
#: Beyond this many runs per arm a cell is "at the margin": more runs are not the answer.
MAX_RUNS_ESTIMATE = 1000

_SOURCE_WORDS: dict[SigmaSource, str] = {
    "fresh_server": "fresh-server replicates",
    "warm": "warm repeats on the same server: within-instance only, may understate",
    "prior": "declared prior, not measured",
    "none": "no noise estimate",
}


# --------------------------------------------------------------------------- numbers


def quantile(level: float, df: float | None) -> float:
    """Two-sided quantile for a `level` interval: Student's t, or the normal when df is None
    (a declared prior is taken as known)."""
    p = 1 - (1 - level) / 2
    if df is None:
        return float(stats.norm.ppf(p))
    return float(stats.t.ppf(p, df))


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


class WarmupGap(NamedTuple):
    """How much an arm's later runs on a server beat the first (log scale, + = better)."""

    gap: float
    pairs: int


#: A cell's note when an arm's repeats on one server were counted once (`effective_n`).
ONE_SERVER_NOTE = (
    "repeats on one server count once toward the interval: σ is the server-to-server one"
)


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
        return "better", False
    if hi < -m:
        return "worse", False
    if -m < lo and hi < m:
        return "same", False
    return "inconclusive", lo > 0 or hi < 0


def limiting_arm(n_baseline: int, n_candidate: int) -> LimitingArm:
    """The arm whose next run shrinks the interval most: the one with fewer runs. Rerunning
    only one arm cannot bring σ·√(1/n_a + 1/n_b) below σ·√(1/n_other)."""
    if n_baseline < n_candidate:
        return "baseline"
    if n_candidate < n_baseline:
        return "candidate"
    return "both"


def runs_needed(d: float, sigma: float | None, margin: float, level: float) -> int | None:
    """About how many runs per arm (both arms at n) would make the interval decide, if σ holds
    and the observed change is the true one (normal quantile: more runs also bring df).
    None when there is no σ, or the change sits (practically) on the margin."""
    if sigma is None or sigma <= 0:
        return None
    gap = abs(abs(d) - math.log1p(margin))
    if gap <= 0:
        return None
    n = math.ceil(2 * (quantile(level, None) * sigma / gap) ** 2)
    n = max(n, 2)
    return n if n <= MAX_RUNS_ESTIMATE else None


def crossover_estimate(x1: float, x2: float, d1: float, d2: float) -> float | None:
    """Where d crosses zero between (x1, d1) and (x2, d2), interpolating linearly in log x:
    c* = x1·(x2/x1)^(d1/(d1 − d2)). None when x is not positive or d does not change sign."""
    if x1 <= 0 or x2 <= 0 or d1 == d2 or (d1 > 0) == (d2 > 0):
        return None
    return float(x1 * (x2 / x1) ** (d1 / (d1 - d2)))


# --------------------------------------------------------------------------- formatting


def _signed(value: float, decimals: int = 1) -> str:
    text = f"{value:+.{decimals}f}"
    if float(text) == 0:
        text = "+" + text[1:]
    return text.replace("-", MINUS)


def format_change(change: float, decimals: int = 1) -> str:
    """A relative change as people read it: 0.672 → '+67.2%', −0.283 → '−28.3%'."""
    return _signed(100 * change, decimals) + "%"


def format_interval(lo: float, hi: float) -> str:
    return f"[{_signed(100 * lo)}, {_signed(100 * hi)}]"


def format_cell(
    change: float | None,
    lo: float | None,
    hi: float | None,
    n_baseline: int,
    n_candidate: int,
    verdict: CellVerdict,
    *,
    provisional: bool = False,
    note: str = "",
) -> str:
    """benchstat/criterion style: '−28.3% [−31.0, −25.5] n=2/2 worse',
    '~ +1.1% [−3.0, +5.4] n=3/3 same'. n is baseline/candidate; '~' marks same/inconclusive."""
    parts = []
    if verdict in ("same", "inconclusive"):
        parts.append("~")
    parts.append("n/a" if change is None else format_change(change))
    if lo is not None and hi is not None:
        parts.append(format_interval(lo, hi))
    parts.append(f"n={n_baseline}/{n_candidate}")
    parts.append(verdict)
    text = " ".join(parts)
    extras = [e for e in (("provisional" if provisional else ""), note) if e]
    if extras:
        text += " (" + "; ".join(extras) + ")"
    return text


def _percent(sigma: float) -> str:
    pct = 100 * sigma
    if pct == 0:
        return "0%"
    if pct >= 0.1:
        return f"{pct:.1f}%"
    return f"{pct:.2g}%"


def format_sigma(sigma: float | None, df: float | None, source: SigmaSource) -> str:
    """'σ = 1.2% (df = 4, fresh-server replicates)'."""
    if source == "none" or sigma is None:
        return "no noise estimate (every cell has n = 1 and no noise prior is declared)"
    if df is None:
        return f"σ = {_percent(sigma)} ({_SOURCE_WORDS[source]})"
    return f"σ = {_percent(sigma)} (df = {df:g}, {_SOURCE_WORDS[source]})"


def _num(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def _label(axis: str, x: float | None, point: dict[str, Any]) -> str:
    if x is not None:
        return f"{axis} {_num(x)}"
    return ", ".join(f"{k} {_num(v)}" for k, v in point.items()) or "the only point"


# --------------------------------------------------------------------------- samples & σ


def _value(m: Measurement, metric: str) -> float | None:
    if not m.ok or m.metrics is None:
        return None
    v = m.metrics.get(metric)
    if v is None or not math.isfinite(v) or v <= 0:
        return None
    return v


def arm_sample(arm: str, measurements: Sequence[Measurement], metric: str) -> ArmSample:
    """One arm's measurements at one point: successful values, failures, failure rate.
    Failed measurements are kept in the counts (a rerun never replaces anything)."""
    values: list[float] = []
    instances: list[str] = []
    errors: list[str] = []
    failed_measurements = failed_requests = total_requests = 0
    for m in measurements:
        if m.metrics is not None:
            failed_requests += m.metrics.failed
            total_requests += m.metrics.completed + m.metrics.failed
        if not m.ok:
            failed_measurements += 1
            errors.append(m.error or "no request completed")
            continue
        v = _value(m, metric)
        if v is not None:
            values.append(v)
            instances.append(m.instance)
    mean = math.exp(sum(math.log(v) for v in values) / len(values)) if values else None
    return ArmSample(
        arm=arm,
        values=values,
        n=len(values),
        mean=mean,
        instances=instances,
        reasons=[m.reason for m in measurements],
        failed_measurements=failed_measurements,
        errors=errors,
        failed_requests=failed_requests,
        total_requests=total_requests,
        failure_rate=failed_requests / total_requests if total_requests else 0.0,
    )


def estimate_sigma(
    measurements: Iterable[Measurement], metric: str, prior: float | None = None
) -> Sigma:
    """σ of one measurement's log value for `metric`, pooled over every (slice, point, arm) of
    the run, from the best source available (VERDICTS.md §2):

    - fresh-server: per (slice, point, arm), the log means of its distinct server instances
      (fresh-server reruns and A/A runs land on new instances) — the right variance, because
      arms are always compared across instances;
    - warm: per (slice, point, arm, instance), repeats on the same server — within-instance
      only, so it may understate;
    - prior: the declared relative σ, as ln(1 + noise), with infinite df.
    """
    by_cell: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for m in measurements:
        v = _value(m, metric)
        if v is None:
            continue
        cell = by_cell.setdefault((m.slice, m.point_id, m.arm), {})
        cell.setdefault(m.instance, []).append(math.log(v))
    warm_groups = [vals for cell in by_cell.values() for vals in cell.values()]
    fresh_groups = [
        [sum(vals) / len(vals) for vals in cell.values()]
        for cell in by_cell.values()
        if len(cell) >= 2
    ]
    warm, warm_df = pooled_sigma(warm_groups)
    fresh, fresh_df = pooled_sigma(fresh_groups)
    prior_log = math.log1p(prior) if prior is not None else None
    value: float | None
    df: float | None
    source: SigmaSource
    if fresh is not None:
        value, df, source = fresh, fresh_df, "fresh_server"
    elif warm is not None:
        value, df, source = warm, warm_df, "warm"
    elif prior_log is not None:
        value, df, source = prior_log, None, "prior"
    else:
        value, df, source = None, None, "none"
    return Sigma(
        metric=metric,
        value=value,
        df=df,
        source=source,
        fresh_value=fresh,
        fresh_df=fresh_df,
        warm_value=warm,
        warm_df=warm_df,
        prior=prior,
        text=format_sigma(value, df, source),
    )


def warmup_gaps(measurements: Iterable[Measurement], metric: str) -> dict[str, WarmupGap]:
    """Per arm, how much later runs on a server beat the first run of the same cell on it:
    the mean signed log gain over every such pair (+ = the later run is better for `metric`),
    and the number of pairs. First-run JIT compile or warmup shows here as a positive gap; an
    arm with no repeat on any server has no entry."""
    sign = 1.0 if higher_is_better(metric) else -1.0
    runs: dict[tuple[str, str, str, str], list[tuple[int, float]]] = {}
    for m in measurements:
        v = _value(m, metric)
        if v is not None:
            runs.setdefault((m.slice, m.point_id, m.arm, m.instance), []).append(
                (m.attempt, math.log(v))
            )
    gains: dict[str, list[float]] = {}
    for (_, _, arm, _), values in runs.items():
        values.sort()
        first = values[0][1]
        gains.setdefault(arm, []).extend(sign * (v - first) for _, v in values[1:])
    return {arm: WarmupGap(gap=sum(g) / len(g), pairs=len(g)) for arm, g in gains.items() if g}


# --------------------------------------------------------------------------- one cell


#: How a cell's note starts when confirmed first-run warmup took its verdict's confidence.
WARMUP_NOTE = "first-run warmup could account for it"

#: One-sided 95% normal quantile: a warmup gap must exceed what noise explains at this level.
WARMUP_Z = 1.645


def confirmed_warmup(w: WarmupGap, margin: float, sigma: float | None) -> bool:
    """Is an arm's first-run warmup confirmed? Its later runs must beat the first by more than
    the margin on average *and* by more than noise explains: z·√2·σ/√pairs (a difference of
    two runs has σ√2). Why the second condition: warm reruns are run where the arm looked
    slow, so by regression to the mean a rerun tends to beat its first run even with no
    warmup at all; the run's σ (server-to-server when measured, ≥ the within-server one)
    keeps that from passing for warmup."""
    floor = WARMUP_Z * math.sqrt(2) * sigma / math.sqrt(w.pairs) if sigma else 0.0
    return w.gap > max(math.log1p(margin), floor)


def _warmup_shift(
    baseline: ArmSample,
    candidate: ArmSample,
    warmup: dict[str, WarmupGap],
    margin: float,
    sigma: float | None = None,
) -> tuple[float, str]:
    """How far first-run warmup may have moved d, and why. Each server's first run of an arm
    is its cold one, so an arm with a confirmed gap g (`confirmed_warmup`) looks worse by
    g × (its servers / its runs); the shift undoes that for both arms. A sensitivity check
    only: it never decides a cell, it can only take a verdict's confidence away. (0, "") when
    neither arm has a confirmed gap."""
    shift = 0.0
    reasons = []
    for role, a in ((1.0, candidate), (-1.0, baseline)):
        w = warmup.get(a.arm)
        if w is None or not a.n or not confirmed_warmup(w, margin, sigma):
            continue
        cold = len(set(a.instances))
        shift += role * w.gap * cold / a.n
        reasons.append(
            f"later runs of {a.arm} on a server beat the first by "
            f"{format_change(math.expm1(w.gap))} ({w.pairs} pair(s)); {cold} of its {a.n} "
            "run(s) here were first on their server"
        )
    return shift, "; ".join(reasons)


def compare(
    baseline: ArmSample,
    candidate: ArmSample,
    *,
    metric: str,
    sigma: Sigma,
    settings: AnalysisSettings,
    point_id: str = "",
    point: dict[str, Any] | None = None,
    x: float | None = None,
    warmup: dict[str, WarmupGap] | None = None,
) -> Cell:
    """Judge one cell: candidate against baseline on one metric (VERDICTS.md §1, 4, 5, 7).
    `warmup` (from `warmup_gaps`): for an arm with confirmed first-run warmup
    (`confirmed_warmup`), a verdict that its cold first runs could account for is not
    confident (`_warmup_shift`), and the cell's first note starts with `WARMUP_NOTE`."""
    point = point or {}
    sign = 1.0 if higher_is_better(metric) else -1.0
    n_b, n_c = baseline.n, candidate.n
    notes: list[str] = []
    limit = settings.failure_limit

    def failing(a: ArmSample) -> bool:
        return a.failure_rate > limit or a.failed_measurements > 0

    for role, a in (("baseline", baseline), ("candidate", candidate)):
        if a.failed_measurements:
            notes.append(f"{role}: {a.failed_measurements} failed measurement(s)")
        if a.failure_rate > limit:
            notes.append(f"{role} failed {100 * a.failure_rate:.1f}% of requests")

    if n_b == 0 or n_c == 0:
        missing = "baseline" if n_b == 0 else "candidate"
        note = f"no successful measurement of the {missing}"
        return Cell(
            point_id=point_id,
            point=point,
            x=x,
            baseline=baseline,
            candidate=candidate,
            change=None,
            d=None,
            verdict="inconclusive",
            confident=False,
            provisional=False,
            notes=[note, *notes],
            text=format_cell(None, None, None, n_b, n_c, "inconclusive", note=note),
        )

    assert baseline.mean is not None and candidate.mean is not None
    raw = math.log(candidate.mean) - math.log(baseline.mean)
    d = sign * raw
    change = math.expm1(raw)
    provisional = n_b == 1 or n_c == 1
    surprise = abs(change) > settings.surprise
    verdict: CellVerdict
    if sigma.value is None:
        verdict, small = "inconclusive", False
        note = "no noise estimate"
        return Cell(
            point_id=point_id,
            point=point,
            x=x,
            baseline=baseline,
            candidate=candidate,
            change=change,
            d=d,
            verdict=verdict,
            confident=False,
            provisional=provisional,
            surprise=surprise,
            limiting_arm=limiting_arm(n_b, n_c),
            notes=[note, *notes],
            text=format_cell(change, None, None, n_b, n_c, verdict, note=note),
        )

    look = look_of(baseline, candidate, settings.looks)
    level = settings.level_at(look)
    e_b, e_c = float(n_b), float(n_c)
    if sigma.source == "fresh_server":
        e_b, e_c = effective_n(baseline.instances), effective_n(candidate.instances)
        if (e_b, e_c) != (n_b, n_c):
            notes.append(ONE_SERVER_NOTE)
    d_lo, d_hi = interval(d, sigma.value, sigma.df, e_b, e_c, level)
    verdict, small = judge(d_lo, d_hi, settings.margin)
    note = ""
    # §7: an arm failing more than the limit cannot be called better there.
    if verdict == "better" and failing(candidate):
        verdict, small = "inconclusive", d_lo > 0
        note = "candidate fails too many requests to be called better"
    elif verdict == "worse" and failing(baseline):
        verdict, small = "inconclusive", d_hi < 0
        note = "baseline fails too many requests to be called better"
    shift, why = _warmup_shift(baseline, candidate, warmup or {}, settings.margin, sigma.value)
    if shift and verdict != "inconclusive":
        moved, _ = judge(d_lo + shift, d_hi + shift, settings.margin)
        if moved != verdict:
            verdict, small = "inconclusive", False
            note = f"{WARMUP_NOTE}: {why}"
    if small:
        notes.append("small change, below the margin or not yet shown to exceed it")
    if note:
        notes.insert(0, note)
    r_lo, r_hi = sorted((sign * d_lo, sign * d_hi))
    change_lo, change_hi = math.expm1(r_lo), math.expm1(r_hi)
    confident = verdict in ("better", "worse")
    return Cell(
        point_id=point_id,
        point=point,
        x=x,
        baseline=baseline,
        candidate=candidate,
        change=change,
        change_lo=change_lo,
        change_hi=change_hi,
        d=d,
        d_lo=d_lo,
        d_hi=d_hi,
        verdict=verdict,
        confident=confident,
        provisional=provisional,
        look=look,
        level=level,
        small_change=small,
        surprise=surprise,
        limiting_arm=None if confident or verdict == "same" else limiting_arm(n_b, n_c),
        runs_needed=(
            None
            if verdict != "inconclusive"
            else runs_needed(d, sigma.value, settings.margin, settings.level)
        ),
        notes=notes,
        text=format_cell(
            change,
            change_lo,
            change_hi,
            n_b,
            n_c,
            verdict,
            provisional=provisional,
            note=note or ("small change" if small else ""),
        ),
    )


# --------------------------------------------------------------------------- along the axis


def regimes(cells: Sequence[Cell], axis: str) -> list[Regime]:
    """Runs of consecutive cells (in axis order) with the same verdict."""
    out: list[Regime] = []
    for cell in cells:
        if out and out[-1].verdict == cell.verdict:
            last = out[-1]
            last.x_to = cell.x
            last.point_ids.append(cell.point_id)
        else:
            out.append(
                Regime(
                    verdict=cell.verdict,
                    x_from=cell.x,
                    x_to=cell.x,
                    point_ids=[cell.point_id],
                    text="",
                )
            )
    for r in out:
        if r.x_from is None or r.x_to is None:
            where = f"{len(r.point_ids)} point(s)"
        elif r.x_from == r.x_to:
            where = f"{axis} {_num(r.x_from)}"
        else:
            where = f"{axis} {_num(r.x_from)}–{_num(r.x_to)}"
        r.text = f"{r.verdict} at {where}"
    return out


def crossovers(cells: Sequence[Cell], axis: str) -> tuple[list[Crossover], bool]:
    """Sign changes among confident cells along the axis: brackets between the last confident
    cell of one sign and the first of the other, with the log-interpolated estimate.
    Returns (crossovers, non_monotone) — more than one sign change means re-measure."""
    confident = [c for c in cells if c.confident and c.x is not None and c.d is not None]
    out: list[Crossover] = []
    for a, b in itertools.pairwise(confident):
        if a.verdict == b.verdict:
            continue
        assert a.x is not None and b.x is not None and a.d is not None and b.d is not None
        est = crossover_estimate(a.x, b.x, a.d, b.d)
        text = f"crossover between {axis} {_num(a.x)} and {_num(b.x)}"
        if est is not None:
            text += f" (≈ {est:.0f}, interpolated in log {axis})"
        out.append(
            Crossover(
                direction="better_to_worse" if a.verdict == "better" else "worse_to_better",
                x_lo=a.x,
                x_hi=b.x,
                estimate=est,
                text=text,
            )
        )
    return out, len(out) > 1


def _x(point: dict[str, Any], axis: str) -> float | None:
    v = point.get(axis)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _series_key(point: dict[str, Any], axis: str) -> str:
    return json.dumps({k: v for k, v in point.items() if k != axis}, sort_keys=True, default=str)


# --------------------------------------------------------------------------- overall


def overall(
    cells: Sequence[Cell],
    *,
    metric: str,
    settings: AnalysisSettings,
    sigma: Sigma,
    crossover_texts: Sequence[str] = (),
    non_monotone: bool = False,
) -> Overall:
    """better / worse (confident cells of one sign only), mixed (both signs), same (every cell
    equivalent), inconclusive (say what would settle it) — VERDICTS.md §8."""
    axis = settings.axis
    counts = {v: sum(1 for c in cells if c.verdict == v) for v in ("better", "worse", "same")}
    inconclusive = len(cells) - sum(counts.values())
    better = [c for c in cells if c.verdict == "better"]
    worse = [c for c in cells if c.verdict == "worse"]
    confident = better + worse
    provisional = any(c.provisional for c in confident) or (
        not confident and any(c.provisional for c in cells if c.verdict == "same")
    )
    needed = [c.runs_needed for c in cells if c.runs_needed is not None]
    runs = max(needed) if needed else None

    def where(group: Sequence[Cell]) -> str:
        xs = [c.x for c in group]
        fixed = {_series_key(c.point, axis) for c in group}
        if len(fixed) == 1 and all(x is not None for x in xs):
            return f"{axis} " + ", ".join(_num(x) for x in xs)
        return "; ".join(_label(axis, c.x, c.point) for c in group)

    def span(group: Sequence[Cell]) -> str:
        ch = sorted(c.change for c in group if c.change is not None)
        if not ch:
            return ""
        if len(ch) == 1:
            return format_change(ch[0])
        return f"{format_change(ch[0])} to {format_change(ch[-1])}"

    rest = len(cells) - len(confident)
    tail = f"; the other {rest} cell(s) are same or inconclusive" if rest else ""
    verdict: Any
    if better and worse:
        verdict = "mixed"
        sentence = (
            f"mixed on {metric}: better at {where(better)} ({span(better)}), "
            f"worse at {where(worse)} ({span(worse)})"
        )
        if non_monotone:
            sentence += "; the sign changes more than once along the axis: non-monotone, re-measure"
        elif crossover_texts:
            sentence += "; " + "; ".join(crossover_texts)
        sentence += "."
    elif better or worse:
        verdict = "better" if better else "worse"
        group = better or worse
        sentence = (
            f"{verdict} on {metric} at {where(group)} ({span(group)}, beyond the "
            f"±{100 * settings.margin:g}% margin){tail}."
        )
    elif cells and counts["same"] == len(cells):
        verdict = "same"
        sentence = (
            f"same on {metric}: every cell ({len(cells)}) is within "
            f"±{100 * settings.margin:g}% at {100 * settings.level:g}% confidence."
        )
    else:
        verdict = "inconclusive"
        if not cells:
            sentence = f"inconclusive on {metric}: no cell has measurements of both arms."
        elif sigma.value is None:
            sentence = (
                f"inconclusive on {metric}: there is no noise estimate (n = 1 everywhere, no "
                "declared prior); rerun some cells on a fresh server, or declare the noise."
            )
        else:
            sentence = (
                f"inconclusive on {metric}: no cell clears the ±{100 * settings.margin:g}% margin"
            )
            if runs is not None:
                sentence += (
                    f"; about {runs} runs per arm in the undecided cells would settle it "
                    f"(if {sigma.text.split(' (')[0]} holds)"
                )
            else:
                sentence += (
                    "; the observed changes sit on the margin, so more runs alone may not settle it"
                )
            sentence += "."
    if provisional:
        sentence += " Provisional: it rests on cells with n = 1."
    if verdict != "inconclusive" and sigma.source == "warm":
        sentence += " σ comes from warm repeats only (within-instance), which may understate."
    elif verdict != "inconclusive" and sigma.source == "prior":
        sentence += " σ is the declared prior, not measured."
    return Overall(
        verdict=verdict,
        provisional=provisional,
        better=counts["better"],
        worse=counts["worse"],
        same=counts["same"],
        inconclusive=inconclusive,
        runs_needed=runs if verdict == "inconclusive" else None,
        sentence=sentence,
    )


# --------------------------------------------------------------------------- reruns


def reruns(
    measurements: Sequence[Measurement], metric: str, margin: float, axis: str = "concurrency"
) -> list[Rerun]:
    """Every repeat (attempt > first) of a cell, set against that cell's first run: a warm rerun
    tests "first-run warmup / JIT compile", a fresh-server rerun tests "this instance was odd".
    Nothing is replaced: this only says what each rerun showed."""
    groups: dict[tuple[str, str, str], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.slice, m.point_id, m.arm), []).append(m)
    out: list[Rerun] = []
    for (slice_name, pid, arm), ms in groups.items():
        if len(ms) < 2:
            continue
        ms = sorted(ms, key=lambda m: m.attempt)
        first = ms[0]
        first_value = _value(first, metric)
        for m in ms[1:]:
            value = _value(m, metric)
            same = m.instance == first.instance
            test = (
                "same warm server: tests first-run warmup/JIT"
                if same
                else f"fresh server {m.instance}: tests an odd server instance"
            )
            where = _label(axis, _x(m.point, axis), m.point)
            head = f"{arm} at {where}, attempt {m.attempt} ({m.reason}; {test})"
            change: float | None = None
            matches: bool | None = None
            if value is None or first_value is None:
                shown = "failed" if value is None else "the first run failed"
                text = f"{head}: {shown}" + (f" ({m.error})" if m.error else "") + "."
            else:
                r = math.log(value / first_value)
                change = math.expm1(r)
                # judged on the change as printed (rerun / first − 1), so "within ±3%" never
                # sits beside a printed −2.95%
                matches = abs(change) <= margin
                text = (
                    f"{head}: {value:.6g} vs {first_value:.6g} {unit(metric)} first "
                    f"({format_change(change, 2)}): "
                )
                if matches:
                    text += f"matches the first run within ±{100 * margin:g}%, so "
                    text += "warmup does not explain it." if same else "the instance does not."
                else:
                    improved = (r > 0) == higher_is_better(metric)
                    if same:
                        text += (
                            "better than the first run: consistent with first-run warmup."
                            if improved
                            else "worse than the first run: the server drifts."
                        )
                    else:
                        text += "differs from the first run: server instances differ."
            out.append(
                Rerun(
                    slice=slice_name,
                    arm=arm,
                    point_id=pid,
                    point=m.point,
                    attempt=m.attempt,
                    reason=m.reason,
                    instance=m.instance,
                    same_instance=same,
                    metric=metric,
                    value=value,
                    first_value=first_value,
                    change_vs_first=change,
                    matches_first=matches,
                    text=text,
                )
            )
    return out


# --------------------------------------------------------------------------- the whole run


def _first_seen(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def analyse(measurements: Sequence[Measurement], settings: AnalysisSettings) -> Verdict:
    """Judge every candidate against the baseline, per slice, metric and sweep point."""
    arms = _first_seen(m.arm for m in measurements)
    candidates = settings.candidates or [a for a in arms if a != settings.baseline]
    warnings: list[str] = []
    if measurements and settings.baseline not in arms:
        warnings.append(
            f"the baseline arm {settings.baseline!r} has no measurements; arms seen: "
            + ", ".join(arms)
        )

    sigmas = {
        metric: estimate_sigma(measurements, metric, settings.noise) for metric in settings.metrics
    }
    for s in sigmas.values():
        if s.source == "warm":
            warnings.append(
                f"σ for {s.metric} comes from warm repeats on the same server ({s.text}): "
                "cross-server noise, which separates arms, may be larger; rerun some cells on a "
                "fresh server."
            )
        elif s.source == "none":
            warnings.append(
                f"no noise estimate for {s.metric}: every cell has n = 1 and no prior is "
                "declared, so no cell can be decided."
            )
        if s.prior is not None and s.value is not None and s.source != "prior":
            prior_log = math.log1p(s.prior)
            if s.value < prior_log / 2:
                warnings.append(
                    f"measured σ for {s.metric} ({_percent(s.value)}) is less than half the "
                    f"declared prior ({_percent(prior_log)})."
                )
        if s.df == 1:
            warnings.append(
                f"σ for {s.metric} has df = 1 (t = {quantile(settings.level, 1):.1f}): "
                "one pair of repeats buys little."
            )

    gaps = {metric: warmup_gaps(measurements, metric) for metric in settings.metrics}
    for arm, w in gaps[settings.primary].items():
        if confirmed_warmup(w, settings.margin, sigmas[settings.primary].value):
            warnings.append(
                f"first-run warmup on {arm}: its later runs on a server beat the first by "
                f"{format_change(math.expm1(w.gap))} on average ({w.pairs} pair(s), "
                f"{settings.primary}), beyond the margin and beyond what noise explains: a "
                "verdict its cold first runs could account for is inconclusive (warm each cell "
                "up before measuring it, e.g. more workload.warmup_requests)."
            )
    by_key: dict[tuple[str, str, str], list[Measurement]] = {}
    points: dict[str, dict[str, dict[str, Any]]] = {}
    for m in measurements:
        by_key.setdefault((m.slice, m.point_id, m.arm), []).append(m)
        points.setdefault(m.slice, {}).setdefault(m.point_id, m.point)

    slices: list[SliceResult] = []
    all_primary: dict[str, list[Cell]] = {c: [] for c in candidates}
    per_slice_overall: dict[str, list[tuple[str, Overall]]] = {c: [] for c in candidates}
    judged = 0
    for slice_name, slice_points in points.items():
        # Group points into series along the main axis (other point keys fixed), in x order.
        series_points: dict[str, list[str]] = {}
        for pid, point in slice_points.items():
            series_points.setdefault(_series_key(point, settings.axis), []).append(pid)
        cand_results: list[CandidateResult] = []
        for cand in candidates:
            metric_results: list[MetricResult] = []
            for metric in settings.metrics:
                sigma = sigmas[metric]
                series_list: list[Series] = []
                metric_cells: list[Cell] = []
                cross_texts: list[str] = []
                non_mono = False
                for key, pids in series_points.items():
                    cells: list[Cell] = []
                    for pid in pids:
                        base_ms = by_key.get((slice_name, pid, settings.baseline), [])
                        cand_ms = by_key.get((slice_name, pid, cand), [])
                        if not base_ms or not cand_ms:
                            continue
                        point = slice_points[pid]
                        cells.append(
                            compare(
                                arm_sample(settings.baseline, base_ms, metric),
                                arm_sample(cand, cand_ms, metric),
                                metric=metric,
                                sigma=sigma,
                                settings=settings,
                                point_id=pid,
                                point=point,
                                x=_x(point, settings.axis),
                                warmup=gaps[metric],
                            )
                        )
                    if not cells:
                        continue
                    cells.sort(key=lambda c: (c.x is None, c.x or 0.0))
                    crosses, nm = crossovers(cells, settings.axis)
                    fixed = json.loads(key)
                    regs = regimes(cells, settings.axis)
                    text = "; ".join(r.text for r in regs)
                    if nm:
                        text += "; non-monotone, re-measure"
                    elif crosses:
                        text += "; " + crosses[0].text
                    series_list.append(
                        Series(
                            fixed=fixed,
                            cells=cells,
                            regimes=regs,
                            crossovers=crosses,
                            non_monotone=nm,
                            text=text,
                        )
                    )
                    metric_cells += cells
                    non_mono = non_mono or nm
                    cross_texts += [c.text for c in crosses]
                ov = overall(
                    metric_cells,
                    metric=metric,
                    settings=settings,
                    sigma=sigma,
                    crossover_texts=cross_texts,
                    non_monotone=non_mono,
                )
                metric_results.append(
                    MetricResult(
                        metric=metric,
                        higher_is_better=higher_is_better(metric),
                        unit=unit(metric),
                        primary=metric == settings.primary,
                        sigma=sigma,
                        series=series_list,
                        overall=ov,
                    )
                )
                if metric == settings.primary:
                    judged += len(metric_cells)
                    all_primary[cand] += metric_cells
                    per_slice_overall[cand].append((slice_name, ov))
                    for c in metric_cells:
                        for role, a in (("baseline", c.baseline), ("candidate", c.candidate)):
                            if a.failed_measurements:
                                warnings.append(
                                    f"{a.arm} ({role}) at {_label(settings.axis, c.x, c.point)}"
                                    + (f" [{slice_name}]" if slice_name else "")
                                    + f": {a.failed_measurements} failed measurement(s): "
                                    + "; ".join(_first_seen(a.errors))
                                )
            agreement = settings.correctness.get(cand)
            suspect = agreement is not None and agreement < settings.correctness_min
            primary_overall = metric_results[0].overall
            if suspect:
                assert agreement is not None
                primary_overall = primary_overall.model_copy(
                    update={
                        "sentence": primary_overall.sentence
                        + f" Suspect: its outputs agree with the baseline's on only "
                        f"{100 * agreement:.1f}% of checks."
                    }
                )
            cand_results.append(
                CandidateResult(
                    candidate=cand,
                    suspect=suspect,
                    correctness=agreement,
                    metrics=metric_results,
                    overall=primary_overall,
                )
            )
        slices.append(SliceResult(slice=slice_name, candidates=cand_results))

    overall_by_cand: dict[str, Overall] = {}
    for cand in candidates:
        per = per_slice_overall[cand]
        if not all_primary[cand]:
            warnings.append(
                f"{cand} shares no measured point with the baseline {settings.baseline!r}: "
                "nothing to compare."
            )
        if len(per) == 1:
            ov = per[0][1]
        else:
            ov = overall(
                all_primary[cand], metric=settings.primary, settings=settings,
                sigma=sigmas[settings.primary],
            )  # fmt: skip
            if per:
                ov.sentence += (
                    " By slice: " + "; ".join(f"{s or '—'}: {o.verdict}" for s, o in per) + "."
                )
        agreement = settings.correctness.get(cand)
        if agreement is not None and agreement < settings.correctness_min:
            warnings.append(
                f"{cand}'s outputs agree with the baseline's on only {100 * agreement:.1f}% of "
                f"checks (< {100 * settings.correctness_min:g}%): treat its speed as suspect."
            )
            ov = ov.model_copy(
                update={
                    "sentence": ov.sentence + " Suspect: its outputs agree with the baseline's "
                    f"on only {100 * agreement:.1f}% of checks."
                }
            )
        overall_by_cand[cand] = ov

    provisional_cells = sum(1 for cells in all_primary.values() for c in cells if c.provisional)
    if provisional_cells:
        warnings.append(
            f"{provisional_cells} of {judged} cells have n = 1 in an arm: their verdicts are "
            "provisional (the interval exists only through the pooled or declared σ)."
        )
    one_server = sum(
        1 for cells in all_primary.values() for c in cells if ONE_SERVER_NOTE in c.notes
    )
    if one_server:
        warnings.append(
            f"{one_server} of {judged} cells have an arm with repeats on one server (warm "
            "reruns): n counts all runs, but their interval counts the repeats on each server "
            "once (σ is the server-to-server one; a warm rerun cannot average away its "
            "server's offset)."
        )
    alpha = 1 - settings.level
    multiplicity = (
        f"{judged} cells judged at {100 * settings.level:.4g}% confidence"
        + (" or stricter: at most about " if settings.looks > 1 else ": about ")
        + f"{judged * alpha:.1f} may flag by chance; no multiplicity correction is applied, "
        "so treat an isolated flag as a lead to re-measure."
    )
    if judged * alpha >= 0.5:
        warnings.append(multiplicity)
    return Verdict(
        settings=settings,
        level=settings.level,
        sigma=list(sigmas.values()),
        slices=slices,
        overall=overall_by_cand,
        cells_judged=judged,
        multiplicity=multiplicity,
        reruns=reruns(measurements, settings.primary, settings.margin, settings.axis),
        warnings=warnings,
    )


# --------------------------------------------------------------------------- verify helpers


def iter_cells(verdict: Verdict, metric: str | None = None) -> Iterable[tuple[str, str, str, Cell]]:
    """Every (slice, candidate, metric, cell) in the verdict; only `metric` when given."""
    for s in verdict.slices:
        for c in s.candidates:
            for mr in c.metrics:
                if metric is not None and mr.metric != metric:
                    continue
                for series in mr.series:
                    for cell in series.cells:
                        yield s.slice, c.candidate, mr.metric, cell


def _ref(slice_name: str, cand: str, metric: str, cell: Cell) -> CellRef:
    return CellRef(
        slice=slice_name,
        candidate=cand,
        metric=metric,
        point_id=cell.point_id,
        point=cell.point,
        change=cell.change,
        verdict=cell.verdict,
        n_baseline=cell.baseline.n,
        n_candidate=cell.candidate.n,
        limiting_arm=cell.limiting_arm,
        runs_needed=cell.runs_needed,
        text=cell.text,
    )


def surprising_cells(
    measurements: Sequence[Measurement], settings: AnalysisSettings, metric: str | None = None
) -> list[CellRef]:
    """Cells whose |change| exceeds `settings.surprise` on the primary metric (or `metric`):
    the ones an explanation check should rerun (VERDICTS.md §6)."""
    verdict = analyse(measurements, settings)
    return [
        _ref(s, c, m, cell)
        for s, c, m, cell in iter_cells(verdict, metric or settings.primary)
        if cell.surprise
    ]


def inconclusive_cells(
    measurements: Sequence[Measurement], settings: AnalysisSettings, metric: str | None = None
) -> list[CellRef]:
    """Inconclusive cells on the primary metric (or `metric`), each with the arm whose n limits
    its interval and about how many runs per arm would settle it (VERDICTS.md §6 stage 2)."""
    verdict = analyse(measurements, settings)
    return [
        _ref(s, c, m, cell)
        for s, c, m, cell in iter_cells(verdict, metric or settings.primary)
        if cell.verdict == "inconclusive"
    ]

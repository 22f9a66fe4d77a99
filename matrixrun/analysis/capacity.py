"""Capacity under an SLO: per arm, the highest load at which every bound holds, bracketed
between measured loads, the throughput and goodput there, and the arms' capacities compared.

Pure: measurements (and per-request goodput counted by the caller from the records it read)
in, a `core.capacity.Capacity` out; no files, no words.

The method, and why it claims no more than the sweep gives:

* A load *meets* the SLO when every bound holds on the arm's geometric mean over its runs
  there (as the SLO table always judged). Capacity lies after the last load that meets and
  before the first that misses (`last_meeting`, `first_missing`); `estimate` interpolates,
  in log-log, where the binding bound is crossed between the two, and is only that.
* The bracket that counts is wider where runs disagree: `lo` is the highest load at which,
  and below which, every bound holds even at the far end of the t-interval of the arm's log
  mean there; `hi` is the lowest load that misses a bound beyond it. The interval's σ is the
  run-to-run spread of the bound's metric pooled over every cell with repeated runs (on the
  log scale, so relative noise is taken as alike across loads and arms; its df the pool's),
  so a load measured once is judged with the noise its neighbours showed, and a cell's
  second run narrows its interval instead of widening it through a t on 1 df. With no
  repeated run anywhere there is no spread to use: the means are all there is
  (`Capacity.spread` is empty and the report says so).
* A load inside the bracket whose interval straddles a bound (a p99 within noise of its
  limit) is neither a pass nor a fail: it is `unclear` and ends neither side. That is the
  simplest rule that never calls noise a pass: the verify policy narrows such a load with
  its own runs and bisects only a bracket whose ends are clear and adjacent
  (`verify.capacity`), and a load still unclear at max_runs is where the capacity is, to
  within the noise.
* The comparison of two arms uses these brackets only: the candidate sustains more load than
  the baseline when it holds (`lo`) at a load where the baseline misses (`hi`), less in the
  mirror case, and otherwise the sweep cannot tell — never 'the same', since two overlapping
  brackets say nothing about equality. The ratio's interval is the brackets' (lo_c / hi_b to
  hi_c / lo_b): what the sweep's spacing allows, which the point estimate does not narrow.
* Goodput is vLLM's: requests per second that met every bound that applies to one request
  (TTFT, TPOT, end-to-end latency: any statistic of them bounds each request's own value);
  bounds on throughput or ITL hold only for a cell as a whole and do not filter requests.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from matrixrun.analysis.points import SeriesKey, x_of
from matrixrun.analysis.samples import arm_sample
from matrixrun.analysis.stats import pooled_sigma, quantile
from matrixrun.core.capacity import (
    LOAD_AXES,
    ArmCapacity,
    Bound,
    Capacity,
    CapacityComparison,
    CapacityOutcome,
)
from matrixrun.core.measurement import Measurement
from matrixrun.core.verdict import AnalysisSettings
from matrixrun.load.aggregate import duration_of, tpot
from matrixrun.load.records import RequestRecord

#: Per-request quantities by the suffix of the metric a bound names (seconds → ms).
_PER_REQUEST = ("ttft_ms", "tpot_ms", "e2e_latency_ms")


# -- goodput (per request) -------------------------------------------------------------------


def per_request(bounds: Sequence[Bound]) -> list[Bound]:
    """The bounds that apply to each request's own value (vLLM's goodput SLOs)."""
    return [
        b for b in bounds if b.metric.endswith(_PER_REQUEST) and not b.metric.startswith("std_")
    ]


def _request_ms(record: RequestRecord, metric: str) -> float | None:
    if metric.endswith("ttft_ms"):
        return None if record.ttft is None else record.ttft * 1000.0
    if metric.endswith("tpot_ms"):
        t = tpot(record)
        return None if t is None else t * 1000.0
    return record.e2e * 1000.0


def _good(record: RequestRecord, bounds: Sequence[Bound], time_scale: float) -> bool:
    if not record.ok:
        return False
    for b in bounds:
        v = _request_ms(record, b.metric)
        if v is None:
            continue  # a one-token output has no TPOT: that bound cannot fail it
        v *= time_scale
        if (b.max is not None and v > b.max) or (b.min is not None and v < b.min):
            return False
    return True


def goodput(
    records: Sequence[RequestRecord], bounds: Sequence[Bound], time_scale: float = 1.0
) -> tuple[float, float] | None:
    """(good requests per modelled second, their share of the completed ones) of one
    measurement's records, the records in server time (`time_scale`: the simulator's)."""
    dur = duration_of(records) * time_scale
    ok = sum(1 for r in records if r.ok)
    if dur <= 0 or not ok:
        return None
    filters = per_request(bounds)
    good = sum(1 for r in records if _good(r, filters, time_scale))
    return good / dur, good / ok


# -- one arm ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Judged:
    """One load's judgement against every bound."""

    x: float
    mean_meets: bool
    surely_meets: bool
    surely_misses: bool
    missed: list[str]
    runs: int


def _holds(v: float, b: Bound) -> bool:
    return (b.max is None or v <= b.max) and (b.min is None or v >= b.min)


#: A metric's pooled run-to-run spread: (σ of one run's log value, the t quantile for it).
Spread = Mapping[str, tuple[float, float]]


def pooled_spread(
    measurements: Sequence[Measurement], bounds: Sequence[Bound], axis: str, level: float
) -> dict[str, tuple[float, float]]:
    """Per bound metric, the pooled σ of one run's log value over every (slice, arm, load)
    with 2+ runs, and the t quantile at `level` on its df; a metric without such a cell is
    left out (no spread known)."""
    cells: dict[tuple[str, str, float | None], list[Measurement]] = {}
    for m in measurements:
        cells.setdefault((m.slice, m.arm, x_of(m.point, axis)), []).append(m)
    out: dict[str, tuple[float, float]] = {}
    for b in bounds:
        groups = [
            [math.log(v) for v in arm_sample(a, ms, b.metric).values]
            for (_, a, _), ms in cells.items()
        ]
        sigma, df = pooled_sigma(groups)
        if sigma is not None and df > 0:
            out[b.metric] = (sigma, quantile(level, df))
    return out


def _judge_bound(
    values: Sequence[float], b: Bound, spread: tuple[float, float] | None
) -> tuple[bool, bool, bool]:
    """(mean holds, holds at the interval's worse end, misses at its better end)."""
    logs = [math.log(v) for v in values]
    centre = statistics.fmean(logs)
    half = 0.0 if spread is None else spread[1] * spread[0] / math.sqrt(len(logs))
    lo, mid, hi = math.exp(centre - half), math.exp(centre), math.exp(centre + half)
    worst_ok = (b.max is None or hi <= b.max) and (b.min is None or lo >= b.min)
    best_miss = (b.max is not None and lo > b.max) or (b.min is not None and hi < b.min)
    return _holds(mid, b), worst_ok, best_miss


def _judge_point(
    x: float, ms: Sequence[Measurement], arm: str, bounds: Sequence[Bound], spread: Spread
) -> _Judged | None:
    samples = {b.metric: arm_sample(arm, ms, b.metric).values for b in bounds}
    if any(not v for v in samples.values()):
        return None  # no successful run here: nothing to judge (failures are reported apart)
    verdicts = [(b, _judge_bound(samples[b.metric], b, spread.get(b.metric))) for b in bounds]
    return _Judged(
        x=x,
        mean_meets=all(v[0] for _, v in verdicts),
        surely_meets=all(v[1] for _, v in verdicts),
        surely_misses=any(v[2] for _, v in verdicts),
        missed=[b.metric for b, v in verdicts if not v[0]],
        runs=min(len(v) for v in samples.values()),
    )


def _crossing(a: float, b: float, va: float, vb: float, limit: float) -> float | None:  # log-log
    if va <= 0 or vb <= 0 or limit <= 0 or va == vb or a <= 0 or b <= 0:
        return None
    t = (math.log(limit) - math.log(va)) / (math.log(vb) - math.log(va))
    t = min(max(t, 0.0), 1.0)
    return math.exp(math.log(a) + t * (math.log(b) - math.log(a)))


def _estimate(
    before: Sequence[Measurement],
    after: Sequence[Measurement],
    xs: tuple[float, float],
    arm: str,
    bounds: Sequence[Bound],
) -> float | None:
    """The lowest load, between two measured ones, at which a bound the means miss at the
    second is crossed (log-log interpolation of the arm's means)."""
    found: list[float] = []
    for b in bounds:
        va = arm_sample(arm, before, b.metric).mean
        vb = arm_sample(arm, after, b.metric).mean
        if va is None or vb is None or _holds(vb, b):
            continue
        limit = b.max if b.max is not None and vb > b.max else b.min
        if limit is None:
            continue
        x = _crossing(xs[0], xs[1], va, vb, limit)
        if x is not None:
            found.append(x)
    return min(found) if found else None


def _mean_at(ms: Sequence[Measurement], arm: str, metric: str) -> float | None:
    return arm_sample(arm, ms, metric).mean


def arm_capacity(
    arm: str,
    by_x: Mapping[float, Sequence[Measurement]],
    bounds: Sequence[Bound],
    spread: Spread,
    good: Mapping[tuple[str, int], tuple[float, float]],
) -> ArmCapacity:
    """One arm's capacity along one series: `by_x` its measurements per load, `spread`
    the run-to-run noise per metric (`pooled_spread`)."""
    xs = sorted(by_x)
    judged = [j for x in xs if (j := _judge_point(x, by_x[x], arm, bounds, spread))]
    cap = ArmCapacity(arm=arm, points=len(judged))
    if not judged:
        return cap
    cap.points_meeting = sum(1 for j in judged if j.mean_meets)
    cap.min_runs = min(j.runs for j in judged)
    for j in judged:
        if not j.surely_meets:
            break
        cap.lo = j.x
    cap.hi = next((j.x for j in judged if j.surely_misses), None)
    cap.unclear = [j.x for j in judged if _between(j.x, cap) and not j.surely_meets]
    first_miss = next((i for i, j in enumerate(judged) if not j.mean_meets), None)
    last = (len(judged) if first_miss is None else first_miss) - 1
    if last >= 0:
        cap.last_meeting = judged[last].x
        _throughput_at(cap, by_x[judged[last].x], arm, good)
    if first_miss is not None:
        miss = judged[first_miss]
        cap.first_missing = miss.x
        cap.limiting = miss.missed
        cap.non_monotone = any(j.mean_meets for j in judged[first_miss + 1 :])
        if last >= 0:
            cap.estimate = _estimate(
                by_x[judged[last].x], by_x[miss.x], (judged[last].x, miss.x), arm, bounds
            )
    return cap


def _between(x: float, cap: ArmCapacity) -> bool:
    """Whether `x` lies strictly inside the arm's bracket (an open end: unbounded)."""
    return (cap.lo is None or x > cap.lo) and (cap.hi is None or x < cap.hi)


def _throughput_at(
    cap: ArmCapacity,
    ms: Sequence[Measurement],
    arm: str,
    good: Mapping[tuple[str, int], tuple[float, float]],
) -> None:
    cap.request_throughput = _mean_at(ms, arm, "request_throughput")
    cap.output_throughput = _mean_at(ms, arm, "output_throughput")
    counted = [good[(m.cell_id, m.attempt)] for m in ms if m.ok and (m.cell_id, m.attempt) in good]
    if counted:  # geometric, as the throughputs beside it (so goodput ≤ throughput holds)
        rates = [g for g, _ in counted]
        cap.goodput = (
            math.exp(statistics.fmean(math.log(g) for g in rates)) if min(rates) > 0 else 0.0
        )
        cap.good_share = statistics.fmean(s for _, s in counted)


# -- arms compared ---------------------------------------------------------------------------


def compare_capacity(base: ArmCapacity, cand: ArmCapacity) -> CapacityComparison:
    """The candidate's capacity against the baseline's, by their brackets (module docstring)."""
    out = CapacityComparison(
        slice=cand.slice,
        series=cand.series,
        baseline=base.arm,
        candidate=cand.arm,
        outcome=CapacityOutcome.UNDECIDED,
    )
    if base.missing or cand.missing or not base.points or not cand.points:
        out.outcome = CapacityOutcome.NOT_JUDGED
        return out
    if base.estimate and cand.estimate:
        out.ratio = cand.estimate / base.estimate
    if cand.lo is not None and base.hi is not None:
        out.ratio_lo = cand.lo / base.hi
    if cand.hi is not None and base.lo is not None:
        out.ratio_hi = cand.hi / base.lo
    if cand.lo is not None and base.hi is not None and cand.lo >= base.hi:
        out.outcome = CapacityOutcome.HIGHER
    elif cand.hi is not None and base.lo is not None and cand.hi <= base.lo:
        out.outcome = CapacityOutcome.LOWER
    return out


# -- the whole run ---------------------------------------------------------------------------


def capacity(
    measurements: Sequence[Measurement],
    settings: AnalysisSettings,
    bounds: Sequence[Bound],
    good: Mapping[tuple[str, int], tuple[float, float]] | None = None,
) -> Capacity | None:
    """Capacity of every arm along every series, and each candidate against the baseline;
    None without bounds or when the sweep's axis is not a load. `good`: per measurement
    (cell_id, attempt), `goodput`'s answer from its records."""
    if not bounds or settings.axis not in LOAD_AXES:
        return None
    good = good or {}
    groups: dict[tuple[str, SeriesKey], dict[str, dict[float, list[Measurement]]]] = {}
    for m in measurements:
        x = x_of(m.point, settings.axis)
        if x is None:
            continue
        key = (m.slice, SeriesKey.of(m.point, settings.axis))
        groups.setdefault(key, {}).setdefault(m.arm, {}).setdefault(x, []).append(m)
    arms_seen = list(dict.fromkeys(m.arm for m in measurements))
    order = [settings.baseline] + (
        settings.candidates or [a for a in arms_seen if a != settings.baseline]
    )
    missing = _unmeasured(measurements, bounds)
    spread = pooled_spread(measurements, bounds, settings.axis, settings.confidence)
    result = Capacity(
        axis=settings.axis,
        bounds=list(bounds),
        per_request=[b.metric for b in per_request(bounds)],
        goodput_from_records=bool(good),
        level=settings.confidence,
        spread={metric: sigma for metric, (sigma, _) in spread.items()},
        arms=[],
        comparisons=[],
    )
    for (slice_name, skey), by_arm in groups.items():
        fixed = dict(skey.fixed)
        caps: dict[str, ArmCapacity] = {}
        for arm in order:
            if arm not in by_arm:
                continue
            cap = arm_capacity(arm, by_arm[arm], bounds, spread, good)
            cap = cap.model_copy(update={"slice": slice_name, "series": fixed, "missing": missing})
            caps[arm] = cap
            result.arms.append(cap)
        base = caps.get(settings.baseline)
        if base is None:
            continue
        for arm in order[1:]:
            if arm in caps:
                result.comparisons.append(compare_capacity(base, caps[arm]))
    return result


def _unmeasured(measurements: Sequence[Measurement], bounds: Sequence[Bound]) -> list[str]:
    """SLO metrics no successful measurement has a value of."""
    have = {
        b.metric
        for b in bounds
        for m in measurements
        if m.ok and m.metrics is not None and m.metrics.get(b.metric) is not None
    }
    return [b.metric for b in bounds if b.metric not in have]

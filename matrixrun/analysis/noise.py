"""Noise: each arm's sample at a point, σ pooled over the run by the best source available,
and first-run warmup (VERDICTS.md §2). Pure functions of measurements."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from matrixrun.analysis.components import estimate_components, value_of

__all__ = [
    "WarmupGap",
    "arm_sample",
    "confirmed_warmup",
    "estimate_sigma",
    "value_of",
    "warmup_gaps",
]
from matrixrun.core.measurement import Measurement, superseded
from matrixrun.core.metrics import higher_is_better
from matrixrun.core.verdict import ArmSample, Sigma

#: One-sided 95% normal quantile: a warmup gap must exceed what noise explains at this level.
WARMUP_Z = 1.645


class WarmupGap(NamedTuple):
    """How much an arm's later runs on a server beat the first (log scale, + = better)."""

    gap: float
    pairs: int


def arm_sample(arm: str, measurements: Sequence[Measurement], metric: str) -> ArmSample:
    """One arm's measurements at one point: successful values, failures, failure rate.
    Failed measurements are kept in the counts (a rerun never replaces anything)."""
    values: list[float] = []
    instances: list[str] = []
    errors: list[str] = []
    failed_measurements = failed_requests = total_requests = capped = 0
    client_bound = 0.0
    gone = superseded(measurements)  # failed runs a --retry-failed run replaced
    for m in measurements:
        if (m.cell_id, m.attempt) in gone:
            continue
        check = m.extra.get("client_check")
        if isinstance(check, dict) and isinstance(check.get("affected"), dict):
            client_bound = max(client_bound, float(check["affected"].get(metric, 0.0)))
        capped += "capped" in m.extra
        if m.metrics is not None:
            failed_requests += m.metrics.failed
            total_requests += m.metrics.completed + m.metrics.failed
        if not m.ok:
            failed_measurements += 1
            errors.append(m.error or "no request completed")
            continue
        v = value_of(m, metric)
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
        client_bound=client_bound,
        capped=capped,
    )


def estimate_sigma(
    measurements: Iterable[Measurement],
    metric: str,
    prior: float | None = None,
    axis: str = "concurrency",
) -> Sigma:
    """The noise model for `metric` (`components.estimate_components`): a launch part σ_b with
    df from the number of launches, run noise σ_w per point along `axis`, moderated, and the
    declared prior (a floor, applied per cell)."""
    return estimate_components(measurements, metric, axis=axis, prior=prior)


def warmup_gaps(measurements: Iterable[Measurement], metric: str) -> dict[str, WarmupGap]:
    """Per arm, how much later runs on a server beat the first run of the same cell on it:
    the mean signed log gain over every such pair (+ = the later run is better for `metric`),
    and the number of pairs. First-run JIT compile or warmup shows here as a positive gap; an
    arm with no repeat on any server has no entry."""
    sign = 1.0 if higher_is_better(metric) else -1.0
    runs: dict[tuple[str, str, str, str], list[tuple[int, float]]] = {}
    for m in measurements:
        v = value_of(m, metric)
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


def confirmed_warmup(w: WarmupGap, margin: float, sigma: float | None) -> bool:
    """Is an arm's first-run warmup confirmed? Its later runs must beat the first by more than
    the margin on average *and* by more than noise explains: z·√2·σ/√pairs (a difference of
    two runs has σ√2). Why the second condition: warm reruns are run where the arm looked
    slow, so by regression to the mean a rerun tends to beat its first run even with no
    warmup at all; the run's σ (server-to-server when measured, ≥ the within-server one)
    keeps that from passing for warmup."""
    floor = WARMUP_Z * math.sqrt(2) * sigma / math.sqrt(w.pairs) if sigma else 0.0
    return w.gap > max(math.log1p(margin), floor)

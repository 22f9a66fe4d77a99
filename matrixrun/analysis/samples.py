"""A cell's samples: what one measurement says on one metric, and one arm's measurements at one
point as the comparison reads them. Pure functions of measurements, below every stage of the
analysis (the noise model and the comparison read the same values)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from matrixrun.core.keeping import carries
from matrixrun.core.measurement import Measurement, superseded
from matrixrun.core.verdict import ArmSample


def value_of(m: Measurement, metric: str) -> float | None:
    """The metric of a successful measurement, when it is a positive finite number (the
    analysis works on logs); None otherwise, and None where the simulator fell behind its
    model or the client's self-check flagged the metric (`core.keeping`): every stage reads
    values here, so no verdict, check or launch finding rests on a number a loaded host made."""
    if not m.ok or m.metrics is None or not carries(m, metric):
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
    failed_measurements = failed_requests = total_requests = capped = 0
    client_bound = 0.0
    gone = superseded(measurements)  # failed runs a --retry-failed run replaced
    for m in measurements:
        if (m.cell_id, m.attempt) in gone:
            continue
        # a capped run compared over its finished requests (written before such a run became
        # a failure, `Failure.CAPPED`): its latency flatters the arm (`CellNote.CAPPED`)
        capped += "capped" in m.extra and m.ok
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
            # only a run the comparison reads can widen it: one whose client the self-check
            # flagged on this metric carries no value at all (`core.keeping`)
            check = m.extra.get("client_check")
            if isinstance(check, dict) and isinstance(check.get("affected"), dict):
                client_bound = max(client_bound, float(check["affected"].get(metric, 0.0)))
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

"""Whether a measurement kept its model: the one rule for which measurements may carry a
finding (issue 44, "never cry wolf").

The simulator runs `time_scale` times faster than the hardware it models; on a host shared
with another job it can fall behind its own model, and a cell that took longer than modelled
reads as a slower engine. On a loaded 2-core host the README's rehearsal turned exactly that
into "unstable launches" and a −16% where the model says −49%. The simulator records how late
its engine loop woke against its absolute deadlines in every cell (`sim/lateness.py`, kept as
`extra.sim_engine_lateness_ms`); the worst lateness bounds how much the cell's duration grew,
so as a share of the duration it bounds the error of every rate the cell reports.

A measurement beyond `SIM_LATE_LIMIT` did not keep its model: the analysis reads no value from
it (`analysis.samples.value_of`), so no verdict, check or launch finding rests on it; the
measurer measures it again on a slower simulator (`run.measurer`), and the report says where a
cell has no measurement that kept up.

The same rule for the load client (on real engines too): a metric the client's own self-check
flagged (`extra.client_check.affected`, `load/selfcheck.py`: the most its lag could have moved
that metric exceeds its threshold) is no number of that measurement either (`carries`).

Pure: reads a measurement, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from matrixrun.core.measurement import Measurement
from matrixrun.core.tuning import CLIENT_LIMIT, SIM_LATE_LIMIT


def sim_late_share(m: Measurement) -> float | None:
    """How far behind its model the simulator's engine fell in this measurement, as a share of
    the cell's (modelled) duration; None where nothing was recorded (a real engine, a failed
    cell, a run directory from before lateness was recorded)."""
    engine = m.extra.get("sim_engine_lateness_ms")
    if not isinstance(engine, dict) or m.metrics is None or not m.metrics.duration > 0:
        return None
    worst = engine.get("max_ms", engine.get("p99_ms"))
    if not isinstance(worst, int | float):
        return None
    return float(worst) * m.time_scale / 1000.0 / m.metrics.duration


def kept_model(m: Measurement, limit: float = SIM_LATE_LIMIT) -> bool:
    """Whether `m` may carry a finding: the simulator kept within `limit` of its model (or it
    was not a simulator's measurement at all)."""
    share = sim_late_share(m)
    return share is None or share <= limit


def client_flagged(m: Measurement, metric: str) -> bool:
    """Whether the load client's self-check said its own lag could have moved `metric` by more
    than `CLIENT_LIMIT` in this measurement (its own threshold: it records only such metrics,
    besides a saturated core's throughput, 1.0)."""
    check = m.extra.get("client_check")
    affected = check.get("affected") if isinstance(check, dict) else None
    if not isinstance(affected, dict):
        return False
    share = affected.get(metric, 0.0)
    return isinstance(share, int | float) and share > CLIENT_LIMIT


def carries(m: Measurement, metric: str) -> bool:
    """Whether `m` may carry a number of `metric` into the analysis: the simulator kept its
    model and the client kept up with the server on that metric."""
    return kept_model(m) and not client_flagged(m, metric)


def fell_behind(m: Measurement, metric: str) -> bool:
    """A successful measurement that may carry no `metric` (the simulator or the client fell
    behind): what the measurer measures again and the report counts."""
    return m.ok and not carries(m, metric)


def counted_runs(
    cell_id: str, ms: Sequence[Measurement], metric: str, aside: Collection[tuple[str, int]] = ()
) -> int:
    """Runs of `cell_id` toward the verify block's `max_runs`: every run (a failed one too)
    but those that fell behind on `metric` (the runner measures them again on a slower
    relaunch: counted, they would take the cell's last run from it) and the warm runs the
    analysis set aside (`aside`, (cell id, attempt): they test the warm-up). The one count
    the policy (`verify.policy.Policy._n`) and its capacity rule (`verify.capacity`) share."""
    return sum(
        1
        for m in ms
        if m.cell_id == cell_id
        and (m.cell_id, m.attempt) not in aside
        and not fell_behind(m, metric)
    )


def worst(affected: dict[str, float], n: int) -> list[tuple[str, float]]:
    """The `n` metrics the client's self-check says could be off the most, largest first (what
    a warning names: the load client's line and the report's Failures section)."""
    return sorted(affected.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

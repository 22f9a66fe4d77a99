"""The primary metric's series as several sections read them: the result of one metric, the keys
that tell series apart, the confident stretches along the axis, a cell by its point, and the
metrics that repeat another one value for value (folded into one line). Derivations only: they
read the verdict's regimes and means and never estimate anything, so no section can claim more
than the cells it cites."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrixrun.core.verdict import (
    CellVerdict,
    Comparison,
    MetricResult,
    Series,
    Verdict,
)

#: Two metrics whose arm means agree within this everywhere are folded into one line.
FOLD_TOLERANCE = 0.001


@dataclass(frozen=True)
class Stretch:
    """Consecutive cells along the axis with one confident verdict (better or worse)."""

    verdict: CellVerdict
    cells: list[Comparison]


def series_label(series: Series, varying: set[str] | None = None) -> str:
    """The series' point keys off the axis that tell it from its siblings ('input_len 512')."""
    return " · ".join(
        f"{k} {v}" for k, v in sorted(series.fixed.items()) if varying is None or k in varying
    )


def varying_keys(all_series: Sequence[Series]) -> set[str]:
    """Keys off the axis whose values differ between the series of one metric."""
    keys = {k for s in all_series for k in s.fixed}
    return {k for k in keys if len({repr(s.fixed.get(k)) for s in all_series}) > 1}


def stretches(series: Series) -> list[Stretch]:
    """The confident regimes of a series, in axis order, each with its cells."""
    by_id = {c.point_id: c for c in series.cells}
    return [
        Stretch(r.verdict, [by_id[p] for p in r.point_ids if p in by_id])
        for r in series.regimes
        if r.verdict in (CellVerdict.BETTER, CellVerdict.WORSE)
    ]


def primary_result(metrics: Sequence[MetricResult], primary: str) -> MetricResult | None:
    return next((m for m in metrics if m.metric == primary), None)


def several_series(verdict: Verdict) -> bool:
    """Whether the primary metric has more than one (slice, candidate, series): then every
    line of advice and of 'why' names the candidate it is about."""
    primary = verdict.settings.primary
    results = [primary_result(c.metrics, primary) for sl in verdict.slices for c in sl.candidates]
    return sum(len(mr.series) for mr in results if mr is not None) > 1


def cells_by_point(mr: MetricResult) -> dict[str, Comparison]:
    return {c.point_id: c for s in mr.series for c in s.cells}


def _means(verdict: Verdict, metric: str) -> list[float | None]:
    return [
        v
        for _sl, _cand, c in verdict.comparisons(metric)
        for v in (c.baseline.mean, c.candidate.mean)
    ]


def _identical(a: list[float | None], b: list[float | None], tol: float) -> bool:
    if len(a) != len(b) or not a:
        return False
    for x, y in zip(a, b, strict=True):
        if x is None or y is None:
            if x is not y:
                return False
            continue
        if x == y:
            continue
        if y == 0 or abs(x / y - 1) > tol:
            return False
    return True


def folded_metrics(verdict: Verdict, tol: float = FOLD_TOLERANCE) -> dict[str, str]:
    """metric → the earlier metric it matches within `tol` in every arm mean of every cell
    (sglang's mean ITL equals mean TPOT when every request streams its tokens one by one):
    the later one is folded into a line instead of repeating a table value for value."""
    metrics = verdict.settings.metrics
    means = {m: _means(verdict, m) for m in metrics}
    out: dict[str, str] = {}
    for i, m in enumerate(metrics):
        for earlier in metrics[:i]:
            if earlier not in out and _identical(means[m], means[earlier], tol):
                out[m] = earlier
                break
    return out

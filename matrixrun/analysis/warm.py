"""Warm runs set aside where a warm-up is confirmed (docs/verdicts.md, "First-run warm-up").

A warm rerun (stage 1's check of the first-run warm-up explanation) measures its arm on a
server that has already served the cell; every other run of the matrix, the first pass and
each stage-2 rerun on its fresh launch, is the first of its cell on its server. Where the
arm's later runs beat its first by more than the margin at a point, and its warm-up is
confirmed over all its pairs (`noise.confirmed_warmup`), the warm run measured another
condition: pooled with cold runs it would read the cold-to-warm step as run noise (and, through
the trend along the axis, at points that have no warm-up at all), and it would move its arm's
mean against a partner measured cold only. So there it is left out of the comparison and of
the noise model, and kept as the warm-up's evidence (`noise.point_gaps`): cold is compared
with cold, and whether the two arms warm up alike is the warm-up check's question
(`comparison.warmup_shift`). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence

from matrixrun.analysis.noise import WarmKey, confirmed_warmup, point_gaps, sigma_of, warmup_gaps
from matrixrun.analysis.samples import value_of
from matrixrun.core.measurement import Measurement
from matrixrun.core.verdict import AnalysisSettings

#: A measurement's identity within a run: (cell id, attempt).
RunId = tuple[str, int]


def warm_runs(measurements: Sequence[Measurement], metric: str) -> dict[RunId, WarmKey]:
    """Every run that was not the first (with a value) of its cell on its server, with the
    (slice, point, arm) it belongs to."""
    by_server: dict[tuple[str, str], list[Measurement]] = {}
    for m in measurements:
        if value_of(m, metric) is not None:
            by_server.setdefault((m.cell_id, m.instance), []).append(m)
    out: dict[RunId, WarmKey] = {}
    for runs in by_server.values():
        runs.sort(key=lambda m: m.attempt)
        for m in runs[1:]:
            out[(m.cell_id, m.attempt)] = (m.slice, m.point_id, m.arm)
    return out


def set_aside(
    measurements: Sequence[Measurement], settings: AnalysisSettings
) -> tuple[list[Measurement], frozenset[WarmKey]]:
    """The measurements the comparison and the noise model use, and the (slice, point, arm)
    whose warm runs were left out: those where the arm's gap at the point exceeds the margin
    and its pooled gap is confirmed against the noise of the runs without them (the σ the
    confirmation is judged with must not contain the step it tests)."""
    metric = settings.primary
    margin = math.log1p(settings.margin_for(metric))
    candidates = {k for k, w in point_gaps(measurements, metric).items() if w.gap > margin}
    if not candidates:
        return list(measurements), frozenset()
    warm = warm_runs(measurements, metric)
    trial = [m for m in measurements if warm.get((m.cell_id, m.attempt)) not in candidates]
    sigma = sigma_of(trial, metric, settings)
    pooled = warmup_gaps(measurements, metric)
    confirmed = {
        arm
        for arm, w in pooled.items()
        if confirmed_warmup(w, settings.margin_for(metric), sigma.value)
    }
    aside = frozenset(k for k in candidates if k[2] in confirmed)
    if not aside:
        return list(measurements), aside
    kept = [m for m in measurements if warm.get((m.cell_id, m.attempt)) not in aside]
    return kept, aside

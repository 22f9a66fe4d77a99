"""Warm runs set aside where a warm-up is confirmed (docs/verdicts.md, "First-run warm-up").

A warm rerun (stage 1's check of the first-run warm-up explanation) measures its arm on a
server that has already served the cell; every other run of the matrix, the first pass and
each stage-2 rerun on its fresh launch, is the first of its cell on its server. Where the
arm's later runs beat its first by more than the margin at a point, and its warm-up is
confirmed over all its pairs (`noise_model.confirmed_warmup`), the warm run measured another
condition: pooled with cold runs it would read the cold-to-warm step as run noise (and, through
the trend along the axis, at points that have no warm-up at all), and it would move its arm's
mean against a partner measured cold only. So there it is left out of the comparison and of
the noise model, and kept as the warm-up's evidence (`point_gaps`): cold is compared
with cold, and whether the two arms warm up alike is the warm-up check's question
(`comparison.warmup_shift`).

A part of the noise stage, not a step before it: the σ the confirmation is judged with is a
noise estimate, so `noise.estimate_noise` calls `set_aside` with its own estimator (`sigma`)
and goes on from the runs kept; the warm-up gaps of the model (`warmup_gaps`, `point_gaps`)
are measured here. Pure."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from matrixrun.analysis.noise_model import WarmKey, WarmupGap, confirmed_warmup
from matrixrun.analysis.samples import value_of
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import higher_is_better
from matrixrun.core.verdict import AnalysisSettings, Sigma

#: A measurement's identity within a run: (cell id, attempt).
RunId = tuple[str, int]


def _warm_gains(measurements: Iterable[Measurement], metric: str) -> dict[WarmKey, list[float]]:
    """Per (slice, point, arm), the signed log gain of every later run on a server over the
    first run of the same cell on it (+ = the later run is better for `metric`)."""
    sign = 1.0 if higher_is_better(metric) else -1.0
    runs: dict[tuple[str, str, str, str], list[tuple[int, float]]] = {}
    for m in measurements:
        v = value_of(m, metric)
        if v is not None:
            runs.setdefault((m.slice, m.point_id, m.arm, m.instance), []).append(
                (m.attempt, math.log(v))
            )
    gains: dict[WarmKey, list[float]] = {}
    for (slice_name, pid, arm, _), values in runs.items():
        values.sort()
        first = values[0][1]
        if len(values) > 1:
            gains.setdefault((slice_name, pid, arm), []).extend(
                sign * (v - first) for _, v in values[1:]
            )
    return gains


def warmup_gaps(measurements: Iterable[Measurement], metric: str) -> dict[str, WarmupGap]:
    """Per arm, how much later runs on a server beat the first run of the same cell on it:
    the mean signed log gain over every such pair (+ = the later run is better for `metric`),
    and the number of pairs. First-run JIT compile or warmup shows here as a positive gap; an
    arm with no repeat on any server has no entry."""
    gains: dict[str, list[float]] = {}
    for (_, _, arm), g in _warm_gains(measurements, metric).items():
        gains.setdefault(arm, []).extend(g)
    return {arm: WarmupGap(gap=sum(g) / len(g), pairs=len(g)) for arm, g in gains.items()}


def point_gaps(measurements: Iterable[Measurement], metric: str) -> dict[WarmKey, WarmupGap]:
    """`warmup_gaps` per sweep point: the gap of each arm where it has pairs. A warm-up tied
    to a batch shape (CUDA graphs captured, kernels tuned per size) shows at some points and
    not others, which an arm's pooled gap cannot say."""
    return {
        k: WarmupGap(gap=sum(g) / len(g), pairs=len(g))
        for k, g in _warm_gains(measurements, metric).items()
    }


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
    measurements: Sequence[Measurement],
    settings: AnalysisSettings,
    sigma: Callable[[Sequence[Measurement]], Sigma],
) -> tuple[list[Measurement], frozenset[WarmKey]]:
    """The measurements the comparison and the noise model use, and the (slice, point, arm)
    whose warm runs were left out: those where the arm's gap at the point exceeds the margin
    and its own pooled gap, or that of another arm whose gap there exceeds the margin too, is
    confirmed — like with like: a warm-up bound to a batch shape is every arm's, and an arm
    kept warm against a partner compared cold would carry the step into the comparison (on
    `h200`, an arm's one pair within its noise kept while its partner's confirmed one was
    left out cost decided cells, tuning seed 4). Confirmed against the noise of the runs
    without them (`sigma`: the noise stage's estimate of the primary metric's σ from given
    runs; the σ the confirmation is judged with must not contain the step it tests)."""
    metric = settings.primary
    margin = math.log1p(settings.margin_for(metric))
    candidates = {k for k, w in point_gaps(measurements, metric).items() if w.gap > margin}
    if not candidates:
        return list(measurements), frozenset()
    warm = warm_runs(measurements, metric)
    trial = [m for m in measurements if warm.get((m.cell_id, m.attempt)) not in candidates]
    trial_sigma = sigma(trial)
    pooled = warmup_gaps(measurements, metric)
    confirmed = {
        arm
        for arm, w in pooled.items()
        if confirmed_warmup(w, settings.margin_for(metric), trial_sigma.value)
    }
    # like with like: where one arm's warm runs are left out at a point, every arm's warm runs
    # that beat their first there are left out with it, so no arm is compared warm against a
    # partner measured cold (a shape-bound warm-up is every arm's); a point's own pair does
    # not confirm a warm-up by itself (its σ there may rest on almost nothing)
    points = {k[:2] for k in candidates if k[2] in confirmed}
    aside = frozenset(k for k in candidates if k[:2] in points)
    if not aside:
        return list(measurements), aside
    kept = [m for m in measurements if warm.get((m.cell_id, m.attempt)) not in aside]
    return kept, aside

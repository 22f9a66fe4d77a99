"""The verdict engine: measurements in, a `Verdict` out, by the method of VERDICTS.md.

Pure functions only: no files, clocks, printing or words (the report's `wording` module says
what the numbers mean). The verify policy calls `analyse` between stages, `run.outputs.analyse_run`
writes its result as verdict.json, and `ingest` feeds it measurements built from bench_serving
files. One pass of four steps, each entered once — all its work done before the next step
begins, none returned to after (docs/architecture.md, "The analysis: one pass";
`tests/test_layout.py` keeps the imports in this order and traces a committed run's analysis):

1. the noise stage, `noise` with its parts — `warm` (the warm runs set aside where a warm-up is
   confirmed), `moderation` and `components` (the variance-components fit), `prior` (an
   earlier run's noise), `launches` (unstable launches) — into one `NoiseModel` per metric;
2. `comparison`: every cell, from its samples and that model;
3. `axis`: series, regimes, crossovers and overall verdicts, from the compared cells;
4. `reruns`: every repeat against its first run.

What any step may call at any time are primitives, not steps: `stats` (quantiles, intervals,
the judgement), `samples` (a measurement's numbers), `points` (where a point lies: its x and
its series), `variance` (a σ record applied to a cell) and `noise_model` (the `NoiseModel`
value, which answers through `variance`). `capacity` is a step after the pass
(`run.outputs.analyse_run` calls it with the records of goodput).

Why it is built this way: n per cell is 1 to 5, so rank tests and bootstraps cannot decide.
Every comparison is a log ratio d = ln(candidate / baseline) of geometric means, signed so + is
better; its interval comes from a variance-components noise model per metric on the log scale
(`components`: a launch effect shared by every cell of a server instance, with df from the
number of launches; run noise within a launch per sweep point, moderated toward a trend; the
declared prior as a floor) with Student's t at the cell's Satterthwaite df, at the level of
the cell's state (α spent over every state it can stop in); the verdict is TOST-style against
the metric's practical margin m, taken as ±ln(1 + m) on the log scale so the band is
symmetric in ratio terms.
Multiplicity: with many cells, about (1 − confidence) of them may flag by chance; we state that
(`CaveatKind.MULTIPLICITY`) rather than apply Holm, because the margin test already demands
more than significance and the verify policy re-measures isolated flags.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from matrixrun.analysis.axis import crossovers, overall, regimes
from matrixrun.analysis.comparison import compare, runs_needed
from matrixrun.analysis.noise import estimate_noise, estimate_sigma
from matrixrun.analysis.noise_model import NoiseModel, WarmupGap, confirmed_warmup
from matrixrun.analysis.points import SeriesKey, x_of
from matrixrun.analysis.reruns import reruns
from matrixrun.analysis.samples import arm_sample, value_of
from matrixrun.analysis.stats import (
    crossover_estimate,
    effective_n,
    interval,
    judge,
    limiting_arm,
    look_of,
    pooled_sigma,
    quantile,
)
from matrixrun.analysis.variance import one_run_sigma
from matrixrun.analysis.warm import warmup_gaps
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import higher_is_better, unit
from matrixrun.core.verdict import (
    AnalysisSettings,
    CandidateResult,
    Caveat,
    CaveatKind,
    CellNote,
    Comparison,
    Crossover,
    MetricResult,
    Overall,
    Series,
    SigmaSource,
    SliceResult,
    SliceVerdict,
    Verdict,
    WarmAside,
)

__all__ = [
    "AnalysisSettings",
    "NoiseModel",
    "Verdict",
    "WarmupGap",
    "analyse",
    "arm_sample",
    "compare",
    "confirmed_warmup",
    "crossover_estimate",
    "effective_n",
    "estimate_noise",
    "estimate_sigma",
    "interval",
    "judge",
    "limiting_arm",
    "look_of",
    "one_run_sigma",
    "pooled_sigma",
    "quantile",
    "runs_needed",
    "value_of",
    "warmup_gaps",
]


def _first_seen(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


#: The cells of one series, compared: (slice, candidate, metric, series) -> cells in axis order.
Compared = dict[tuple[str, str, str, SeriesKey], list[Comparison]]


@dataclass
class _Run:
    """What every slice of one analysis shares: the measurements indexed, the noise stage's
    model per metric, the cells compared (`_compare_all`), and what the run-level verdict
    collects as the slices are judged along the axis."""

    settings: AnalysisSettings
    candidates: list[str]
    noise: dict[str, NoiseModel]
    by_key: dict[tuple[str, str, str], list[Measurement]] = field(default_factory=dict)
    points: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: per slice, its series and the ids of their points (in the order first seen)
    series: dict[str, dict[SeriesKey, list[str]]] = field(default_factory=dict)
    compared: Compared = field(default_factory=dict)
    caveats: list[Caveat] = field(default_factory=list)
    primary_cells: dict[str, list[Comparison]] = field(default_factory=dict)
    per_slice: dict[str, list[tuple[str, Overall]]] = field(default_factory=dict)


def _sigma_caveats(models: Sequence[NoiseModel]) -> list[Caveat]:
    out = []
    for model in models:
        s = model.sigma
        if s.source == SigmaSource.WARM:
            out.append(Caveat(kind=CaveatKind.WARM_SIGMA, metric=s.metric))
        elif s.source == SigmaSource.NONE:
            out.append(Caveat(kind=CaveatKind.NO_SIGMA, metric=s.metric))
        if s.prior is not None and s.value is not None and s.source != SigmaSource.PRIOR:
            prior_log = math.log1p(s.prior)
            if s.value < prior_log / 2:
                out.append(
                    Caveat(
                        kind=CaveatKind.SIGMA_BELOW_PRIOR,
                        metric=s.metric,
                        value=s.value,
                        reference=prior_log,
                    )
                )
        if s.df == 1:
            out.append(
                Caveat(kind=CaveatKind.SIGMA_DF1, metric=s.metric, value=quantile(model.level, 1))
            )
    return out


def _start(
    measurements: Sequence[Measurement], settings: AnalysisSettings, noise: dict[str, NoiseModel]
) -> _Run:
    """The measurements indexed, and the run-level caveats that come before any cell is
    judged (from the noise stage's models)."""
    arms = _first_seen([m.arm for m in measurements])
    candidates = settings.candidates or [a for a in arms if a != settings.baseline]
    run = _Run(
        settings=settings,
        candidates=candidates,
        noise=noise,
        primary_cells={c: [] for c in candidates},
        per_slice={c: [] for c in candidates},
    )
    if measurements and settings.baseline not in arms:
        run.caveats.append(Caveat(kind=CaveatKind.NO_BASELINE, arm=settings.baseline, arms=arms))
    run.caveats += _sigma_caveats(list(noise.values()))
    primary = noise[settings.primary]
    for arm, w in primary.warmup.items():
        # judged at the run's common margin, as this caveat always was (a cell's own warm-up
        # check uses its metric's margin: `NoiseModel.confirmed`)
        if confirmed_warmup(w, settings.margin, primary.sigma.value):
            run.caveats.append(
                Caveat(
                    kind=CaveatKind.WARMUP,
                    arm=arm,
                    metric=primary.metric,
                    value=w.gap,
                    count=w.pairs,
                )
            )
    for m in measurements:
        run.by_key.setdefault((m.slice, m.point_id, m.arm), []).append(m)
        run.points.setdefault(m.slice, {}).setdefault(m.point_id, m.point)
    for slice_name, points in run.points.items():
        found = run.series.setdefault(slice_name, {})
        for pid, point in points.items():
            found.setdefault(SeriesKey.of(point, settings.axis), []).append(pid)
    return run


def _series(
    run: _Run, slice_name: str, cand: str, metric: str, pids: list[str]
) -> list[Comparison]:
    """The cells of one series (points that differ only on the axis), in axis order."""
    settings = run.settings
    cells = []
    for pid in pids:
        base_ms = run.by_key.get((slice_name, pid, settings.baseline), [])
        cand_ms = run.by_key.get((slice_name, pid, cand), [])
        if not base_ms or not cand_ms:
            continue
        point = run.points[slice_name][pid]
        cells.append(
            compare(
                arm_sample(settings.baseline, base_ms, metric),
                arm_sample(cand, cand_ms, metric),
                run.noise[metric],
                settings,
                point_id=pid,
                point=point,
                x=x_of(point, settings.axis),
                slice_name=slice_name,
            )
        )
    cells.sort(key=lambda c: (c.x is None, c.x or 0.0))
    return cells


def _compare_all(run: _Run) -> None:
    """Step 2 of the pass: every cell compared — each slice, candidate, metric and series,
    each point of it — before anything is judged along the axis."""
    for slice_name, series in run.series.items():
        for cand in run.candidates:
            for metric in run.settings.metrics:
                for key, pids in series.items():
                    found = _series(run, slice_name, cand, metric, pids)
                    run.compared[(slice_name, cand, metric, key)] = found


def _metric(run: _Run, slice_name: str, cand: str, metric: str) -> MetricResult:
    """One metric of one candidate in one slice along the axis: its series (regimes and
    crossovers) and its overall verdict, from the cells `_compare_all` compared."""
    series_list: list[Series] = []
    cells: list[Comparison] = []
    crosses: list[Crossover] = []
    non_mono = False
    for key in run.series[slice_name]:
        found = run.compared[(slice_name, cand, metric, key)]
        if not found:
            continue
        cross, nm = crossovers(found, run.noise[metric].sigma)
        series_list.append(
            Series(
                fixed=dict(key.fixed),
                cells=found,
                regimes=regimes(found),
                crossovers=cross,
                non_monotone=nm,
            )
        )
        cells += found
        crosses += cross
        non_mono = non_mono or nm
    ov = overall(
        cells,
        metric=metric,
        sigma=run.noise[metric].sigma,
        axis=run.settings.axis,
        crossovers=crosses,
        non_monotone=non_mono,
    )
    return MetricResult(
        metric=metric,
        higher_is_better=higher_is_better(metric),
        unit=unit(metric),
        primary=metric == run.settings.primary,
        sigma=run.noise[metric].sigma,
        series=series_list,
        overall=ov,
    )


def _failed_runs(run: _Run, slice_name: str, cells: Sequence[Comparison]) -> None:
    for c in cells:
        for role, a in (("baseline", c.baseline), ("candidate", c.candidate)):
            if a.failed_measurements:
                run.caveats.append(
                    Caveat(
                        kind=CaveatKind.FAILED_RUNS,
                        arm=a.arm,
                        role=role,
                        slice=slice_name,
                        point=c.point,
                        x=c.x,
                        count=a.failed_measurements,
                        errors=_first_seen(a.errors),
                    )
                )


def _suspect(settings: AnalysisSettings, cand: str) -> float | None:
    """The candidate's output agreement when it is below the floor, else None."""
    agreement = settings.correctness.get(cand)
    return agreement if agreement is not None and agreement < settings.correctness_min else None


def _slice(run: _Run, slice_name: str) -> SliceResult:
    settings = run.settings
    results = []
    for cand in run.candidates:
        metrics = [_metric(run, slice_name, cand, m) for m in settings.metrics]
        primary = metrics[0]
        cells = [c for s in primary.series for c in s.cells]
        run.primary_cells[cand] += cells
        run.per_slice[cand].append((slice_name, primary.overall))
        _failed_runs(run, slice_name, cells)
        suspect = _suspect(settings, cand)
        results.append(
            CandidateResult(
                candidate=cand,
                suspect=suspect is not None,
                correctness=settings.correctness.get(cand),
                metrics=metrics,
                overall=primary.overall.model_copy(update={"suspect": suspect}),
            )
        )
    return SliceResult(slice=slice_name, candidates=results)


def _across_slices(run: _Run, cand: str) -> Overall:
    """A candidate's headline on the primary metric: its only slice's, or one over all
    slices with each slice's own verdict beside it."""
    settings = run.settings
    per = run.per_slice[cand]
    if not run.primary_cells[cand]:
        run.caveats.append(Caveat(kind=CaveatKind.NO_SHARED_POINT, arm=cand))
    if len(per) == 1:
        ov = per[0][1]
    else:
        ov = overall(
            run.primary_cells[cand],
            metric=settings.primary,
            sigma=run.noise[settings.primary].sigma,
            axis=settings.axis,
        )
        ov.by_slice = [SliceVerdict(slice=s, verdict=o.verdict) for s, o in per]
    suspect = _suspect(settings, cand)
    if suspect is not None:
        run.caveats.append(
            Caveat(
                kind=CaveatKind.SUSPECT, arm=cand, value=suspect, reference=settings.correctness_min
            )
        )
    return ov.model_copy(update={"suspect": suspect})


def _warm_aside(
    measurements: Sequence[Measurement], primary: NoiseModel, axis: str
) -> list[WarmAside]:
    """The points whose warm runs `warm.set_aside` left out, with their gaps, in axis order."""
    points = {(m.slice, m.point_id): m.point for m in measurements}
    rows = [
        WarmAside(
            slice=s,
            point_id=pid,
            arm=arm,
            x=x_of(points[(s, pid)], axis),
            gap=primary.warm_at[(s, pid, arm)].gap,
            pairs=primary.warm_at[(s, pid, arm)].pairs,
        )
        for s, pid, arm in primary.aside
    ]
    return sorted(rows, key=lambda r: (r.arm, r.slice, r.x is None, r.x or 0.0, r.point_id))


def _warm_aside_caveats(rows: Sequence[WarmAside], metric: str) -> list[Caveat]:
    """One caveat per arm whose warm runs were left out somewhere: where, and by how much
    its later runs there beat the first (pooled over those points)."""
    out = []
    for arm in _first_seen([r.arm for r in rows]):
        mine = [r for r in rows if r.arm == arm]
        pairs = sum(r.pairs for r in mine)
        out.append(
            Caveat(
                kind=CaveatKind.WARM_ASIDE,
                arm=arm,
                metric=metric,
                xs=[r.x for r in mine if r.x is not None],
                value=sum(r.gap * r.pairs for r in mine) / pairs,
                count=pairs,
            )
        )
    return out


def analyse(measurements: Sequence[Measurement], settings: AnalysisSettings) -> Verdict:
    """Judge every candidate against the baseline, per slice, metric and sweep point, in one
    pass of four steps, each entered once and done before the next begins: (1) the noise
    stage (`noise.estimate_noise`: the warm runs a confirmed warm-up makes another condition
    set aside, then the noise of every metric estimated once), (2) every cell compared with
    it (`comparison`), (3) each series judged along the axis (`axis`), (4) the reruns set
    against their first runs (`reruns`)."""
    stage = estimate_noise(measurements, settings)
    noise = stage.models
    primary = noise[settings.primary]
    warm_aside = _warm_aside(measurements, primary, settings.axis)
    run = _start(stage.kept, settings, noise)
    run.caveats += _warm_aside_caveats(warm_aside, primary.metric)
    _compare_all(run)
    slices = [_slice(run, name) for name in run.points]
    overall_by_cand = {cand: _across_slices(run, cand) for cand in run.candidates}
    cells = [c for found in run.primary_cells.values() for c in found]
    judged = len(cells)
    provisional = sum(1 for c in cells if c.provisional)
    if provisional:
        run.caveats.append(Caveat(kind=CaveatKind.PROVISIONAL, count=provisional, total=judged))
    one_server = sum(1 for c in cells if CellNote.ONE_SERVER in c.notes)
    if one_server:
        run.caveats.append(Caveat(kind=CaveatKind.ONE_SERVER, count=one_server, total=judged))
    if judged * (1 - primary.level) >= 0.5:
        run.caveats.append(Caveat(kind=CaveatKind.MULTIPLICITY, count=judged))
    by_cell = {
        (s.slice, c.candidate, cell.point_id): cell
        for s in slices
        for c in s.candidates
        for series in c.metrics[0].series
        for cell in series.cells
    }
    return Verdict(
        settings=settings,
        level=primary.level,
        sigma=[model.sigma for model in noise.values()],
        slices=slices,
        overall=overall_by_cand,
        cells_judged=judged,
        reruns=reruns(
            measurements,
            primary,
            by_cell,
            baseline=settings.baseline,
            surprise=settings.surprise,
            axis=settings.axis,
        ),
        caveats=run.caveats,
        launch_check=primary.launches,
        warm_aside=warm_aside,
    )

"""The noise stage (VERDICTS.md §2; docs/architecture.md, "The analysis: one pass"), step 1
of the pass and entered once: which warm runs to set aside (`warm`, judged with this stage's
own σ), then every metric's noise estimated once, from the runs the comparison uses, into one
typed value, the `NoiseModel` (`noise_model`) — the variance components (`components`,
moderated along the axis by `moderation`), an earlier run's noise pooled in (`prior`),
first-run warm-up, the launch check (`launches`) and the level of each data state. The later
steps (a cell's comparison, the axis, the reruns) receive it and never re-estimate or look
behind it. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from matrixrun.analysis.components import estimate_components
from matrixrun.analysis.launches import launch_check
from matrixrun.analysis.noise_model import NoiseModel, WarmKey
from matrixrun.analysis.prior import with_history
from matrixrun.analysis.warm import point_gaps, set_aside, warmup_gaps
from matrixrun.core.measurement import Measurement
from matrixrun.core.verdict import AnalysisSettings, Sigma

__all__ = ["NoiseStage", "estimate_noise", "estimate_sigma", "sigma_of"]


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


def _own_sigma(
    measurements: Sequence[Measurement], metric: str, settings: AnalysisSettings
) -> Sigma:
    """This run's own noise estimate, marked as a fixed design's where it is one and has a
    launch part of its own (what a later run's `verify.noise_from` may then pool)."""
    sigma = estimate_sigma(measurements, metric, settings.noise, settings.axis)
    if settings.design == "fixed" and sigma.launch_df > 0:
        return sigma.model_copy(update={"fixed_design": True})
    return sigma


def sigma_of(measurements: Sequence[Measurement], metric: str, settings: AnalysisSettings) -> Sigma:
    """The σ record of `metric`: this run's own noise with an earlier run's pooled in."""
    return with_history(
        _own_sigma(measurements, metric, settings),
        settings.noise_history.get(metric),
        settings.noise_from or "",
    )


def _noise_of(
    measurements: Sequence[Measurement],
    metric: str,
    settings: AnalysisSettings,
    evidence: Sequence[Measurement],
    aside: frozenset[WarmKey],
    sigma: Sigma,
) -> NoiseModel:
    launches = None
    if metric == settings.primary:
        launches = launch_check(
            measurements, metric, margin=settings.margin_for(metric), axis=settings.axis
        )
    return NoiseModel.of(
        sigma,
        settings,
        metric=metric,
        warmup=warmup_gaps(evidence, metric),
        launches=launches,
        warm_at=point_gaps(evidence, metric),
        aside=aside,
    )


@dataclass(frozen=True)
class NoiseStage:
    """What the noise stage hands on: the runs the later steps use (`kept`: all of them but
    the warm runs set aside at `aside`, `warm.set_aside`) and every metric's model (primary
    first)."""

    kept: list[Measurement]
    aside: frozenset[WarmKey]
    models: dict[str, NoiseModel]


def estimate_noise(measurements: Sequence[Measurement], settings: AnalysisSettings) -> NoiseStage:
    """The noise stage, entered once per analysis: which warm runs to set aside (`warm`,
    judged with this stage's σ of the runs without them), then every metric's `NoiseModel`,
    each σ estimated once from the runs kept, the warm-up gaps from all of them. The primary
    metric's σ of the kept runs is the one the set-aside was judged with when the same runs
    were kept, and is not estimated again."""
    primary = settings.primary
    estimated: dict[frozenset[tuple[str, int]], Sigma] = {}

    def primary_sigma(runs: Sequence[Measurement]) -> Sigma:
        key = frozenset((m.cell_id, m.attempt) for m in runs)
        if key not in estimated:
            estimated[key] = sigma_of(runs, primary, settings)
        return estimated[key]

    kept, aside = set_aside(measurements, settings, primary_sigma)
    models = {
        metric: _noise_of(
            kept,
            metric,
            settings,
            measurements,
            aside,
            primary_sigma(kept) if metric == primary else sigma_of(kept, metric, settings),
        )
        for metric in settings.metrics
    }
    return NoiseStage(kept=kept, aside=aside, models=models)

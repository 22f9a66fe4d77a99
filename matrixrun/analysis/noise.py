"""The noise stage (VERDICTS.md §2; docs/architecture.md, "The analysis: one pass"): every
metric's noise estimated once, from the runs the comparison uses (all of them, but the warm
runs `warm.set_aside` leaves out where a warm-up is confirmed), into one typed value, the
`NoiseModel` — the variance components (`components`, moderated along the axis by
`moderation`), an earlier run's noise pooled in (`prior`), first-run warm-up, the launch check
(`launches`) and the level of each data state. The later stages (a cell's comparison, the
axis, the reruns) receive it and never re-estimate or look behind it. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from matrixrun.analysis.components import estimate_components
from matrixrun.analysis.launches import launch_check
from matrixrun.analysis.prior import with_history
from matrixrun.analysis.samples import value_of
from matrixrun.analysis.variance import CellNoise, cell_variance, one_run_sigma
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import higher_is_better
from matrixrun.core.tuning import WARMUP_Z
from matrixrun.core.verdict import AnalysisSettings, LaunchCheck, Sigma

__all__ = [
    "NoiseModel",
    "WarmupGap",
    "confirmed_warmup",
    "estimate_noise",
    "estimate_sigma",
    "point_gaps",
    "sigma_of",
    "warmup_gaps",
]


class WarmupGap(NamedTuple):
    """How much an arm's later runs on a server beat the first (log scale, + = better)."""

    gap: float
    pairs: int


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


#: Where a warm-up is measured: (slice, point id, arm).
WarmKey = tuple[str, str, str]


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


def confirmed_warmup(w: WarmupGap, margin: float, sigma: float | None) -> bool:
    """Is an arm's first-run warmup confirmed? Its later runs must beat the first by more than
    the margin on average *and* by more than noise explains: z·√2·σ/√pairs (a difference of
    two runs has σ√2). Why the second condition: warm reruns are run where the arm looked
    slow, so by regression to the mean a rerun tends to beat its first run even with no
    warmup at all; the run's σ (server-to-server when measured, ≥ the within-server one)
    keeps that from passing for warmup."""
    floor = WARMUP_Z * math.sqrt(2) * sigma / math.sqrt(w.pairs) if sigma else 0.0
    return w.gap > max(math.log1p(margin), floor)


@dataclass(frozen=True)
class NoiseModel:
    """Everything the later stages know of one metric's noise, estimated once (`estimate_noise`)
    and passed to them as it is: the comparison of a cell, the axis, the reruns receive it and
    never look behind it (docs/architecture.md, "The analysis: one pass").

    `sigma` is the record verdict.json keeps (the variance components after an earlier run's
    noise is pooled in, `prior.with_history`); `cell` and `one_run` apply it to a cell
    (`variance`). `levels` are the confidence levels of a cell's data states, 1 to the last,
    fixed before the run by α's spending (`AnalysisSettings.level_at`); `warmup` the
    first-run warm-up gaps (`warmup_gaps`), judged against `margin`, the metric's practical
    margin; `launches` the launch-stability check (the primary metric's only)."""

    metric: str
    sigma: Sigma
    margin: float
    levels: tuple[float, ...]
    by_runs: bool
    warmup: Mapping[str, WarmupGap] = field(default_factory=dict)
    launches: LaunchCheck | None = None
    #: the gaps per point (`point_gaps`), and the points whose warm runs the analysis left
    #: out of the comparison and the noise (`warm.set_aside`)
    warm_at: Mapping[WarmKey, WarmupGap] = field(default_factory=dict)
    aside: frozenset[WarmKey] = frozenset()

    @classmethod
    def of(
        cls,
        sigma: Sigma,
        settings: AnalysisSettings,
        *,
        metric: str | None = None,
        warmup: Mapping[str, WarmupGap] | None = None,
        launches: LaunchCheck | None = None,
        warm_at: Mapping[WarmKey, WarmupGap] | None = None,
        aside: frozenset[WarmKey] = frozenset(),
    ) -> NoiseModel:
        """The model of a noise record under `settings` (its margin and levels)."""
        name = metric or sigma.metric
        return cls(
            metric=name,
            sigma=sigma,
            margin=settings.margin_for(name),
            levels=tuple(settings.level_at(k) for k in range(1, settings.states + 1)),
            by_runs=settings.spending == "information",
            warmup=dict(warmup or {}),
            launches=launches,
            warm_at=dict(warm_at or {}),
            aside=aside,
        )

    @property
    def level(self) -> float:
        """The level of the last data state (the widest a cell can be judged at)."""
        return self.levels[-1]

    def level_for(self, n_baseline: int, n_candidate: int, look: int | None = None) -> float:
        """The level of a cell with these runs per arm: by `information` spending its state is
        its runs n_b + n_c − 1; by `equal` spending its look (None: the last)."""
        if self.by_runs:
            state = max(n_baseline + n_candidate - 1, 1)
        else:
            state = look if look is not None else len(self.levels)
        return self.levels[min(max(state, 1), len(self.levels)) - 1]

    def cell(
        self, x: float | None, baseline: Sequence[str], candidate: Sequence[str]
    ) -> CellNoise | None:
        """Var(d) of a cell whose arms ran on these launches (one entry per run)."""
        return cell_variance(self.sigma, x, baseline, candidate)

    def one_run(self, x: float | None, *, fresh: bool = True) -> float | None:
        """σ of one run at x, with the launch part for a run on a fresh launch."""
        return one_run_sigma(self.sigma, x, fresh=fresh)

    def confirmed(self, w: WarmupGap) -> bool:
        """Whether a warm-up gap is confirmed at this metric's margin and σ."""
        return confirmed_warmup(w, self.margin, self.sigma.value)


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
) -> NoiseModel:
    sigma = sigma_of(measurements, metric, settings)
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


def estimate_noise(
    measurements: Sequence[Measurement],
    settings: AnalysisSettings,
    *,
    evidence: Sequence[Measurement] | None = None,
    aside: frozenset[WarmKey] = frozenset(),
) -> dict[str, NoiseModel]:
    """The noise stage: every metric's `NoiseModel` (primary first), each estimated once from
    the run's measurements — those the comparison uses (`warm.set_aside` may have left warm
    runs out: `aside`); the warm-up gaps from all of them (`evidence`, default the same)."""
    seen = measurements if evidence is None else evidence
    return {
        metric: _noise_of(measurements, metric, settings, seen, aside)
        for metric in settings.metrics
    }

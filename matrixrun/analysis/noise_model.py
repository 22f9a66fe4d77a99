"""The noise model as the later steps receive it: `NoiseModel`, one frozen value per metric,
and the warm-up arithmetic it carries (docs/architecture.md, "The analysis: one pass").

A value, not a step: the noise stage (`noise.estimate_noise`) builds one per metric, and the
comparison of a cell, the axis and the reruns read it — its σ record, its margin, the level of
each data state, the warm-up gaps — and apply it through its methods (`variance`: a cell's
Var(d), one run's σ). So a later step that asks the model something calls into this module,
never back into the noise stage, which ran once before any cell was compared. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from matrixrun.analysis.variance import CellNoise, cell_variance, one_run_sigma
from matrixrun.core.tuning import WARMUP_Z
from matrixrun.core.verdict import AnalysisSettings, LaunchCheck, Sigma

__all__ = ["NoiseModel", "WarmKey", "WarmupGap", "confirmed_warmup"]


class WarmupGap(NamedTuple):
    """How much an arm's later runs on a server beat the first (log scale, + = better)."""

    gap: float
    pairs: int


#: Where a warm-up is measured: (slice, point id, arm).
WarmKey = tuple[str, str, str]


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

"""Step detection across engine versions (`matrixrun history --check`): pure, no I/O.

The model, in the manner of Bencher's t-test threshold and asv's step detection: an arm's
metric at one point is a level per engine version; between two consecutive versions (in the
order they were first measured) a step is a change of that level. Each step is tested on the
log scale with Student's t, the variance pooled over every version's measurements at that
point (one version's few runs then borrow the spread the others measured: a version with a
single measurement can still be tested), on Σ(nᵢ − 1) df. A step is a **regression** where the
change goes the wrong way (down for a throughput, up for a latency), by more than the
threshold, and its t-test rejects "no change" at α / k (Bonferroni over the k points tested,
so a check of many points does not fail by chance more often than α).

What it cannot see: measurements of one run share a launch, so where each version has a
single run the pooled spread is the run-to-run part alone and the test is optimistic; the
check says how many runs each version has.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from matrixrun.store.queries import VersionGroup


class StepKind(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NONE = "no step"
    UNTESTED = "untested"  # too few measurements to estimate a spread


@dataclass(frozen=True)
class Step:
    before: str
    after: str
    x: float
    change: float  # relative change of the geometric mean, after vs before
    p: float | None
    kind: StepKind
    n_before: int
    n_after: int


@dataclass(frozen=True)
class Check:
    steps: list[Step]
    threshold: float
    alpha: float
    df: float

    def latest(self) -> list[Step]:
        """The steps into the newest version: what a CI job asks about."""
        if not self.steps:
            return []
        last = self.steps[-1].after
        return [s for s in self.steps if s.after == last]

    def regressed(self) -> bool:
        return any(s.kind == StepKind.REGRESSION for s in self.latest())


def pooled_log_variance(groups: Sequence[VersionGroup], x: float) -> tuple[float, float]:
    """(s², df) of log values at x, pooled within versions."""
    ss = sum(g.at[x].ss for g in groups if x in g.at and g.at[x].n > 1)
    df = sum(g.at[x].n - 1 for g in groups if x in g.at and g.at[x].n > 1)
    return (ss / df if df else math.nan), float(df)


def check(
    groups: Sequence[VersionGroup],
    higher_is_better: bool,
    threshold: float = 0.05,
    alpha: float = 0.05,
) -> Check:
    """Every step between consecutive versions at every point both measured."""
    from scipy.special import stdtr  # Student's t CDF; loaded only for a check (startup)

    points = sorted({x for g in groups for x in g.at if not math.isnan(x)})
    steps: list[Step] = []
    worst_df = math.inf
    for a, b in itertools.pairwise(groups):
        shared = [x for x in points if x in a.at and x in b.at and a.at[x].n and b.at[x].n]
        level = alpha / max(len(shared), 1)
        for x in shared:
            sa, sb = a.at[x], b.at[x]
            d = sb.mean - sa.mean
            change = math.expm1(d)
            s2, df = pooled_log_variance(groups, x)
            worst_df = min(worst_df, df)
            p: float | None
            if not df or not math.isfinite(s2):
                kind, p = StepKind.UNTESTED, None
            else:
                se = math.sqrt(s2 * (1 / sa.n + 1 / sb.n))
                p = float(2 * stdtr(df, -abs(d) / se)) if se > 0 else (0.0 if d else 1.0)
                worse = d < 0 if higher_is_better else d > 0
                big = abs(change) > threshold and p < level
                kind = (
                    (StepKind.REGRESSION if worse else StepKind.IMPROVEMENT)
                    if big
                    else StepKind.NONE
                )
            steps.append(Step(a.version, b.version, x, change, p, kind, sa.n, sb.n))
    return Check(steps, threshold, alpha, 0.0 if worst_df is math.inf else worst_df)

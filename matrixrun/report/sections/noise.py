"""The noise and confidence section: σ per metric (where it came from, on how many degrees of
freedom), the interval level and margin, the correction for looking at many cells, and the
run's caveats; the sentences are the verdict's own (`wording.verdicts`), shared with the
cells that cite them. Template: `templates/sections/noise.md.j2`."""

from __future__ import annotations

from dataclasses import dataclass

from matrixrun.core.verdict import (
    Verdict,
)
from matrixrun.report import fmt, wording


@dataclass
class SigmaLine:
    metric: str
    text: str
    source: str
    primary: bool


@dataclass
class NoiseSection:
    """The noise and confidence section: σ per metric, the levels, and the caveats."""

    metrics: list[SigmaLine]
    level: str
    margin: str
    multiplicity: str
    warnings: list[str]


def of(verdict: Verdict) -> NoiseSection:
    s = verdict.settings
    return NoiseSection(
        metrics=[
            SigmaLine(
                metric=x.metric,
                text=wording.sigma_text(x),
                source=x.source.value,
                primary=x.metric == s.primary,
            )
            for x in verdict.sigma
        ],
        level=wording.level_text(s),
        margin=f"±{fmt.setting_percent(s.margin)}",
        multiplicity=wording.multiplicity(verdict),
        warnings=[wording.caveat(c, verdict) for c in verdict.caveats],
    )

"""The analysis result as plain data: what `analysis.analyse` returns, what `verdict.json` holds,
and what the report template renders.

Shape: `Verdict` → per slice (`SliceResult`) → per candidate (`CandidateResult`) → per metric
(`MetricResult`) → per series along the main sweep axis (`Series`) → per point (`Cell`), plus
regimes, crossovers and an overall verdict at each level that has one. Numbers sit beside
pre-formatted strings (`text`, `sentence`) so a Jinja template needs no arithmetic. Every model
forbids unknown fields and round-trips through JSON: no NaN or infinity is ever stored
(infinite degrees of freedom, from a declared prior, are `None`).

`AnalysisSettings` lives here too, because a verdict records the settings it was judged under.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: A cell's verdict (VERDICTS.md §4).
CellVerdict = Literal["better", "worse", "same", "inconclusive"]
#: A candidate's overall verdict (VERDICTS.md §8).
OverallVerdict = Literal["better", "worse", "mixed", "same", "inconclusive"]
#: Where σ came from, best first (VERDICTS.md §2).
SigmaSource = Literal["fresh_server", "warm", "prior", "none"]
#: Which arm's n limits a cell's interval: rerun that one (VERDICTS.md §6).
LimitingArm = Literal["baseline", "candidate", "both"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AnalysisSettings(_Model):
    """What the verdict engine needs to know, fixed before the run (a spec's arms, metrics and
    verify block, or `ingest`'s documented defaults)."""

    baseline: str
    candidates: list[str] = Field(
        default_factory=list,
        description="Candidate arms in report order; empty = every other arm, first seen first.",
    )
    primary: str = "output_throughput"
    secondary: list[str] = Field(default_factory=list)
    margin: float = Field(0.03, gt=0, lt=1, description="Practical margin m (0.03 = 3%).")
    surprise: float = Field(0.10, gt=0, description="|change| above this is a surprise.")
    noise: float | None = Field(
        None, gt=0, description="Declared relative σ of one measurement (prior), e.g. 0.02."
    )
    confidence: float = Field(0.95, gt=0.5, lt=1)
    looks: int = Field(1, ge=1, description="Interim looks fixed in the plan (Bonferroni).")
    spending: Literal["equal", "increasing"] = Field(
        "equal",
        description="How 1 − confidence is split over the looks: equally (Bonferroni), or in "
        "proportion to k² for a cell's k-th data state (more for later, larger samples).",
    )
    failure_limit: float = Field(0.01, ge=0, lt=1, description="Share of failed requests.")
    axis: str = Field("concurrency", description="Main sweep axis: point[axis] is x.")
    correctness: dict[str, float] = Field(
        default_factory=dict, description="Output agreement with the baseline per arm, 0..1."
    )
    correctness_min: float = Field(0.9, ge=0, le=1, description="Spec correctness.floor.")

    @model_validator(mode="after")
    def _baseline_not_candidate(self) -> AnalysisSettings:
        if self.baseline in self.candidates:
            raise ValueError(f"baseline {self.baseline!r} is also listed as a candidate")
        return self

    @property
    def metrics(self) -> list[str]:
        """Primary first, then the secondaries, without repeats."""
        out = [self.primary]
        out += [m for m in self.secondary if m not in out]
        return out

    @property
    def level(self) -> float:
        """Confidence level at the last look (the widest a cell can be judged at): equal
        Bonferroni over the plan's looks, or the last share of the increasing split."""
        return self.level_at(self.looks)

    def level_at(self, look: int) -> float:
        """Confidence level for a cell whose data are in their `look`-th state (1 = stage 1
        only; each stage-2 round that added runs to the cell is one more).

        Why this is valid: a cell's verdict is a test on one of at most `looks` successive
        data states, and it is re-measured only while inconclusive, so a false verdict needs
        at least one of those tests to err; their levels are split so they sum to the spec's
        1 − confidence (Bonferroni's inequality holds whatever the correlation between
        states). `increasing` gives state k a share ∝ k² (3 looks: 0.36%, 1.43%, 3.21% of a
        5% α), like O'Brien–Fleming spending: early decisions on n = 1 need a large effect
        anyway, the last state decides the close cells. The weights are nondecreasing, so a
        look index that undercounts a cell's states (see `analysis.look_of`) only makes its
        interval wider."""
        k = min(max(look, 1), self.looks)
        alpha = 1 - self.confidence
        if self.spending == "equal":
            return 1 - alpha / self.looks
        weights = [j * j for j in range(1, self.looks + 1)]
        return 1 - alpha * weights[k - 1] / sum(weights)


class Sigma(_Model):
    """Noise σ of one measurement's log value for one metric, pooled over the run."""

    metric: str
    value: float | None = Field(description="σ on the log scale (≈ relative σ); None = none.")
    df: float | None = Field(description="Degrees of freedom; None = infinite (prior) or none.")
    source: SigmaSource
    fresh_value: float | None = None
    fresh_df: int = 0
    warm_value: float | None = None
    warm_df: int = 0
    prior: float | None = None
    text: str = Field(description="'σ = 1.2% (df = 4, fresh-server replicates)'.")


class ArmSample(_Model):
    """One arm's measurements in one cell, for one metric."""

    arm: str
    values: list[float] = Field(description="The metric from each successful measurement.")
    n: int
    mean: float | None = Field(description="Geometric mean of `values` (mean of logs).")
    instances: list[str]
    reasons: list[str] = Field(description="Why each measurement (successful or not) was run.")
    failed_measurements: int = 0
    errors: list[str] = Field(default_factory=list)
    failed_requests: int = 0
    total_requests: int = 0
    failure_rate: float = 0.0


class Cell(_Model):
    """One sweep point, one candidate against the baseline, one metric."""

    point_id: str
    point: dict[str, Any]
    x: float | None
    baseline: ArmSample
    candidate: ArmSample
    change: float | None = Field(description="candidate / baseline − 1 (geometric means).")
    change_lo: float | None = None
    change_hi: float | None = None
    d: float | None = Field(description="Signed log ratio: + is better for this metric.")
    d_lo: float | None = None
    d_hi: float | None = None
    verdict: CellVerdict
    confident: bool = Field(description="verdict is better or worse.")
    provisional: bool = Field(description="Either arm has n = 1 (VERDICTS.md §5).")
    look: int = Field(1, ge=1, description="The cell's data state: 1 + stage-2 rounds it had.")
    level: float | None = Field(None, description="Confidence level of its interval.")
    small_change: bool = Field(False, description="Inconclusive but the interval excludes 0.")
    surprise: bool = Field(False, description="|change| > the surprise threshold.")
    limiting_arm: LimitingArm | None = None
    runs_needed: int | None = Field(None, description="≈ n per arm that would settle it.")
    notes: list[str] = Field(default_factory=list)
    text: str = Field(description="'−28.3% [−31.0, −25.5] n=2/2 worse'.")


class Regime(_Model):
    """A run of consecutive points along the axis with the same verdict."""

    verdict: CellVerdict
    x_from: float | None
    x_to: float | None
    point_ids: list[str]
    text: str


class Crossover(_Model):
    """Where a confident verdict flips sign along the axis (VERDICTS.md §9)."""

    direction: Literal["better_to_worse", "worse_to_better"]
    x_lo: float
    x_hi: float
    estimate: float | None = Field(description="Interpolated in log space; None if x ≤ 0.")
    text: str


class Series(_Model):
    """The cells along the main axis for one combination of the other point keys."""

    fixed: dict[str, Any] = Field(default_factory=dict)
    cells: list[Cell]
    regimes: list[Regime]
    crossovers: list[Crossover]
    non_monotone: bool = False
    text: str = ""


class Overall(_Model):
    """A candidate's verdict on one metric, with the one sentence that says why."""

    verdict: OverallVerdict
    provisional: bool = False
    better: int = 0
    worse: int = 0
    same: int = 0
    inconclusive: int = 0
    runs_needed: int | None = None
    sentence: str


class MetricResult(_Model):
    metric: str
    higher_is_better: bool
    unit: str
    primary: bool
    sigma: Sigma
    series: list[Series]
    overall: Overall


class CandidateResult(_Model):
    candidate: str
    suspect: bool = Field(False, description="Outputs disagree with the baseline's.")
    correctness: float | None = None
    metrics: list[MetricResult] = Field(description="Primary first.")
    overall: Overall = Field(description="The primary metric's overall verdict (the headline).")


class SliceResult(_Model):
    slice: str
    candidates: list[CandidateResult]


class Rerun(_Model):
    """A repeat of a cell and what it showed against the cell's first run (VERDICTS.md §6:
    a warm rerun tests first-run warmup/JIT; a fresh-server rerun tests an odd instance)."""

    slice: str
    arm: str
    point_id: str
    point: dict[str, Any]
    attempt: int
    reason: str
    instance: str
    same_instance: bool
    metric: str
    value: float | None
    first_value: float | None
    change_vs_first: float | None
    matches_first: bool | None = Field(description="Within ±margin of the first run.")
    text: str


class Verdict(_Model):
    """The whole analysis: written as verdict.json and rendered by the report."""

    settings: AnalysisSettings
    level: float = Field(
        description="Confidence level at the last look (a cell's own is `Cell.level`)."
    )
    sigma: list[Sigma] = Field(description="One per metric, primary first.")
    slices: list[SliceResult]
    overall: dict[str, Overall] = Field(
        description="Per candidate, over all slices, on the primary metric."
    )
    cells_judged: int = 0
    multiplicity: str = Field("", description="How chance flags among many cells are handled.")
    reruns: list[Rerun] = Field(default_factory=list, description="Primary metric.")
    warnings: list[str] = Field(default_factory=list)


class CellRef(_Model):
    """A cell the verify policy may want to rerun, and which arm to rerun (VERDICTS.md §6)."""

    slice: str
    candidate: str
    metric: str
    point_id: str
    point: dict[str, Any]
    change: float | None
    verdict: CellVerdict
    n_baseline: int
    n_candidate: int
    limiting_arm: LimitingArm | None
    runs_needed: int | None
    text: str

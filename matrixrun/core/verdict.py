"""The analysis result as plain data: what `analysis.analyse` returns and `verdict.json` holds.

Shape: `Verdict` → per slice (`SliceResult`) → per candidate (`CandidateResult`) → per metric
(`MetricResult`) → per series along the main sweep axis (`Series`) → per point (`Comparison`),
plus regimes, crossovers and an overall verdict at each level that has one.

Numbers only, no words: outcomes, notes, rerun kinds and caveats are enums, and every number a
sentence needs is a typed field. The sentences are written once, by `report.wording`, so the
analysis can never say one thing and the report another. Every model forbids unknown fields and
round-trips through JSON: no NaN or infinity is ever stored (infinite degrees of freedom, from a
declared prior, are `None`).

`AnalysisSettings` lives here too, because a verdict records the settings it was judged under.
"""

from __future__ import annotations

import math
from enum import StrEnum
from statistics import NormalDist
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from matrixrun.core.capacity import Capacity
from matrixrun.core.format_version import VERDICT_VERSION
from matrixrun.core.launches import LaunchCheck as LaunchCheck
from matrixrun.core.launches import LaunchSpread as LaunchSpread
from matrixrun.core.launches import LaunchValue as LaunchValue
from matrixrun.core.warmup import WarmAside as WarmAside
from matrixrun.core.warmup import WarmupShift as WarmupShift


class CellVerdict(StrEnum):
    """A cell's verdict (VERDICTS.md §4)."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"
    UNDECIDED = "undecided"


class OverallVerdict(StrEnum):
    """A candidate's overall verdict on one metric (VERDICTS.md §8)."""

    BETTER = "better"
    WORSE = "worse"
    MIXED = "mixed"
    SAME = "same"
    UNDECIDED = "undecided"


class SigmaSource(StrEnum):
    """Where σ came from, best first (VERDICTS.md §2)."""

    FRESH_SERVER = "fresh_server"
    WARM = "warm"
    PRIOR = "prior"
    NONE = "none"


#: Which arm's n limits a cell's interval: rerun that one (VERDICTS.md §6).
LimitingArm = Literal["baseline", "candidate", "both"]


class CellNote(StrEnum):
    """Why a cell's verdict is what it is, beyond its interval (`report.wording.cell_note`
    words each). The first four take the verdict's confidence away and lead the list."""

    NO_BASELINE = "no_baseline"  # no successful measurement of the baseline
    NO_CANDIDATE = "no_candidate"
    NO_NOISE = "no_noise"  # no σ: nothing to build an interval from
    CANDIDATE_UNRELIABLE = "candidate_unreliable"  # fails too many requests to be called better
    BASELINE_UNRELIABLE = "baseline_unreliable"
    WARMUP = "warmup"  # confirmed first-run warmup could account for the verdict
    CLIENT_BOUND = "client_bound"  # the client's own lag could account for the verdict
    CAPPED = "capped"  # a capped arm's latency flatters it: it cannot be called better
    BASELINE_FAILED_RUNS = "baseline_failed_runs"
    CANDIDATE_FAILED_RUNS = "candidate_failed_runs"
    BASELINE_FAILED_REQUESTS = "baseline_failed_requests"  # above verify.failure_rate
    CANDIDATE_FAILED_REQUESTS = "candidate_failed_requests"
    ONE_SERVER = "one_server"  # repeats on one server count once toward the interval
    SMALL_CHANGE = "small_change"  # inconclusive, but the interval excludes 0


#: Notes that decide what a cell's verdict says (shown in its one-line summary).
LEADING_NOTES = frozenset(
    {
        CellNote.NO_BASELINE,
        CellNote.NO_CANDIDATE,
        CellNote.NO_NOISE,
        CellNote.CANDIDATE_UNRELIABLE,
        CellNote.BASELINE_UNRELIABLE,
        CellNote.WARMUP,
        CellNote.CLIENT_BOUND,
        CellNote.CAPPED,
    }
)


class RerunKind(StrEnum):
    """Where a repeat ran: on the cell's first server (warm) or a freshly launched one."""

    WARM = "warm"
    FRESH_SERVER = "fresh_server"


class Explanation(StrEnum):
    """The story a rerun was run to test (VERDICTS.md §6); `REPLICATE` tests none, it only
    adds runs."""

    WARMUP = "warmup"  # first-run JIT compile / warmup
    INSTANCE = "instance"  # that server instance was odd
    REPLICATE = "replicate"


class CheckOutcome(StrEnum):
    CONFIRMED = "confirmed"
    FALSIFIED = "falsified"
    NOT_SETTLED = "not settled"


class CaveatKind(StrEnum):
    """A run-level caveat (`Caveat`), in the order the analysis raises them."""

    NO_BASELINE = "no_baseline"
    WARM_SIGMA = "warm_sigma"
    NO_SIGMA = "no_sigma"
    SIGMA_BELOW_PRIOR = "sigma_below_prior"
    SIGMA_DF1 = "sigma_df1"
    WARMUP = "warmup"
    WARM_ASIDE = "warm_aside"  # warm reruns left out where a warm-up is confirmed
    FAILED_RUNS = "failed_runs"
    NO_SHARED_POINT = "no_shared_point"
    SUSPECT = "suspect"
    PROVISIONAL = "provisional"
    ONE_SERVER = "one_server"
    MULTIPLICITY = "multiplicity"


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
    noise_history: dict[str, Sigma] = Field(
        default_factory=dict,
        description="Per metric, the noise of an earlier run of the same engine, model and "
        "hardware (verify.noise_from): its run noise pooled with this run's by df, its launch "
        "variance used only where this run has none.",
    )
    noise_from: str | None = Field(None, description="Where `noise_history` was read from.")
    noise: float | None = Field(
        None, gt=0, description="Declared relative σ of one measurement (prior), e.g. 0.02."
    )
    confidence: float = Field(0.95, gt=0.5, lt=1)
    looks: int = Field(
        1,
        ge=1,
        description="Interim looks fixed in the plan (1 + stage-2 rounds = the most runs an "
        "arm may get in a cell, `verify.max_runs`).",
    )
    spending: Literal["equal", "information"] = Field(
        "equal",
        description="How 1 − confidence is split: all of it at the one look (`equal`, a "
        "design judged once), or over every state a cell can stop in (its runs n_b + n_c) by "
        "the Lan–DeMets O'Brien–Fleming spending function of the information fraction "
        "(n_b + n_c) / (2 · looks).",
    )
    margins: dict[str, float] = Field(
        default_factory=dict,
        description="Per-metric practical margins (spec `metrics: {name: {margin: …}}`); "
        "a metric not listed uses `margin`.",
    )
    failure_limit: float = Field(0.01, ge=0, lt=1, description="Share of failed requests.")
    design: Literal["adaptive", "fixed"] = Field(
        "adaptive",
        description="verify.design: fixed = every cell max_runs times, each on its own launch, "
        "nothing chosen by the data (its σ records say so: `Sigma.fixed_design`).",
    )
    axis: str = Field("concurrency", description="Main sweep axis: point[axis] is x.")
    correctness: dict[str, float] = Field(
        default_factory=dict, description="Output agreement with the baseline per arm, 0..1."
    )
    correctness_min: float = Field(0.9, ge=0, le=1, description="Spec correctness.floor.")
    correctness_errors: dict[str, str] = Field(
        default_factory=dict,
        description="Arms whose correctness gate could not collect its answers, and why.",
    )

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

    def margin_for(self, metric: str) -> float:
        """The practical margin of `metric`: its own from the spec, else the common one."""
        return self.margins.get(metric, self.margin)

    @property
    def states(self) -> int:
        """How many data states a cell's level is spent over: the looks, or with
        `information` spending every total n_b + n_c from 2 to 2 · looks."""
        by_state = self.spending == "information"
        return 2 * self.looks - 1 if by_state else self.looks

    @property
    def level(self) -> float:
        """Confidence level at the last state (the widest a cell can be judged at)."""
        return self.level_at(self.states)

    def level_at(self, look: int) -> float:
        """Confidence level for a cell in its `look`-th data state (the analysis's noise stage
        reads every state's once, `analysis.noise_model.NoiseModel.levels`, and a cell's state off
        its runs or its look there).

        `information` (what the spec-driven runs use): state k is a cell with n_b + n_c =
        k + 1 runs, whichever rounds, reruns or re-analyses brought them; its share of α is
        the Lan–DeMets O'Brien–Fleming increment α(t_k) − α(t_{k−1}), α(t) = 2 − 2Φ(z/√t),
        z = Φ⁻¹(1 − α/2), t_k = (k + 1) / (2 · looks). Why valid whatever the policy does: a
        cell's reported verdict is its test at the state it ends in; every state it can end in
        has a level and the levels sum to 1 − confidence, so by Bonferroni's inequality a false
        verdict has probability at most α however the policy chose to rerun it (re-measuring
        confident cells, analysing after every run). The shape puts little α where n = 1 (an
        early decision needs a large effect anyway) and most on the close cells' last states.

        `equal`: α split equally over the looks (one look: all of it)."""
        alpha = 1 - self.confidence
        if self.spending == "information":
            total = 2 * self.looks
            k = min(max(look, 1), total - 1)
            if self.looks == 1:
                return self.confidence
            z = float(NormalDist().inv_cdf(1 - alpha / 2))

            def spent(t: float) -> float:
                return 2 - 2 * NormalDist().cdf(z / math.sqrt(t)) if t > 0 else 0.0

            t_k, t_prev = (k + 1) / total, k / total
            share = spent(t_k) - (spent(t_prev) if k > 1 else 0.0)
            return 1 - share
        return 1 - alpha / self.looks


class SigmaAt(_Model):
    """Run noise (within a launch) at one sweep point: the moderated estimate the cells there
    are judged with, and the raw one it was shrunk from."""

    x: float | None
    run: float = Field(description="σ_w at this point, log scale, moderated.")
    run_df: float = Field(description="Its df: the point's own plus what the trend lends.")
    raw: float | None = Field(None, description="The point's own estimate; None = no df here.")
    raw_df: float = 0.0


class OddGroup(_Model):
    """A server group whose launches spread more than the other groups' (the noise model's
    heterogeneity test, `analysis/components.py`): its cells are judged with its own launch
    variance, and the launch variance every other cell is judged with is estimated without it,
    so one odd configuration does not set σ for every cell."""

    group: str = Field(description="`slice/group_id` (the fit's group key).")
    arm: str
    instances: list[str] = Field(description="Its launches (server instances).")
    launch: float = Field(description="Its own σ_b, log scale.")
    launch_df: int
    launch_var_sd: float | None = None
    f: float = Field(description="Its launch mean square over the other groups' pooled one.")
    p: float = Field(description="One-sided p of `f` (before the Bonferroni factor).")


class Sigma(_Model):
    """Noise of one measurement's log value for one metric: the launch part σ_b shared by every
    cell of a server instance, run noise σ_w within one (per sweep point in `by_x`), and the
    declared prior (docs/verdicts.md, "The noise model"). `value`/`df` summarise it as σ of one
    run on a fresh launch, √(σ_b² + σ_w²), with Satterthwaite df."""

    metric: str
    value: float | None = Field(description="σ on the log scale (≈ relative σ); None = none.")
    df: float | None = Field(description="Degrees of freedom; None = infinite (prior) or none.")
    source: SigmaSource
    prior: float | None = None
    launch: float | None = Field(None, description="σ_b; None = not estimable (no relaunch).")
    launch_df: int = 0
    launch_var_sd: float | None = Field(
        None,
        description="Standard error of the σ_b² estimate (its spread over the design's launch "
        "contrasts, equal only when balanced); None = from launch_df alone.",
    )
    run: float | None = Field(None, description="σ_w pooled over the points.")
    run_df: float = 0.0
    by_x: list[SigmaAt] = Field(default_factory=list)
    history: str | None = Field(
        None, description="The earlier run whose noise was pooled in (verify.noise_from)."
    )
    history_df: float = Field(0.0, description="The df that earlier run's noise brought.")
    history_fixed: bool = Field(
        False, description="That earlier run was a fixed design: its launch part was pooled too."
    )
    fixed_design: bool = Field(
        False,
        description="Measured by a fixed design (verify.design: fixed): no launch was chosen "
        "by the data, so the launch variance is not biased by stopping and a later run may "
        "pool it (verify.noise_from).",
    )
    odd_groups: list[OddGroup] = Field(
        default_factory=list,
        description="Groups judged with their own launch variance (`OddGroup`); `launch` is "
        "then the other groups' pooled one.",
    )


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
    client_bound: float = Field(
        0.0,
        description="The most this metric could be off through the client's own lag, over the "
        "arm's runs here (the load client's self-check; 0: it kept up).",
    )
    capped: int = Field(0, description="Runs here that the cell's time cap cut short.")


class Comparison(_Model):
    """One sweep point, one candidate against the baseline, one metric. (Not `plan.Cell`,
    which is one arm at one point, the unit that gets measured.)"""

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
    runs_needed: int | None = Field(
        None,
        description="Runs per arm in all (the extra ones each on a fresh launch) at which the "
        "interval would decide if the observed change were the true one and the noise model "
        "held (Student's t on the df it would then have).",
    )
    se: float | None = Field(None, description="Standard error of d under the noise model.")
    df: float | None = Field(None, description="Satterthwaite df of `se`; None = infinite.")
    floored: bool = Field(False, description="The declared prior's floor raised the noise.")
    notes: list[CellNote] = Field(default_factory=list, description="Leading notes first.")
    warmup: list[WarmupShift] = Field(default_factory=list, description="For CellNote.WARMUP.")

    @property
    def leading_note(self) -> CellNote | None:
        """The note a one-line summary shows: one that decided the verdict, else
        `SMALL_CHANGE` when the interval excludes 0, else none."""
        if self.notes and self.notes[0] in LEADING_NOTES:
            return self.notes[0]
        return CellNote.SMALL_CHANGE if self.small_change else None


class Regime(_Model):
    """A run of consecutive points along the axis with the same verdict."""

    verdict: CellVerdict
    x_from: float | None
    x_to: float | None
    point_ids: list[str]


class Crossover(_Model):
    """Where a confident verdict flips sign along the axis (VERDICTS.md §9)."""

    direction: Literal["better_to_worse", "worse_to_better"]
    x_lo: float
    x_hi: float
    estimate: float | None = Field(description="Interpolated in log space; None if x ≤ 0.")
    estimate_lo: float | None = Field(
        None,
        description="Model-conditional interval of the interpolated point (parametric "
        "bootstrap keeping the shared launch effects), clipped to the bracket.",
    )
    estimate_hi: float | None = None
    bracket_share: float | None = Field(
        None, description="Share of bootstrap draws that cross inside the bracket at all."
    )


class Series(_Model):
    """The cells along the main axis for one combination of the other point keys."""

    fixed: dict[str, Any] = Field(default_factory=dict)
    cells: list[Comparison]
    regimes: list[Regime]
    crossovers: list[Crossover]
    non_monotone: bool = False


class Place(_Model):
    """Where a confident cell sits, and its change: what an overall sentence lists."""

    point: dict[str, Any]
    x: float | None
    change: float | None
    series: str = Field("", description="The point's keys off the axis: same series, same key.")


class SliceVerdict(_Model):
    slice: str
    verdict: OverallVerdict


class Overall(_Model):
    """A candidate's verdict on one metric, and every number its sentence needs."""

    metric: str
    verdict: OverallVerdict
    provisional: bool = False
    cells: int = 0
    better: int = 0
    worse: int = 0
    same: int = 0
    undecided: int = 0
    runs_needed: int | None = None
    better_at: list[Place] = Field(default_factory=list)
    worse_at: list[Place] = Field(default_factory=list)
    crossovers: list[Crossover] = Field(default_factory=list)
    non_monotone: bool = False
    sigma: float | None = Field(None, description="The σ the cells were judged with.")
    sigma_source: SigmaSource = SigmaSource.NONE
    by_slice: list[SliceVerdict] = Field(
        default_factory=list, description="Across slices: each slice's own verdict."
    )
    suspect: float | None = Field(
        None, description="The candidate's output agreement, when below the floor."
    )


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
    """A repeat of a cell, set against the cell's first run, and what it says about the
    explanation it was run to test (VERDICTS.md §6: a warm rerun tests first-run warmup/JIT; a
    fresh-server rerun tests an odd instance). `alone` is the rerun set against the other arm
    on its own (candidate rerun / baseline mean − 1, or candidate mean / baseline rerun − 1):
    whether the effect survives without the first run."""

    slice: str
    arm: str
    cell_id: str
    candidate: str = Field(description="The candidate whose comparison the rerun belongs to.")
    point_id: str
    point: dict[str, Any]
    attempt: int
    reason: str
    instance: str
    kind: RerunKind
    metric: str
    value: float | None
    first_value: float | None
    change_vs_first: float | None
    matches_first: bool | None = Field(
        description="Within what noise explains for one pair (z·√2·σ at the point: run noise "
        "for a warm rerun, run + launch noise for a fresh one), i.e. `noise_band`."
    )
    noise_band: float | None = Field(
        None, description="z·√2·σ as a relative change: the largest difference noise explains."
    )
    tests: Explanation
    outcome: CheckOutcome | None = None
    alone: float | None = None
    error: str | None = None


class Caveat(_Model):
    """A run-level caveat with the numbers its sentence needs; unused fields stay None."""

    kind: CaveatKind
    metric: str | None = None
    arm: str | None = None
    role: str | None = None
    slice: str | None = None
    point: dict[str, Any] | None = None
    x: float | None = None
    count: int | None = None
    total: int | None = None
    value: float | None = None
    reference: float | None = None
    arms: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    xs: list[float] = Field(default_factory=list, description="Axis values it concerns.")


VERDICT_SCHEMA = VERDICT_VERSION
"""verdict.json's format (`core.format_version`). Raised when a field changes meaning, with a
step in `core.migrate` that brings an older file forward, so the report's readers see only
the current format and no reader keeps compatibility code."""


class Verdict(_Model):
    """The whole analysis: written as verdict.json, rendered by the report."""

    schema_version: int = Field(VERDICT_SCHEMA, description="verdict.json's format.")
    settings: AnalysisSettings
    level: float = Field(
        description="Confidence level at the last look (a cell's own is `Comparison.level`)."
    )
    sigma: list[Sigma] = Field(description="One per metric, primary first.")
    slices: list[SliceResult]
    overall: dict[str, Overall] = Field(
        description="Per candidate, over all slices, on the primary metric."
    )
    cells_judged: int = 0
    reruns: list[Rerun] = Field(default_factory=list, description="Primary metric.")
    caveats: list[Caveat] = Field(default_factory=list)
    launch_check: LaunchCheck | None = Field(
        None, description="Primary metric: launches that disagree beyond run noise."
    )
    warm_aside: list[WarmAside] = Field(
        default_factory=list, description="Warm runs left out where a warm-up is confirmed."
    )
    capacity: Capacity | None = Field(
        None, description="Capacity under the spec's SLO (`analysis.capacity`), when it has one."
    )

    def comparisons(self, metric: str | None = None) -> list[tuple[str, str, Comparison]]:
        """Every (slice, candidate, comparison), on `metric` (default: the primary)."""
        metric = metric or self.settings.primary
        return [
            (s.slice, c.candidate, cell)
            for s in self.slices
            for c in s.candidates
            for mr in c.metrics
            if mr.metric == metric
            for series in mr.series
            for cell in series.cells
        ]

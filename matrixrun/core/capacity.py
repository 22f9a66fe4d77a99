"""Capacity under an SLO, as verdict.json keeps it: per arm the highest load at which every
bound holds, and the arms' capacities compared (the analysis: `analysis/capacity.py`; the
words: `report/sections/slo.py`).

Why its own result beside the cell verdicts: a cell verdict answers "is the candidate better
at this load"; a capacity planner asks "how much load does each sustain within the limits",
a single number per arm whose comparison is a ratio of loads, not of metrics. Loads are
values of the sweep's load axis (concurrency or request rate), in the spec's units.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

#: The sweep axes that are loads: capacity is a value of one of them (and only along one of
#: them does the verify policy narrow a capacity bracket: `verify.capacity`).
LOAD_AXES = ("concurrency", "request_rate")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Bound(_Model):
    """One SLO bound: a metric and its max and/or min."""

    metric: str
    max: float | None = None
    min: float | None = None


class CapacityOutcome(StrEnum):
    """The capacity comparison's verdict. There is no 'same': two brackets that overlap
    say only that the sweep cannot tell the capacities apart."""

    HIGHER = "higher"
    LOWER = "lower"
    UNDECIDED = "undecided"
    NOT_JUDGED = "not_judged"


class ArmCapacity(_Model):
    """One arm's capacity along one series (the points that differ only in load)."""

    arm: str
    slice: str = ""
    series: dict[str, object] = Field(default_factory=dict)
    lo: float | None = Field(
        None,
        description="The highest load known to hold: there and at every lower load every "
        "bound holds at the far end of the mean's t-interval (the pooled run spread). None: "
        "not even the lowest load measured.",
    )
    hi: float | None = Field(
        None,
        description="The lowest load known to miss: a bound is missed there beyond the "
        "runs' spread. None: no load measured misses.",
    )
    unclear: list[float] = Field(
        default_factory=list,
        description="Loads between lo and hi whose t-interval straddles a bound: neither "
        "surely within nor surely beyond, so they end neither side of the bracket (the verify "
        "policy runs them again; a load still here at max_runs is within noise of the limit).",
    )
    last_meeting: float | None = Field(
        None, description="The highest load before the first miss at which the means meet."
    )
    first_missing: float | None = Field(None, description="The first load whose means miss.")
    estimate: float | None = Field(
        None,
        description="Where the binding bound is crossed, interpolated in log-log between "
        "last_meeting and first_missing; None when the bracket is open.",
    )
    limiting: list[str] = Field(
        default_factory=list, description="The bounds the means miss at first_missing."
    )
    points: int = 0
    points_meeting: int = 0
    min_runs: int = Field(0, description="The fewest runs behind any point's judgement.")
    non_monotone: bool = Field(
        False, description="A load above the first miss meets every bound again."
    )
    missing: list[str] = Field(
        default_factory=list, description="SLO metrics the run did not measure."
    )
    request_throughput: float | None = Field(None, description="At last_meeting (req/s).")
    output_throughput: float | None = Field(None, description="At last_meeting (tok/s).")
    goodput: float | None = Field(
        None,
        description="At last_meeting: requests per second that met every per-request bound "
        "(vLLM's goodput), from the per-request records; None where there are none.",
    )
    good_share: float | None = Field(
        None, description="The share of completed requests at last_meeting that met them."
    )


class CapacityComparison(_Model):
    """A candidate's capacity against the baseline's, along one series."""

    slice: str = ""
    series: dict[str, object] = Field(default_factory=dict)
    baseline: str
    candidate: str
    ratio: float | None = Field(None, description="candidate estimate / baseline estimate.")
    ratio_lo: float | None = Field(
        None, description="The least the ratio can be by the brackets (lo_c / hi_b); None: 0."
    )
    ratio_hi: float | None = Field(
        None, description="The most it can be (hi_c / lo_b); None: unbounded."
    )
    outcome: CapacityOutcome


class Capacity(_Model):
    """Capacity under the spec's SLO, for every arm and series."""

    axis: str = Field(description="The load axis: concurrency or request_rate.")
    bounds: list[Bound]
    per_request: list[str] = Field(
        default_factory=list,
        description="The bounds goodput applies per request (latencies of one request: "
        "TTFT, TPOT, end-to-end); the others hold only for a cell as a whole.",
    )
    goodput_from_records: bool = Field(
        False, description="Goodput was counted from per-request records (else not known)."
    )
    level: float = Field(description="Confidence level of a load's t-interval.")
    spread: dict[str, float] = Field(
        default_factory=dict,
        description="Per bound metric, the pooled σ of one run's log value (cells with 2+ "
        "runs) that widens each load's judgement; a metric absent: no repeated run, means only.",
    )
    arms: list[ArmCapacity]
    comparisons: list[CapacityComparison]

"""Why the verify policy asked for a rerun, as data: the kind of check and the numbers behind it.
The policy decides (`verify.policy`), the runner records it in the verify event of events.jsonl
beside the attempt it asked for, and `report.sections.reruns.rerun_why` words it — so the policy
writes no sentences and the report pairs a rerun with its reason by data, not order."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from matrixrun.core.verdict import Comparison


class WhyKind(StrEnum):
    WARM_CHECK = "warm_check"  # stage 1: surprising with this arm the slower one
    AA = "aa"  # the baseline against itself on a fresh server
    UNDECIDED = "undecided"  # inconclusive; this arm's n limits the interval
    INSTANCE_CHECK = "instance_check"  # surprising: is the first server odd?
    SIGMA_REPLICATE = "sigma_replicate"  # fresh-server degrees of freedom for σ
    CROSSOVER = "crossover"  # brackets a crossover: a second run of its end
    BISECTION = "bisection"  # a new cell at the geometric midpoint of a crossover bracket
    CAPACITY = "capacity"  # a new cell of one arm at the geometric midpoint of its SLO bracket
    CAPACITY_NEAR = "capacity_near"  # this arm's load is within noise of an SLO bound: again
    FIXED_DESIGN = "fixed_design"  # verify.design: fixed, every cell max_runs times
    UNSTABLE_LAUNCH = "unstable_launch"  # launches of this arm disagree here: one more launch
    WARM_PARTNER = "warm_partner"  # the other arm's warm-up may explain it: this one, cold+warm
    CAPPED = "capped"  # the time cap cut this arm's only run here: once more, on a fresh launch


class RerunWhy(BaseModel):
    """The reason for one rerun; fields a kind does not use stay None."""

    model_config = ConfigDict(extra="forbid")

    kind: WhyKind
    arm: str | None = None
    baseline: str | None = None
    change: float | None = Field(None, description="The cell's change when it was picked.")
    surprise: float | None = Field(None, description="The surprise threshold it exceeded.")
    cell: Comparison | None = Field(None, description="The undecided cell as it stood.")
    no_sigma: bool = False
    max_runs: int | None = None
    chance: float | None = Field(None, description="The futility rule's predicted chance.")
    target_df: int | None = None
    axis: str | None = None
    x: float | None = None
    bracket: tuple[float, float] | None = Field(
        None,
        description="Bisection: the bracket (x ascending) whose midpoint `x` is; capacity: "
        "the arm's bracket under the SLO (surely within, surely beyond) it halves.",
    )

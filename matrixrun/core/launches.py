"""The launch-stability finding as plain data (`analysis/launches.py` computes it; the verdict
carries it as `Verdict.launch_check`; the report's first lines word it). Kept apart from
`verdict.py` only for size: these records are part of verdict.json's format."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LaunchValue(_Model):
    """One launch's geometric mean at a point (metric units) and the runs behind it."""

    instance: str
    value: float
    n: int


class LaunchSpread(_Model):
    """Launches of one configuration at one point that disagree beyond what the run noise
    there explains (`analysis/launches.py`): the one-way test of the launch means against the
    within-launch noise, Bonferroni over every (group, point) tested, and a spread larger than
    the margin. What limits the comparison there is the engine's launch-to-launch stability,
    not the flag."""

    slice: str
    arm: str
    group: str
    point_id: str
    point: dict[str, Any]
    x: float | None
    metric: str
    launches: list[LaunchValue] = Field(description="In launch order.")
    spread: float = Field(description="Largest launch mean / smallest − 1.")
    f: float
    df_between: int
    df_within: int
    p: float = Field(description="Bonferroni-adjusted p (capped at 1).")
    run_sigma: float = Field(description="The σ the launches were set against, log scale.")
    against: Literal["repeats", "other_launches"] = Field(
        "repeats",
        description="repeats: within-launch repeats (pure error); other_launches: no cell ran "
        "twice on one launch, so the other configurations' launch-to-launch spread.",
    )


class LaunchCheck(_Model):
    """The launch-stability test over the run: what was tested and what was found."""

    metric: str
    tested: int = Field(0, description="(group, point) pairs with at least two launches.")
    unstable: list[LaunchSpread] = Field(default_factory=list)
    untested_reason: Literal["one_launch", "no_repeats"] | None = Field(
        None, description="Why nothing was tested, when nothing was."
    )
    largest_spread: float | None = Field(
        None, description="Largest launch mean / smallest − 1 over the pairs tested."
    )

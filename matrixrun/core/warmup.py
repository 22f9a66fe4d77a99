"""The first-run warm-up evidence as the verdict records it: how an arm's warm-up bears on one
cell (`WarmupShift`), and the points whose warm runs the analysis set aside (`WarmAside`).
Split from `verdict` (the rest of the verdict's models), which re-exports both, to keep that
module within the size the team agreed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WarmupShift(_Model):
    """One arm's confirmed first-run warmup as it bears on one cell (`CellNote.WARMUP`)."""

    arm: str
    gap: float = Field(description="Mean log gain of later runs on a server over the first.")
    pairs: int
    cold: int = Field(description="The arm's runs here that were first on their server.")
    n: int


class WarmAside(_Model):
    """A point whose warm runs of one arm the analysis left out of the comparison and of the
    noise model: there the arm's later runs on a server beat its first by more than the margin
    and its warm-up is confirmed (`analysis.warm`)."""

    slice: str
    point_id: str
    arm: str
    x: float | None
    gap: float = Field(description="Mean log gain of the later runs here over the first.")
    pairs: int

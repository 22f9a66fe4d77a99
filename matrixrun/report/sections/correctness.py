"""The correctness gate: each candidate's greedy-output agreement with the baseline against the
floor, and whether it is suspect (its speed then does not count).
Template: `templates/sections/correctness.md.j2`."""

from __future__ import annotations

from matrixrun.core.verdict import (
    Verdict,
)
from matrixrun.report import fmt
from matrixrun.report.section import Section

# ------------------------------------------------------------------------------ words


SUSPECT_STATUS = "**suspect**: its speed does not count"


# ------------------------------------------------------------------------------ the section


def of(verdict: Verdict) -> list[list[str]]:
    """Table rows (arm, agreement, floor, status) for candidates with a recorded agreement."""
    s = verdict.settings
    out: dict[str, list[str]] = {}
    for sl in verdict.slices:
        for c in sl.candidates:
            if c.correctness is not None:
                out[c.candidate] = [
                    f"`{c.candidate}`",
                    fmt.share(c.correctness),
                    fmt.setting_percent(s.correctness_min),
                    SUSPECT_STATUS if c.suspect else "ok",
                ]
    return list(out.values())


SECTION = Section("correctness", 100, lambda inputs: of(inputs.verdict))

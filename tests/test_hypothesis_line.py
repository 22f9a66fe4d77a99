"""The headline's hypothesis line says what the primary metric's cells decided: a control
whose every decided cell came out the same (spec/lpm_random.yaml: lpm on random prompts) has
tested its claim, and the line must not say that no cell is decided."""

from __future__ import annotations

from matrixrun.core.verdict import OverallVerdict
from matrixrun.report.sections.headline import Advice, Direction, Recommendation, hypothesis


def _rec(advice: Advice) -> Recommendation:
    return Recommendation(
        slice="",
        series="",
        candidate="lpm",
        baseline="fcfs",
        advice=advice,
        overall=OverallVerdict.SAME if advice is Advice.EITHER else OverallVerdict.UNDECIDED,
        stretches=[],
        crossovers=[],
        undecided=[],
        direction=Direction(0, 0, 0, None, None, 0, 0),
        non_monotone=False,
        provisional=False,
        suspect=False,
        runs_needed=None,
        no_noise=False,
    )


def test_a_control_that_came_out_the_same_has_tested_its_claim() -> None:
    line = hypothesis("nothing to find", [_rec(Advice.EITHER)], "concurrency")
    assert "no cell is decided" not in line
    assert "`lpm` the same as `fcfs`" in line


def test_no_decided_cell_is_still_said() -> None:
    line = hypothesis("nothing to find", [_rec(Advice.UNDECIDED)], "concurrency")
    assert line.endswith("the data do not test it yet: no cell is decided.")

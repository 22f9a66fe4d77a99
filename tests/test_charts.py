"""The chart numbers alone (report.sections.charts, pure): plain decimals at every magnitude,
and the change axis's cut rule. What they look like drawn is tests/test_charts_render.py."""

from __future__ import annotations

import re

import pytest

from matrixrun.report.sections.charts import SPAN_MARGINS, change_axis, mermaid_number

#: xychart's number token (mermaid 11.17's grammar, xychartDiagram's lexer rules)
XYCHART_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10_070.4, "10070"),
        (-49.1312, "-49.13"),
        (1.234e-7, "0.0000001234"),
        (3_100_000.0, "3100000"),
        (1e21, "1000000000000000000000"),
        (-0.0, "0"),
        (0.5, "0.5"),
        (3.0, "3"),
    ],
)
def test_numbers_are_plain_decimals_xychart_parses(value: float, text: str) -> None:
    assert mermaid_number(value) == text
    assert XYCHART_NUMBER.fullmatch(text)


def test_a_non_finite_number_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        mermaid_number(float("nan"))


def test_changes_within_the_span_are_not_cut() -> None:
    """glm5: −49.1% … +67.0% with a 3% margin spans 116 ≤ 120 points: nothing is cut."""
    ax = change_axis([-0.83, 67.03, 14.28, -26.64, -49.13], 3.0)
    assert not any(ax.cut(v) for v in (-49.13, 67.03))
    assert ax.lo < -49.13 and ax.hi > 67.03


def test_the_larger_side_is_cut_and_the_smaller_kept_whole() -> None:
    """H200: −20.5% and +1,598% with a 5% margin: the loss whole, gains cut at 200 − 20.5."""
    ax = change_axis([-20.54, 508.8, 807.8, 1598.4], 5.0)
    assert ax.cut_lo == -20.54 and ax.cut_hi == pytest.approx(SPAN_MARGINS * 5 - 20.54)
    assert [ax.cut(v) for v in (-20.54, 508.8)] == [False, True]
    assert ax.clip(1598.4) == ax.cut_hi


def test_both_sides_large_share_the_span_and_the_band_stays_visible() -> None:
    ax = change_axis([-95.0, 900.0], 2.0)
    assert ax.cut_lo == -SPAN_MARGINS and ax.cut_hi == SPAN_MARGINS
    assert (2 * 2.0) / (ax.hi - ax.lo) >= 0.04


def test_changes_inside_the_margin_still_show_the_margin() -> None:
    ax = change_axis([0.4, -0.25, 1.0], 3.0)
    assert ax.lo < -3.0 and ax.hi > 3.0

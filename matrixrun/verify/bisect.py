"""Bisection of crossover brackets: where the policy adds a cell, and how the cell joins the
plan (docs/verdicts.md, "Crossover"). Pure: decisions from the plan and the measurements.

A crossover is bracketed by two adjacent confident cells of opposite sign; the interpolated
point between them (and its bootstrap interval) is only as good as the straight line in log x
it assumes. Measuring the bracket's geometric midpoint is the one check of that line, and
when the midpoint comes out confident the bracket halves in log x. So, with `verify.bisect`
> 0, the policy asks for a new cell at the midpoint for the baseline and the crossing
candidate, on the same server groups as the bracket's cells (a new cell of an existing
group: no new launch configuration), at most `bisect` midpoints between two adjacent grid
points of a series. Added cells are then cells like any other: the analysis judges them, the
inconclusive and crossover rules may rerun them, the report shows them with a note.

Once one arm of a midpoint is being measured, every arm of it is wanted until measured (the
"completion" rule) even if the bracket moved meanwhile: a midpoint with only one arm measured
compares nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from matrixrun.core.measurement import Measurement, wall_seconds
from matrixrun.core.rerun_reason import RerunWhy, WhyKind
from matrixrun.core.verdict import Comparison
from matrixrun.plan import (
    Cell,
    Plan,
    added_cell,
    grid_bracket,
    grid_of,
    numeric_x,
    series_of,
)
from matrixrun.spec import CLIENT_AXES, Spec

#: Axes whose values are counts (a midpoint is rounded to an integer); request_rate is not.
INTEGER_AXES = frozenset({"concurrency", "input_len", "output_len"})


def midpoint(lo: Any, hi: Any, *, integer: bool) -> int | float | None:
    """The geometric midpoint √(lo·hi) of a bracket: the middle in log x, where the
    interpolation lives. Rounded to an integer on count axes, to 3 significant digits
    otherwise (a value a person would type). None when the axis value is not a finite
    positive number, or when the rounded midpoint equals (or passes) an end: nothing left
    to bisect."""
    a, b = numeric_x(lo), numeric_x(hi)
    if a is None or b is None or a <= 0 or b <= 0 or a == b:
        return None
    a, b = min(a, b), max(a, b)
    mid = math.sqrt(a * b)
    value: int | float = round(mid) if integer else float(f"{mid:.3g}")
    if not a < value < b:
        return None
    return value


@dataclass(frozen=True)
class Proposal:
    """A cell bisection wants measured: its group, the bracket it halves, and what one run
    of it will cost (its bracket ends' longest run of the same arm, in seconds; None when
    nothing timed is known)."""

    group_id: str
    cell: Cell
    bracket: tuple[float, float]
    cost: float | None
    axis: str

    @property
    def why(self) -> RerunWhy:
        x = numeric_x(self.cell.x)
        kind = WhyKind.CAPACITY if self.cell.added_by == "capacity" else WhyKind.BISECTION
        return RerunWhy(kind=kind, arm=self.cell.arm, axis=self.axis, x=x, bracket=self.bracket)


def seconds(ms: Sequence[Measurement], cell_ids: set[str]) -> float | None:
    """What one run of a new cell will cost: the longest run of the cells around it (its
    bracket's ends, same arm), the budget's best guess before it has a run of its own."""
    times = [wall_seconds(m) for m in ms if m.cell_id in cell_ids]
    return max(times) if times else None


def _compared_inside(
    cells: Sequence[Cell],
    like: Cell,
    axis: str,
    bracket: tuple[float, float],
    arms: tuple[str, str],
) -> bool:
    """Whether `like`'s series has a point strictly inside `bracket` with a cell of both
    arms (a point that compares them). A capacity midpoint measured for one arm only
    compares nothing, so it does not stop the crossover's own bisection."""
    key = series_of(like, axis)
    xs = [
        {numeric_x(c.x) for c in cells if series_of(c, axis) == key and c.arm == arm}
        for arm in arms
    ]
    return any(x is not None and bracket[0] < x < bracket[1] for x in xs[0] & xs[1])


def room(
    cells: Sequence[Cell],
    like: Cell,
    axis: str,
    bracket: tuple[float, float],
    mid: float,
    limit: int,
    pending: Sequence[Cell] = (),
) -> bool:
    """Whether `mid`, the midpoint of `bracket` on `like`'s series, may be added: the grid
    points enclosing the bracket hold fewer than `limit` added values between them (cells
    in the plan or `pending`, of any arm and either rule), or `mid` is one of those values
    already (another arm's cell at a point that is there anyway). So `verify.bisect` bounds
    the new values per grid interval, whichever rule asks, and the plan's worst case holds."""
    key = series_of(like, axis)
    grid = grid_of(list(cells), like, axis)
    lo = max((g for g in grid if g <= bracket[0]), default=None)
    hi = min((g for g in grid if g >= bracket[1]), default=None)
    if lo is None or hi is None:
        return False
    added = [c for c in cells if c.added_by is not None] + list(pending)
    xs = {numeric_x(c.x) for c in added if series_of(c, axis) == key}
    inside = {x for x in xs if x is not None and lo < x < hi}
    return mid in inside or len(inside) < limit


def choose(
    spec: Spec,
    plan: Plan,
    brackets: Sequence[tuple[str, str, Sequence[Comparison]]],
    ms: Sequence[Measurement],
) -> list[Proposal]:
    """What bisection wants now: every added cell not yet measured (completion), then for
    each crossover bracket (slice, candidate, [a, b] ascending) its midpoint's cells for
    the baseline and the candidate, unless bisection is off, the axis is a server axis (a
    new value would be a new launch configuration) or not numeric, the midpoint is already
    a grid point of the series, or the series already holds `verify.bisect` midpoints
    between the bracket's grid neighbours."""
    limit, axis = spec.verify.bisect, plan.axis
    if limit <= 0 or axis not in CLIENT_AXES:
        return []
    cells = plan.cells()
    measured = {m.cell_id for m in ms}
    group_of = {c.cell_id: g.group_id for g in plan.groups for c in g.cells}
    by_point_arm = {(c.slice, c.point_id, c.arm): c for c in cells}
    out: dict[str, Proposal] = {}
    for c in cells:
        around = grid_bracket(cells, c, axis) if c.added_by is not None else None
        if around is not None and c.cell_id not in measured:
            out[c.cell_id] = Proposal(group_of[c.cell_id], c, around, None, axis)
    for slice_name, candidate, (a, b) in brackets:
        mid = midpoint(a.x, b.x, integer=axis in INTEGER_AXES)
        ends = {
            arm: [by_point_arm.get((slice_name, r.point_id, arm)) for r in (a, b)]
            for arm in (plan.baseline, candidate)
        }
        like = ends[plan.baseline][0]
        if mid is None or like is None or any(e is None for es in ends.values() for e in es):
            continue
        bracket = (float(a.x or 0.0), float(b.x or 0.0))
        if _compared_inside(cells, like, axis, bracket, (plan.baseline, candidate)):
            continue  # undecided points inside: their reruns narrow it, not a new point
        if not room(cells, like, axis, bracket, mid, limit, [p.cell for p in out.values()]):
            continue
        for lo_end, hi_end in ends.values():
            assert lo_end is not None and hi_end is not None
            group = plan.group(group_of[lo_end.cell_id])
            cell = added_cell(spec, group, lo_end, mid)
            if cell.cell_id in measured or cell.cell_id in out:
                continue
            cost = seconds(ms, {lo_end.cell_id, hi_end.cell_id})
            out[cell.cell_id] = Proposal(group.group_id, cell, bracket, cost, axis)
    return list(out.values())

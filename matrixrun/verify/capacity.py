"""Narrowing each arm's capacity bracket under the SLO, the way a crossover's is narrowed
(docs/verdicts.md, "Capacity under an SLO"). Pure: decisions from the plan, the spec's SLO
and the measurements so far.

A capacity lies between the highest load at which an arm surely holds every bound and the
lowest at which it surely misses one (`analysis.capacity`); on a grid a factor 4 apart that
bracket is a factor 4 wide, and the capacity verdict between arms can only be as sharp as
their brackets. Two rules narrow it, each the crossover's counterpart:

* a load *inside* the bracket is within noise of a bound (its interval straddles it: a p99
  near its limit is neither a pass nor a fail): more runs of that arm there, up to
  `max_runs`, shrink its interval until it falls on one side — as an undecided cell inside
  a crossover bracket is narrowed by its own reruns, not by a new point. One that stays
  unclear at max_runs is where the capacity is, to within the noise;
* a bracket whose ends are clear and adjacent gets its geometric midpoint as a new cell of
  that arm only (the verdict compares the arms' brackets, not the arms at one load, so the
  other arm's run there would buy nothing for it), on the arm's own server group, within
  the limit `verify.bisect` sets on new values between two grid points (`bisect.room`, one
  limit for both kinds of midpoint). It is measured as a crossover midpoint is (reason
  `bisection`, twice on its launch, adopted into plan.json before its first run), marked
  `added_by: capacity`; when it comes out clear the bracket halves in log load. Once the
  loads inside have had all their runs and are still within noise, the gaps on either side
  of them are bisected the same way (`gaps`): the capacity is at those loads, to within the
  noise, and what the sure bracket can still lose is the grid's spacing around them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from matrixrun.analysis.capacity import capacity
from matrixrun.core.capacity import LOAD_AXES, ArmCapacity, Bound
from matrixrun.core.keeping import counted_runs
from matrixrun.core.measurement import Measurement
from matrixrun.core.rerun_reason import RerunWhy, WhyKind
from matrixrun.core.verdict import AnalysisSettings
from matrixrun.plan import Cell, Plan, added_cell, json_point, numeric_x, series_key
from matrixrun.spec import CLIENT_AXES, Spec
from matrixrun.verify.bisect import INTEGER_AXES, Proposal, midpoint, room, seconds

#: A rerun the capacity rule wants of a grid or added cell: the cell and why.
Near = tuple[Cell, RerunWhy]


def _arm_cells(cells: Sequence[Cell], cap: ArmCapacity, axis: str) -> dict[float, Cell]:
    """The cells of `cap`'s arm along its series, by load (points compared as JSON holds
    them: the capacity's series come from the runs, which may have been read from a file)."""
    key = series_key(json_point(dict(cap.series)), axis)
    return {
        x: c
        for c in cells
        if c.arm == cap.arm
        and c.slice == cap.slice
        and series_key(json_point(c.point), axis) == key
        and (x := numeric_x(c.x)) is not None
    }


def gaps(arm: ArmCapacity, loads: Sequence[float], stuck: bool) -> list[tuple[float, float]]:
    """The brackets to bisect for one arm, `loads` the loads it has a successful run at:
    (lo, hi) when none lies inside; when every load inside is within noise and has had all
    its runs (`stuck`), the gaps on either side of them — the capacity is there, to within
    the noise, and those gaps are what is left to narrow; otherwise none (the loads inside
    get their runs first)."""
    inside = [x for x in sorted(loads) if _inside(x, arm)]
    if not inside:
        return [(arm.lo, arm.hi)] if arm.lo is not None and arm.hi is not None else []
    if not stuck:
        return []
    return ([(arm.lo, inside[0])] if arm.lo is not None else []) + (
        [(inside[-1], arm.hi)] if arm.hi is not None else []
    )


def _inside(x: float, arm: ArmCapacity) -> bool:
    return (arm.lo is None or x > arm.lo) and (arm.hi is None or x < arm.hi)


def choose(
    spec: Spec,
    plan: Plan,
    settings: AnalysisSettings,
    ms: Sequence[Measurement],
    pending: Sequence[Proposal] = (),
    aside: Collection[tuple[str, int]] = (),
) -> tuple[list[Proposal], list[Near]]:
    """What the capacity rule wants now: (new midpoint cells, reruns of loads within
    noise), per arm and series, as the module docstring says. Nothing when the spec has no
    SLO, bisection is off, or the sweep's axis is not a load on the client side. `pending`:
    the crossover's proposals of this round (a cell one already names is not proposed
    again, and they count toward the limit). A load has had all its runs when it has
    `max_runs` counted as the policy counts them (`core.keeping.counted_runs`: not a run
    that fell behind, nor a warm run the analysis set aside, `aside`)."""
    limit, axis = spec.verify.bisect, plan.axis
    if limit <= 0 or not spec.slo or axis not in LOAD_AXES or axis not in CLIENT_AXES:
        return [], []
    bounds = [Bound(metric=b.metric, max=b.max, min=b.min) for b in spec.slo]
    cap = capacity(ms, settings, bounds)
    if cap is None:
        return [], []
    cells = plan.cells()
    group_of = {c.cell_id: g.group_id for g in plan.groups for c in g.cells}
    runs = Counter(m.cell_id for m in ms)
    good = {m.cell_id for m in ms if m.ok}
    named = {p.cell.cell_id for p in pending}
    out: list[Proposal] = []
    near: list[Near] = []
    for arm in cap.arms:
        if arm.missing:
            continue
        at = _arm_cells(cells, arm, axis)
        ends = (arm.lo, arm.hi) if arm.lo is not None and arm.hi is not None else None
        for x in arm.unclear:
            if x in at:
                why = RerunWhy(
                    kind=WhyKind.CAPACITY_NEAR, arm=arm.arm, axis=axis, x=x, bracket=ends
                )
                near.append((at[x], why))
        stuck = all(
            counted_runs(at[x].cell_id, ms, settings.primary, aside) >= spec.verify.max_runs
            for x in arm.unclear
            if x in at
        )
        loads = [x for x, c in at.items() if c.cell_id in good]
        for a, b in gaps(arm, loads, stuck):
            mid = midpoint(a, b, integer=axis in INTEGER_AXES)
            if mid is None or a not in at or b not in at:
                continue
            taken = [p.cell for p in [*pending, *out]]
            if not room(cells, at[a], axis, (a, b), mid, limit, taken):
                continue
            group = plan.group(group_of[at[a].cell_id])
            cell = added_cell(spec, group, at[a], mid, by="capacity")
            if cell.cell_id in runs or cell.cell_id in named:
                continue
            cost = seconds(ms, {at[a].cell_id, at[b].cell_id})
            out.append(Proposal(group.group_id, cell, (a, b), cost, axis))
    return out, near

"""Within the SLO. With a load axis (concurrency or request rate) and verdict.json's
`capacity` (`analysis/capacity.py`): each arm's capacity — the highest load at which every
bound holds, bracketed between measured loads — with the throughput and goodput there, and
the arms' capacities compared (`capacity_lines`; the first of them open the document:
`templates/sections/slo_head.md.j2`, included by the headline). Otherwise (another axis, or
an older verdict.json) the earlier view: the best primary value at a point where the arm's
means meet every bound (`slo_best`, `slo_row`). Template: `templates/sections/slo.md.j2`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from matrixrun.core.capacity import ArmCapacity, Capacity, CapacityComparison, CapacityOutcome
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import unit
from matrixrun.core.verdict import (
    Verdict,
)
from matrixrun.plan import Cell, Plan, json_point, numeric_x, series_key
from matrixrun.report import fmt
from matrixrun.report.inputs import RunInputs
from matrixrun.report.section import Section
from matrixrun.report.sections.comparison import capacity_cells
from matrixrun.report.series import cells_by_point, primary_result, series_label, varying_keys
from matrixrun.rundir.settings import RunSettings, SloBound


@dataclass(frozen=True)
class SloBest:
    """One arm's best primary value among the points where it meets every SLO bound."""

    arm: str
    slice: str
    series: str
    x: float | None
    value: float | None  # None: no point meets the SLO
    points_meeting: int
    points: int
    missing: list[str]  # SLO metrics the run did not measure


def meets(value: float | None, bound: SloBound) -> bool:
    if value is None:
        return False
    if bound.max is not None and value > bound.max:
        return False
    return not (bound.min is not None and value < bound.min)


def slo_best(verdict: Verdict, slo: Sequence[SloBound]) -> list[SloBest]:
    """The goodput view: for each arm (baseline once per slice, then each candidate) and
    series, the best primary mean at a point where the arm's means meet every bound. An
    arm mean is a geometric mean over its runs, so a point 'meets' on the average run."""
    if not slo:
        return []
    primary = verdict.settings.primary
    better_high = True
    out: list[SloBest] = []
    for sl in verdict.slices:
        done_baseline: set[str] = set()
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, primary)
            if mr is None:
                continue
            better_high = mr.higher_is_better
            by_metric = {m.metric: cells_by_point(m) for m in cand.metrics}
            missing = [b.metric for b in slo if b.metric not in by_metric]
            varying = varying_keys(mr.series)
            for series in mr.series:
                label = series_label(series, varying)
                roles = [("candidate", cand.candidate)]
                if label not in done_baseline:
                    roles.insert(0, ("baseline", verdict.settings.baseline))
                    done_baseline.add(label)
                for role, arm in roles:
                    best: tuple[float, float | None] | None = None
                    meeting = 0
                    for c in series.cells:
                        sample = c.baseline if role == "baseline" else c.candidate
                        ok = not missing and all(
                            meets(
                                getattr(by_metric[b.metric].get(c.point_id), role).mean
                                if c.point_id in by_metric[b.metric]
                                else None,
                                b,
                            )
                            for b in slo
                        )
                        if not ok or sample.mean is None:
                            continue
                        meeting += 1
                        v = sample.mean
                        if best is None or (v > best[0] if better_high else v < best[0]):
                            best = (v, c.x)
                    out.append(
                        SloBest(
                            arm=arm,
                            slice=sl.slice,
                            series=label,
                            x=best[1] if best else None,
                            value=best[0] if best else None,
                            points_meeting=meeting,
                            points=len(series.cells),
                            missing=missing,
                        )
                    )
    return out


# ------------------------------------------------------------------------------ words


def slo_bounds(bounds: Sequence[SloBound]) -> str:
    parts = []
    for b in bounds:
        u = unit(b.metric)
        if b.max is not None:
            parts.append(f"`{b.metric}` ≤ {fmt.value(b.max)} {u}".rstrip())
        if b.min is not None:
            parts.append(f"`{b.metric}` ≥ {fmt.value(b.min)} {u}".rstrip())
    return " and ".join(parts)


def slo_row(b: SloBest, axis: str, primary: str) -> list[str]:
    """A row of the SLO table: arm, series, best value, where, points meeting."""
    if b.missing:
        best = f"not judged: {', '.join(b.missing)} not measured"
        where = "—"
    elif b.value is None:
        best = "no point meets it"
        where = "—"
    else:
        best = f"{fmt.value(b.value)} {unit(primary)}".rstrip()
        where = f"{axis} {fmt.x(b.x)}" if b.x is not None else "the only point"
    return [
        f"`{b.arm}`",
        *([b.series] if b.series else []),
        best,
        where,
        f"{b.points_meeting} of {b.points}",
    ]


def _varying(cap: Capacity) -> set[str]:
    """The series keys whose values differ between the capacity's series (the rest say
    nothing), plus the slice when there are several."""
    keys = {k for a in cap.arms for k in a.series}
    out = {k for k in keys if len({repr(a.series.get(k)) for a in cap.arms}) > 1}
    if len({a.slice for a in cap.arms}) > 1:
        out.add("")
    return out


def _series_label(slice_name: str, series: dict[str, object], varying: set[str]) -> str:
    parts = ([slice_name] if "" in varying and slice_name else []) + [
        f"{k} {fmt.x(v)}" for k, v in sorted(series.items()) if k in varying
    ]
    return f" ({', '.join(parts)})" if parts else ""


def _times(r: float) -> str:
    return f"{fmt.approx(r)}×"


def arm_words(c: ArmCapacity, axis: str, varying: set[str] | None = None) -> str:
    """An arm's capacity: where, how sure, and what it serves there."""
    head = f"`{c.arm}`{_series_label(c.slice, c.series, varying or set())}: "
    if c.missing:
        return head + f"not judged ({fmt.join_words(c.missing)} not measured)"
    if not c.points:
        return head + "not judged (no load measured without failing)"
    if c.last_meeting is None:
        limit = fmt.join_words([f"`{m}`" for m in c.limiting])
        return head + f"below the lowest {axis} measured ({fmt.x(c.first_missing)} misses {limit})"
    if c.first_missing is None:
        where = f"{axis} at least {fmt.x(c.last_meeting)} (every {axis} measured holds)"
    else:
        est = f"about {fmt.approx(c.estimate)}, " if c.estimate is not None else ""
        where = f"{axis} {est}between {fmt.x(c.last_meeting)} and {fmt.x(c.first_missing)}"
        where += f" (`{'`, `'.join(c.limiting)}` binds)"
    return head + where + _sure(c) + _served(c)


def _sure(c: ArmCapacity) -> str:
    """The bracket beyond the runs' spread, where it is wider than the means'."""
    if (c.lo, c.hi) == (c.last_meeting, c.first_missing):
        return ""
    held = f"holds surely up to {fmt.x(c.lo)}" if c.lo is not None else "holds surely nowhere"
    missed = f"misses surely from {fmt.x(c.hi)}" if c.hi is not None else "misses surely nowhere"
    near = fmt.join_words([fmt.x(x) for x in c.unclear])
    near = f" (at {near} within noise of a bound)" if c.unclear else ""
    return f"; beyond the runs' spread it {held} and {missed}{near}"


def _served(c: ArmCapacity) -> str:
    if c.request_throughput is None:
        return ""
    out = f"; at {fmt.x(c.last_meeting)}: {fmt.value(c.request_throughput)} req/s"
    if c.output_throughput is not None:
        out += f", {fmt.value(c.output_throughput)} tok/s"
    if c.goodput is not None and c.good_share is not None:
        out += f", goodput {fmt.value(c.goodput)} req/s ({fmt.share(c.good_share)} within)"
    return out


def _bracket(c: CapacityComparison) -> str:
    lo = _times(c.ratio_lo) if c.ratio_lo else None
    hi = _times(c.ratio_hi) if c.ratio_hi else None
    if lo and hi:
        return f"between {lo} and {hi} by the sweep's brackets"
    if lo:
        return f"at least {lo} by the sweep's brackets"
    if hi:
        return f"at most {hi} by the sweep's brackets"
    return "the brackets are open"


def comparison_words(c: CapacityComparison, axis: str, varying: set[str] | None = None) -> str:
    """The capacity verdict of one candidate, with its interval."""
    where = _series_label(c.slice, c.series, varying or set())
    cand, base = f"`{c.candidate}`", f"`{c.baseline}`"
    if c.outcome is CapacityOutcome.NOT_JUDGED:
        return f"Capacity{where}: {cand} against {base} not judged (see the table)."
    if c.outcome is CapacityOutcome.UNDECIDED:
        ratio = f" (about {_times(c.ratio)}; {_bracket(c)})" if c.ratio else f" ({_bracket(c)})"
        return (
            f"Capacity{where}: the sweep cannot tell {cand}'s from {base}'s{ratio}; a "
            f"{axis} between the brackets' ends would."
        )
    word = "more" if c.outcome is CapacityOutcome.HIGHER else "less"
    if c.ratio:
        return (
            f"**{cand} sustains {_times(c.ratio)} the {axis} of {base} within the SLO**{where} "
            f"({_bracket(c)})."
        )
    return f"**{cand} sustains {word} {axis} than {base} within the SLO**{where} ({_bracket(c)})."


def capacity_lines(cap: Capacity) -> list[str]:
    """The capacity verdicts, then each arm's capacity: what the document opens with."""
    varying = _varying(cap)
    return [comparison_words(c, cap.axis, varying) for c in cap.comparisons] + [
        arm_words(a, cap.axis, varying) for a in cap.arms
    ]


@dataclass(frozen=True)
class AddedLoad:
    """A load off the grid the verify policy measured one arm at, to narrow its capacity
    bracket (`verify.capacity`), and what it showed there."""

    arm: str
    x: float
    #: The bracket it halved (surely within, surely beyond), from its verify event.
    bracket: tuple[float, float] | None
    #: "within", "beyond", "unclear" (within noise of a bound) or "failed" (no good run).
    showed: str


def _showed(x: float, arm: ArmCapacity, ok: bool) -> str:
    if not ok:
        return "failed"
    if arm.hi is not None and x >= arm.hi:
        return "beyond"
    return "unclear" if x in arm.unclear else "within"


def _halved(events: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per capacity midpoint cell, the bracket its verify event says it halved."""
    out: dict[str, tuple[float, float]] = {}
    for e in events:
        why = e.get("why")
        if not isinstance(why, dict) or e.get("event") != "verify":
            continue  # an older run's `why` may be a sentence
        if why.get("kind") == "capacity" and why.get("bracket"):
            out.setdefault(str(e.get("cell")), (why["bracket"][0], why["bracket"][1]))
    return out


def added_loads(
    cap: Capacity,
    plan: Plan | None,
    measurements: Sequence[Measurement],
    events: Sequence[Mapping[str, Any]] = (),
) -> list[AddedLoad]:
    """The capacity midpoints of the run — plan.json's `added_by: capacity` cells, and any
    cell a verify event says the capacity rule added (a Slurm node's, before the plan has
    it) — per arm capacity in its order, by load."""
    cells = {c.cell_id: c for c in plan.cells()} if plan is not None else {}
    ids = {cid for cid, c in cells.items() if c.added_by == "capacity"} | capacity_cells(events)
    halved = _halved(events)
    out: list[AddedLoad] = []
    for a in cap.arms:
        key = (a.slice, series_key(json_point(dict(a.series)), cap.axis))
        found = []
        for cid in ids:
            runs = [m for m in measurements if m.cell_id == cid]
            where: Cell | Measurement | None = cells.get(cid) or (runs[0] if runs else None)
            if where is None or where.arm != a.arm:
                continue
            x = numeric_x(where.point.get(cap.axis))
            if x is None or (where.slice, series_key(json_point(where.point), cap.axis)) != key:
                continue
            found.append(
                AddedLoad(a.arm, x, halved.get(cid), _showed(x, a, any(m.ok for m in runs)))
            )
        out += sorted(found, key=lambda f: f.x)
    return out


#: What an added load showed, in words.
SHOWED = {
    "within": "within the SLO there",
    "beyond": "beyond it there",
    "unclear": "within noise of a bound there",
    "failed": "no successful run there",
}


def added_words(loads: Sequence[AddedLoad], axis: str) -> str:
    """The capacity midpoints, under the capacities: where, which bracket, what they showed."""
    if not loads:
        return ""
    parts = []
    for load in loads:
        b = load.bracket
        halved = f" (the geometric midpoint of {fmt.x(b[0])}–{fmt.x(b[1])})" if b else ""
        parts.append(f"`{load.arm}` at {axis} {fmt.x(load.x)}{halved}: {SHOWED[load.showed]}")
    one = len(loads) == 1
    return (
        f"Added for capacity (not in the spec's grid, measured by the verify policy to narrow "
        f"{'a bracket' if one else 'the brackets'} above, as it bisects a crossover): "
        + "; ".join(parts)
        + "."
    )


def capacity_note(cap: Capacity) -> str:
    """How the capacities were judged, and what goodput counts."""
    if cap.spread:
        sigmas = ", ".join(f"`{m}` {fmt.percent(v)}" for m, v in cap.spread.items())
        judged = (
            "A load holds when the arm's mean there meets every bound; the bracket counts a "
            f"load as within or beyond only past the {fmt.confidence(cap.level)} interval of "
            f"that mean, from the run-to-run spread pooled over repeated cells ({sigmas}); a "
            "load whose interval straddles a bound is neither: the verify policy runs it again, "
            "and bisects between a load surely within and the next surely beyond (or, once a "
            "load within noise has had all its runs, the gaps beside it)."
        )
    else:
        judged = (
            "A load holds when the arm's mean there meets every bound; no cell was measured "
            "twice, so no run-to-run spread widens the bracket: it rests on one run per load."
        )
    if not cap.goodput_from_records:
        good = "Goodput is not known: the run kept no per-request records."
    elif cap.per_request:
        good = (
            "Goodput counts the requests that met "
            f"{fmt.join_words([f'`{m}`' for m in cap.per_request])} on their own (vLLM's "
            "definition)."
        )
    else:
        good = "No bound applies to one request, so goodput counts every completed request."
    return f"{judged} {good}"


# ------------------------------------------------------------------------------ the section


@dataclass
class SloView:
    bounds: str
    header: list[str]
    rows: list[list[str]]
    #: With a capacity: its verdicts then each arm's (the headline opens with them).
    capacity: list[str] = field(default_factory=list)
    note: str = ""
    #: The loads the verify policy added to narrow the brackets (`added_words`).
    added: str = ""


def of(verdict: Verdict, settings: RunSettings, added: Sequence[AddedLoad] = ()) -> SloView | None:
    facts = settings.spec
    if facts is None or not facts.slo:
        return None
    if verdict.capacity is not None:
        return SloView(
            bounds=slo_bounds(facts.slo),
            header=[],
            rows=[],
            capacity=capacity_lines(verdict.capacity),
            note=capacity_note(verdict.capacity),
            added=added_words(added, verdict.capacity.axis),
        )
    best = slo_best(verdict, facts.slo)
    with_series = any(b.series for b in best)
    s = verdict.settings
    return SloView(
        bounds=slo_bounds(facts.slo),
        header=[
            "arm",
            *(["series"] if with_series else []),
            f"best `{s.primary}` within the SLO",
            "at",
            "points meeting it",
        ],
        rows=[slo_row(b, s.axis, s.primary) for b in best],
    )


def of_inputs(inputs: RunInputs) -> SloView | None:
    """The section from a run directory's files: the verdict, and for the loads the verify
    policy added, plan.json, the runs and their verify events."""
    cap = inputs.verdict.capacity
    added = (
        added_loads(cap, inputs.plan, inputs.measurements, inputs.events) if cap is not None else []
    )
    return of(inputs.verdict, inputs.settings, added)


#: Capacity within the SLO, after the results table (its first line also opens the headline).
SECTION = Section("slo", 40, of_inputs)

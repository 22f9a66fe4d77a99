"""The main table: for the primary metric, one table per (slice, candidate, series) — the sweep
value, both arms' means, the change with its interval, the verdict and n — with the regimes
sentence under it, what would settle each undecided cell, and the points bisection added
(`metric_tables`, also used for the secondary metrics' tables); the metrics folded into
another, and the added points that compare nothing. Template:
`templates/sections/comparison.md.j2` (the table macros are `templates/_table.md.j2`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import higher_is_better, unit
from matrixrun.core.verdict import (
    ArmSample,
    Comparison,
    Verdict,
)
from matrixrun.plan import Plan
from matrixrun.report import fmt, wording
from matrixrun.report.given import given_of
from matrixrun.report.inputs import RunInputs
from matrixrun.report.section import Section, Trim
from matrixrun.report.series import folded_metrics, primary_result, varying_keys

#: The points the verify policy added to the grid: (slice, point id) → the rule that added
#: it ("bisection": a crossover bracket's midpoint, "capacity": an arm's capacity bracket's).
Added = Mapping[tuple[str, str], str]


def capacity_cells(events: Sequence[Mapping[str, Any]]) -> set[str]:
    """The cells whose runs the capacity rule asked for as new cells (their verify events;
    an older run's `why` may be a sentence, which names no rule)."""
    return {
        str(e.get("cell"))
        for e in events
        if e.get("event") == "verify"
        and isinstance(e.get("why"), dict)
        and e["why"].get("kind") == "capacity"
    }


def added_points(
    plan: Plan | None,
    measurements: Sequence[Measurement] = (),
    events: Sequence[Mapping[str, Any]] = (),
) -> dict[tuple[str, str], str]:
    """The points the verify policy added to the grid (`Added`): the plan.json record, and
    any point whose first run was a bisection's (what a Slurm node that measured one, without
    rewriting the shared plan.json, leaves; its rule then from the verify event that asked
    for it). A point both rules added reads as a crossover's: its row compares the arms."""
    found: dict[tuple[str, str], str] = {}

    def mark(key: tuple[str, str], kind: str) -> None:
        found[key] = "bisection" if "bisection" in (found.get(key), kind) else kind

    by_capacity = capacity_cells(events)
    for m in measurements:
        if m.attempt == 1 and m.reason == "bisection":
            mark((m.slice, m.point_id), "capacity" if m.cell_id in by_capacity else "bisection")
    for c in plan.cells() if plan is not None else []:
        if c.added_by is not None:
            mark((c.slice, c.point_id), c.added_by)
    return found


@dataclass
class HalfMeasured:
    """An added (bisection) point that has no row: some arm was never measured there."""

    slice: str
    x: str
    measured: list[str]
    missing: list[str]


def half_measured(
    plan: Plan | None,
    measurements: Sequence[Measurement],
    added: Added,
    baseline: str,
) -> list[HalfMeasured]:
    """Crossover midpoints where the baseline or a candidate has no successful run: the
    analysis compares nothing there, so the table has no row for them, and the report must
    say what was measured instead of leaving a midpoint the docs promise silently out. (A
    capacity midpoint is one arm's by design: "Within the SLO" says what it showed.)"""
    if plan is None:
        return []
    arms = [baseline, *plan.candidates]
    out = []
    for sl, pid in sorted(k for k, kind in added.items() if kind == "bisection"):
        ok = {m.arm for m in measurements if (m.slice, m.point_id) == (sl, pid) and m.ok}
        if ok and any(a not in ok for a in arms):
            cell = next((c for c in plan.cells() if (c.slice, c.point_id) == (sl, pid)), None)
            x = next((m.point for m in measurements if (m.slice, m.point_id) == (sl, pid)), {})
            shown = fmt.x(cell.x) if cell is not None else str(x.get(plan.axis, pid))
            out.append(
                HalfMeasured(
                    sl, shown, [a for a in arms if a in ok], [a for a in arms if a not in ok]
                )
            )
    return out


def slice_labels_of(
    plan: Plan | None, verdict: Verdict, given_by: Mapping[str, dict[str, str]]
) -> dict[str, str]:
    """Slice label → a heading: the plan's model, hardware and server axes when known, the
    axes spelled as the slice's server was given them (`given_flags`)."""
    labels = {s.slice: s.slice for s in verdict.slices}
    if plan is not None:
        for info in plan.slices:
            group = next((g for g in plan.groups if g.slice == info.label), None)
            given = given_by.get(group.group_id, {}) if group is not None else {}
            parts = [f"model `{info.model}`", f"hardware `{info.hardware}`"]
            parts += [
                f"`{given.get(k) or fmt.cli_flag(k) + ' ' + fmt.flag_value(v)}`"
                for k, v in info.server_axes.items()
            ]
            labels[info.label] = ", ".join(parts)
    return labels


# ------------------------------------------------------------------------------ words


#: Beside the sweep value of a point the verify policy added (a table row's note), by rule.
ADDED_NOTE = {"bisection": "added by bisection", "capacity": "added for capacity"}


def bisected_text(xs: Sequence[str], axis: str) -> str:
    """Under a table with points the spec did not ask for: why they are there."""
    one = len(xs) == 1
    return (
        f"{'The point' if one else 'The points'} at {axis} {fmt.join_words(list(xs))} "
        f"{'is' if one else 'are'} not in the spec's grid: the verify policy added "
        f"{'it' if one else 'them'} by bisection (the geometric midpoint of a crossover "
        "bracket, measured to narrow the bracket and to check the straight line in log "
        f"{axis} the crossover is interpolated on)."
    )


def capacity_added_text(xs: Sequence[str], axis: str) -> str:
    """Under a table with points added for capacity that compare the arms (each arm's
    capacity bracket held it): why they are there."""
    one = len(xs) == 1
    return (
        f"{'The point' if one else 'The points'} at {axis} {fmt.join_words(list(xs))} "
        f"{'is' if one else 'are'} not in the spec's grid: the verify policy added "
        f"{'it' if one else 'them'} to narrow the arms' capacity brackets under the SLO "
        '(each the geometric midpoint of an arm\'s bracket; see "Within the SLO").'
    )


def half_measured_text(x: str, axis: str, measured: Sequence[str], missing: Sequence[str]) -> str:
    """An added midpoint with no row: which arms were measured there and which not."""
    got = ", ".join(f"`{fmt.user_plain(a)}`" for a in measured)
    lack = ", ".join(f"`{fmt.user_plain(a)}`" for a in missing)
    return (
        f"{axis} {x} (added by bisection): only {got} was measured there — {lack} has no "
        "successful run of it (its run failed, or the run's last round ended first) — so the "
        "point has no row and compares nothing."
    )


def _sample_text(sample: ArmSample) -> str:
    if sample.n == 0:
        text = "failed" if sample.failed_measurements else "n/a"
    else:
        text = fmt.value(sample.mean)
    if sample.failed_requests:
        text += f" ({sample.failed_requests}/{sample.total_requests} req failed)"
    if sample.failed_measurements and sample.n:
        text += f" ({sample.failed_measurements} run(s) failed)"
    return text


def _fixed_label(fixed: Mapping[str, Any], varying: set[str]) -> str:
    return " · ".join(f"{k} {fmt.x(v)}" for k, v in sorted(fixed.items()) if k in varying)


def n_text(c: Comparison) -> str:
    """'2/2', or '2/2, candidate on 1 server' when an arm's repeats share one server."""
    text = f"{c.baseline.n}/{c.candidate.n}"
    notes = []
    for role, sample in (("baseline", c.baseline), ("candidate", c.candidate)):
        servers = len(set(sample.instances))
        if sample.n > 1 and servers < sample.n:
            notes.append(f"{role} on {servers} server{'s' if servers != 1 else ''}")
    return text + (", " + ", ".join(notes) if notes else "")


def verdict_short(c: Comparison) -> str:
    word = c.verdict.value
    if c.provisional and c.change_lo is not None:
        word += " (n=1)"
    return word


def folded(metric: str, into: str) -> str:
    return (
        f"`{metric}`: identical to `{into}` (within 0.1% in every arm at every point), "
        "not repeated."
    )


@dataclass
class Table:
    """One (slice, candidate, series) table of one metric, with the sentences under it."""

    slice: str
    slice_label: str
    candidate: str
    suspect: bool
    series_label: str
    metric: str
    header: list[str]
    rows: list[list[str]]
    regimes: str
    undecided: list[str]
    overall: str = ""  # the slice's verdict on the metric, under its last table only


@dataclass
class SliceTables:
    slice: str
    label: str
    tables: list[Table]


def metric_tables(
    verdict: Verdict,
    metric: str,
    slice_labels: Mapping[str, str],
    added: Added | None = None,
) -> list[Table]:
    """One table per (slice, candidate, series) for `metric`: the sweep value first, then
    baseline, candidate, change (candidate / baseline − 1) and the benchstat-style verdict.
    A point in `added` (the verify policy's, `added_points`) says so and by which rule
    beside its sweep value, and a sentence under the table says why it is there."""
    added = added or {}
    settings = verdict.settings
    axis = settings.axis
    out: list[Table] = []
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, metric)
            if mr is None:
                continue
            varying = varying_keys(mr.series)
            u = f" ({mr.unit})" if mr.unit else ""
            for index, series in enumerate(mr.series):
                rows = []
                undecided: dict[str, list[str]] = {}  # what would settle it -> sweep values
                bisected: dict[str, list[str]] = {}  # rule -> sweep values
                for c in series.cells:
                    if c.x is not None:
                        x = fmt.x(c.x)
                    elif set(c.point) == {axis}:  # a value off the number line, e.g. rate inf
                        x = fmt.x(c.point[axis])
                    else:
                        x = _fixed_label(c.point, set(c.point))
                    shown = x
                    kind = added.get((sl.slice, c.point_id))
                    if kind is not None:
                        bisected.setdefault(kind, []).append(x)
                        shown += f" ({ADDED_NOTE.get(kind, kind)})"
                    change = "n/a" if c.change is None else fmt.change(c.change)
                    if c.change_lo is not None and c.change_hi is not None:
                        change += " " + fmt.change_interval(
                            c.change_lo, c.change_hi, c.df, decided=c.confident
                        )
                    cells = [shown, _sample_text(c.baseline), _sample_text(c.candidate), change]
                    lead = c.leading_note
                    word = verdict_short(c)
                    if lead is not None:
                        word += f" ({wording.cell_note(lead, c, short=True)})"
                    rows.append([*cells, word, n_text(c)])
                    if c.verdict == "undecided":
                        undecided.setdefault(wording.undecided(c), []).append(x)
                last = index == len(mr.series) - 1
                out.append(
                    Table(
                        slice=sl.slice,
                        slice_label=slice_labels.get(sl.slice, sl.slice),
                        candidate=cand.candidate,
                        suspect=cand.suspect,
                        series_label=_fixed_label(series.fixed, varying),
                        metric=metric,
                        header=[
                            axis,
                            f"`{settings.baseline}`{u}",
                            f"`{cand.candidate}`{u}",
                            "change [interval]",
                            "verdict",
                            "n (baseline/candidate)",
                        ],
                        rows=[[fmt.table_cell(v) for v in row] for row in rows],
                        regimes=wording.regimes(series, axis, settings.margin_for(mr.metric))
                        + _added_text(bisected, axis),
                        undecided=[
                            f"at {axis} {fmt.join_words(xs)}: {words}"
                            for words, xs in undecided.items()
                        ],
                        overall=wording.overall(mr.overall, settings) if last else "",
                    )
                )
    return out


def _added_text(by_rule: Mapping[str, Sequence[str]], axis: str) -> str:
    """The sentences under a table that has added points, one per rule that added some."""
    out = ""
    if by_rule.get("bisection"):
        out += " " + bisected_text(by_rule["bisection"], axis)
    if by_rule.get("capacity"):
        out += " " + capacity_added_text(by_rule["capacity"], axis)
    return out


def group_tables(
    tables: Sequence[Table], verdict: Verdict, slice_labels: Mapping[str, str]
) -> list[SliceTables]:
    """Tables grouped by slice (in the verdict's order), for one heading per slice."""
    out = []
    several = len(verdict.slices) > 1
    for sl in verdict.slices:
        mine = [t for t in tables if t.slice == sl.slice]
        if mine:
            label = slice_labels.get(sl.slice, sl.slice) if several else ""
            out.append(SliceTables(slice=sl.slice, label=label, tables=mine))
    return out


# ------------------------------------------------------------------------------ the section


@dataclass
class MetricHeading:
    """A metric as its heading names it: name, unit, which way is better."""

    metric: str
    unit: str
    better: str

    @classmethod
    def of(cls, metric: str) -> MetricHeading:
        return cls(metric, unit(metric), "higher" if higher_is_better(metric) else "lower")


def folded_lines(verdict: Verdict) -> list[str]:
    return [folded(m, into) for m, into in folded_metrics(verdict).items()]


def primary_tables(verdict: Verdict, labels: Mapping[str, str], added: Added) -> list[SliceTables]:
    """The primary metric's tables, grouped by slice; with one slice its verdict is not
    repeated under the table (the headline already says it)."""
    tables = metric_tables(verdict, verdict.settings.primary, labels, added)
    if len(verdict.slices) == 1:
        for t in tables:
            t.overall = ""
    return group_tables(tables, verdict, labels)


def unmatched_of(inputs: RunInputs, added: Added) -> list[str]:
    """The bisection midpoints some arm was never measured at, said under the table."""
    axis, baseline = inputs.verdict.settings.axis, inputs.verdict.settings.baseline
    return [
        half_measured_text(h.x, axis, h.measured, h.missing)
        for h in half_measured(inputs.plan, inputs.measurements, added, baseline)
    ]


def labels_of(inputs: RunInputs) -> dict[str, str]:
    """Each slice's heading (`slice_labels_of`), its server axes as the servers were given."""
    return slice_labels_of(inputs.plan, inputs.verdict, given_of(inputs))


def added_of(inputs: RunInputs) -> dict[tuple[str, str], str]:
    """The points the verify policy added (`added_points`), from the run directory's files."""
    return added_points(inputs.plan, inputs.measurements, inputs.events)


@dataclass
class MainTable:
    """The results section: the primary metric's heading and margin, its tables by slice
    (`slices`), the metrics folded into another (`folded`) and the added points some arm was
    never measured at (`unmatched`); the baseline and whether there are several candidates
    head each table (`_table.md.j2`)."""

    primary: MetricHeading
    baseline: str
    several_candidates: bool
    margin: str
    slices: list[SliceTables]
    folded: list[str]
    unmatched: list[str]


def of(inputs: RunInputs) -> MainTable:
    verdict, s = inputs.verdict, inputs.verdict.settings
    added = added_of(inputs)
    return MainTable(
        primary=MetricHeading.of(s.primary),
        baseline=s.baseline,
        several_candidates=len(verdict.overall) > 1,
        margin=fmt.margin(s.margin_for(s.primary)),
        slices=primary_tables(verdict, labels_of(inputs), added),
        folded=folded_lines(verdict),
        unmatched=unmatched_of(inputs, added),
    )


def drop_undecided(part: MainTable) -> str | None:
    """The size budget's: the per-cell notes on what would settle undecided cells."""
    dropped = False
    for sl in part.slices:
        for t in sl.tables:
            if t.undecided:
                t.undecided = []
                dropped = True
    return "the per-cell notes on what would settle undecided cells" if dropped else None


def drop_last_slice_rows(part: MainTable) -> str | None:
    """The size budget's last: the table rows of the last slices, one table at a time (the
    first slice's stay, and every table's regime sentence and verdict)."""
    for sl in reversed(part.slices[1:]):
        for t in sl.tables:
            if t.rows:
                t.rows = []
                return f"the comparison table rows of {sl.label or 'a slice'}"
    return None


SECTION = Section("comparison", 30, of, (Trim(30, drop_undecided), Trim(60, drop_last_slice_rows)))

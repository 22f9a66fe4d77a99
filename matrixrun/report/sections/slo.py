"""The goodput view: for each arm and series, the best primary value at a point where the arm's
means meet every bound of the spec's SLO (`slo_best`), as a table (`slo_row`).
Template: `templates/sections/slo.md.j2`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import (
    Verdict,
)
from matrixrun.report import fmt
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


# ------------------------------------------------------------------------------ the section


@dataclass
class SloView:
    bounds: str
    header: list[str]
    rows: list[list[str]]


def of(verdict: Verdict, settings: RunSettings) -> SloView | None:
    facts = settings.spec
    if facts is None or not facts.slo:
        return None
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

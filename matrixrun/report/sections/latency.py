"""The secondary metrics: one line per metric's verdict (metrics whose sentences differ only in
their name joined), then each metric's tables, collapsed (`comparison.metric_tables`); metrics
folded into another are left to the comparison's one line. Template:
`templates/sections/latency.md.j2`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from matrixrun.core.verdict import (
    Verdict,
)
from matrixrun.report import fmt, wording
from matrixrun.report.inputs import RunInputs
from matrixrun.report.section import Section, Trim
from matrixrun.report.sections.comparison import (
    Added,
    MetricHeading,
    SliceTables,
    added_of,
    group_tables,
    labels_of,
    metric_tables,
)
from matrixrun.report.series import folded_metrics


@dataclass
class LatencySummary:
    """A latency metric's verdict, kept when the size budget dropped its tables."""

    metric: str
    slice: str
    candidate: str
    sentence: str


@dataclass
class Latency(MetricHeading):
    slices: list[SliceTables]


def metric_sections(
    verdict: Verdict, labels: Mapping[str, str], added: Added | None = None
) -> list[Latency]:
    """Each secondary metric's tables (none for a folded metric)."""
    out = []
    folded = folded_metrics(verdict)
    for metric in verdict.settings.metrics[1:]:
        if metric in folded:  # said in one line instead (`folded_lines`)
            continue
        found = metric_tables(verdict, metric, labels, added)
        if found:
            h = MetricHeading.of(metric)
            out.append(Latency(h.metric, h.unit, h.better, group_tables(found, verdict, labels)))
    return out


def secondary_lines(verdict: Verdict) -> list[str]:
    """One line per secondary metric's verdict (per candidate and slice), metrics whose
    sentences differ only in their name joined into one line: three 'no noise estimate'
    sentences say one thing."""
    s = verdict.settings
    folded = folded_metrics(verdict)
    several = len(verdict.slices) > 1 or len(verdict.overall) > 1
    groups: dict[tuple[str, str, str], list[str]] = {}
    for sl in verdict.slices:
        for cand in sl.candidates:
            for mr in cand.metrics:
                if mr.primary or mr.metric in folded:
                    continue
                sentence = wording.overall(mr.overall, s)
                key = (sl.slice, cand.candidate, sentence.replace(mr.metric, "\0"))
                groups.setdefault(key, []).append(mr.metric)
    out = []
    for (slice_name, candidate, sentence), metrics in groups.items():
        names = fmt.join_words([f"`{m}`" for m in metrics])
        where = " · ".join(
            x for x in (slice_name, f"`{fmt.user_plain(candidate)}`" if several else "") if x
        )
        text = sentence.replace("\0", metrics[0] if len(metrics) == 1 else "each")
        out.append(f"{names}{f' ({where})' if where else ''}: {text}")
    return out


# ------------------------------------------------------------------------------ the section


@dataclass
class Secondary:
    """The secondary metrics' section: one line per verdict (`lines`), each metric's tables
    (`metrics`), and what the size budget kept of the tables it dropped (`summary`: while it
    has any, the section stays, its lines listing those verdicts). The baseline and whether
    there are several candidates head each table (`_table.md.j2`)."""

    lines: list[str]
    metrics: list[Latency]
    baseline: str
    several_candidates: bool
    summary: list[LatencySummary] = field(default_factory=list)


def of(inputs: RunInputs) -> Secondary:
    verdict = inputs.verdict
    return Secondary(
        lines=secondary_lines(verdict),
        metrics=metric_sections(verdict, labels_of(inputs), added_of(inputs)),
        baseline=verdict.settings.baseline,
        several_candidates=len(verdict.overall) > 1,
    )


def drop_tables(part: Secondary) -> str | None:
    """The size budget's: the last metric's tables (its verdicts stay, in `lines`)."""
    if not part.metrics:
        return None
    lat = part.metrics.pop()
    kept = [
        LatencySummary(metric=lat.metric, slice=t.slice, candidate=t.candidate, sentence=t.overall)
        for sl in lat.slices
        for t in sl.tables
        if t.overall
    ]
    part.summary = kept + part.summary
    return f"the `{lat.metric}` tables (their verdicts are listed)"


SECTION = Section("latency", 50, of, (Trim(20, drop_tables),))

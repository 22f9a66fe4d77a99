"""The size budget: the verdict document is posted as one GitHub comment (65,536 characters),
so when it would not fit, `report.render` drops detail one step at a time, least
decision-relevant first, and says at the end what it left out. Each step trims a copy of the
context (never the data) and returns the phrase for that closing note.

The steps are keyed by the section whose part they trim. A section built through the section
interface says how to trim its own part (`Section.trim`, `report.section`): `steps` puts the
named ones in the order below and any other section's trim after them, so a new section's
trimming is its own module's, with no edit here.
"""

from __future__ import annotations

from collections.abc import Callable

from matrixrun.report.context import Context
from matrixrun.report.section import Section
from matrixrun.report.sections.latency import LatencySummary

Step = Callable[[Context], str | None]

# Each step removes one piece of detail and returns a phrase for the closing note, or None when
# it has nothing left to remove. Order (least decision-relevant first): the per-instance
# server table (the environment section's own trim), the latency tables (their one-sentence
# verdicts stay), the per-cell "undecided" notes, the rerun log beyond its first 20 entries,
# then the comparison tables of the last slices (their regime sentence and verdict stay).


def _drop_latency(ctx: Context) -> str | None:
    if not ctx.latency:
        return None
    lat = ctx.latency.pop()
    summary = [
        LatencySummary(metric=lat.metric, slice=t.slice, candidate=t.candidate, sentence=t.overall)
        for sl in lat.slices
        for t in sl.tables
        if t.overall
    ]
    ctx.latency_summary = summary + ctx.latency_summary
    return f"the `{lat.metric}` tables (their verdicts are listed)"


def _drop_undecided(ctx: Context) -> str | None:
    dropped = False
    for section in [ctx.comparison] + [x.slices for x in ctx.latency]:
        for sl in section:
            for t in sl.tables:
                if t.undecided:
                    t.undecided = []
                    dropped = True
    return "the per-cell notes on what would settle undecided cells" if dropped else None


def _drop_charts(ctx: Context, keep: int = 2) -> str | None:
    if len(ctx.charts) <= keep:
        return None
    ctx.charts = ctx.charts[:keep]
    return f"the charts after the first {keep}"


def _trim_reruns(ctx: Context, keep: int = 20) -> str | None:
    if len(ctx.reruns) <= keep:
        return None
    total = len(ctx.reruns)
    ctx.reruns = ctx.reruns[:keep]
    return f"the rerun log after its first {keep} of {total} entries"


def _drop_last_slice_tables(ctx: Context) -> str | None:
    for sl in reversed(ctx.comparison[1:]):
        for t in sl.tables:
            if t.rows:
                t.rows = []
                return f"the comparison table rows of {sl.label or 'a slice'}"
    return None


#: (section, its step) in the order they are tried; a section named with no step here is
#: trimmed by its own `Section.trim`.
TRIM_STEPS: list[tuple[str, Step | None]] = [
    ("environment", None),
    ("latency", _drop_latency),
    ("comparison", _drop_undecided),
    ("charts", _drop_charts),
    ("reruns", _trim_reruns),
    ("comparison", _drop_last_slice_tables),
]


def _own(section: Section) -> Step | None:
    """A section's own trim, as a step on the context (its part is `ctx.parts[name]`)."""
    trim = section.trim
    if trim is None:
        return None
    return lambda ctx: trim(ctx.parts[section.name]) if section.name in ctx.parts else None


def steps(every: list[Section]) -> list[Step]:
    """The trim steps in order: `TRIM_STEPS`, then the trims of the sections it does not name
    (in the document's order)."""
    by_name = {s.name: s for s in every}
    out: list[Step] = []
    for name, step in TRIM_STEPS:
        own = _own(by_name[name]) if name in by_name else None
        chosen = step if step is not None else own
        if chosen is not None:
            out.append(chosen)
    named = {name for name, _ in TRIM_STEPS}
    out += [t for s in every if s.name not in named and (t := _own(s)) is not None]
    return out

"""The size budget: the verdict document is posted as one GitHub comment (65,536 characters),
so when it would not fit, `report.render` drops detail one step at a time, least
decision-relevant first, and says at the end what it left out. Each step trims a copy of the
context (never the data) and returns the phrase for that closing note.
"""

from __future__ import annotations

from collections.abc import Callable

from matrixrun.report.context import Context
from matrixrun.report.sections.environment import servers_dropped
from matrixrun.report.sections.latency import LatencySummary

# Each step removes one piece of detail and returns a phrase for the closing note, or None when
# it has nothing left to remove. Order (least decision-relevant first): the per-instance
# server table, the latency tables (their one-sentence verdicts stay), the per-cell
# "undecided" notes, the rerun log beyond its first 20 entries, then the comparison tables of
# the last slices (their regime sentence and verdict stay).


def _drop_servers(ctx: Context) -> str | None:
    servers = ctx.environment.servers
    if not servers:
        return None
    ctx.environment.servers = []
    ctx.environment.servers_note = servers_dropped(len(servers))
    return "the per-instance server table"


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


TRIM_STEPS: list[Callable[[Context], str | None]] = [
    _drop_servers,
    _drop_latency,
    _drop_undecided,
    _drop_charts,
    _trim_reruns,
    _drop_last_slice_tables,
]

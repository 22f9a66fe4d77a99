"""The first screen's 'why' lines: where the primary metric went one way (a confident stretch,
or every cell when none is decided), what each secondary metric did at the same points
(`attributions`), and in words (`why`): read off the data, where the change shows, never a
cause the harness proved. Template: `templates/sections/why.md.j2`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrixrun.core.verdict import (
    CellVerdict,
    Comparison,
    Verdict,
)
from matrixrun.report import fmt
from matrixrun.report.section import Section
from matrixrun.report.series import (
    cells_by_point,
    folded_metrics,
    primary_result,
    several_series,
    stretches,
)
from matrixrun.report.wording.verdicts import xs_range


@dataclass(frozen=True)
class Movement:
    """How one secondary metric moved over a set of points where the primary did one thing."""

    metric: str
    higher_is_better: bool
    changes: list[tuple[float | None, float]]  # (x, change) at each point measured
    better: int  # confident better / worse / same verdicts among them
    worse: int
    same: int
    folded_into: str | None = None


@dataclass(frozen=True)
class Attribution:
    """Where the primary went one way (a stretch, or every cell when none is decided), and
    what each secondary metric did at those points."""

    candidate: str
    slice: str
    verdict: CellVerdict | None  # None: the cells are undecided
    xs: list[float | None]
    movements: list[Movement]


def attributions(verdict: Verdict, folded: dict[str, str]) -> list[Attribution]:
    """For each candidate and each confident stretch of the primary (or all of its cells when
    none is confident), the secondary metrics at the same points: the 'why' of a change read
    off the data (decode step time, time to first token), not a cause the harness proved."""
    out = []
    primary = verdict.settings.primary
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, primary)
            if mr is None:
                continue
            groups: list[tuple[CellVerdict | None, list[Comparison]]] = []
            for series in mr.series:
                found = stretches(series)
                if found:
                    groups += [(s.verdict, s.cells) for s in found]
                else:
                    groups.append((None, list(series.cells)))
            seconds = [m for m in cand.metrics if m.metric != primary]
            for verdict_of, cells in groups:
                ids = [c.point_id for c in cells]
                moves = []
                for m in seconds:
                    by_id = cells_by_point(m)
                    here = [by_id[i] for i in ids if i in by_id and by_id[i].change is not None]
                    if not here:
                        continue
                    moves.append(
                        Movement(
                            metric=m.metric,
                            higher_is_better=m.higher_is_better,
                            changes=[(c.x, c.change) for c in here if c.change is not None],
                            better=sum(1 for c in here if c.verdict == CellVerdict.BETTER),
                            worse=sum(1 for c in here if c.verdict == CellVerdict.WORSE),
                            same=sum(1 for c in here if c.verdict == CellVerdict.SAME),
                            folded_into=folded.get(m.metric),
                        )
                    )
                out.append(
                    Attribution(
                        candidate=cand.candidate,
                        slice=sl.slice,
                        verdict=verdict_of,
                        xs=[c.x for c in cells],
                        movements=moves,
                    )
                )
    return out


# ------------------------------------------------------------------------------ words


#: What a metric measures, in words a reviewer uses (the name follows in code font).
METRIC_WORDS = {
    "tpot": "time per output token",
    "itl": "inter-token latency",
    "ttft": "time to first token",
    "e2e_latency": "end-to-end latency",
}


def metric_words(metric: str) -> str:
    """'time per output token' for mean_tpot_ms, 'p99 time to first token' for p99_ttft_ms;
    the name itself when no words are known."""
    for key, words in METRIC_WORDS.items():
        if f"_{key}_" in f"_{metric}_" or metric.endswith(f"_{key}_ms"):
            stat = metric.split("_", 1)[0]
            return words if stat == "mean" else f"{stat} {words}"
    return metric.replace("_", " ")


def _movement_state(m: Movement) -> str:
    n = len(m.changes)
    if m.better == n:
        return "better"
    if m.worse == n:
        return "worse"
    if m.same == n:
        return f"the same within the margin at all {n}" if n > 1 else "the same within the margin"
    if m.better or m.worse or m.same:
        return f"decided at {m.better + m.worse + m.same} of {n}"
    return "not decided"


def _movement(m: Movement) -> str:
    ch = sorted(c for _, c in m.changes)
    span = (
        fmt.change(ch[0])
        if len(ch) == 1 or ch[0] == ch[-1]
        else f"{fmt.change(ch[0])} to {fmt.change(ch[-1])}"
    )
    return f"{metric_words(m.metric)} {span} (`{m.metric}`, {_movement_state(m)})"


def why(attrs: Sequence[Attribution], axis: str, several: bool) -> list[str]:
    """One line per stretch: what the secondary metrics did where the primary moved. Read off
    the data; it says where the change shows, not what causes it."""
    out = []
    for a in attrs:
        moves = [m for m in a.movements if m.folded_into is None]
        if not moves:
            continue
        where = f"{axis} {xs_range(a.xs)}"
        head = (
            f"where it is {a.verdict.value} ({where})"
            if a.verdict is not None
            else f"at {where} (undecided)"
        )
        if several:
            head = f"`{a.candidate}` {head}"
        ups = [m for m in moves if all(c > 0 for _, c in m.changes)]
        downs = [m for m in moves if all(c < 0 for _, c in m.changes)]
        text = head + ": " + "; ".join(_movement(m) for m in moves)
        gains = [m for m in [*ups, *downs] if (m in ups) == m.higher_is_better]
        losses = [m for m in [*ups, *downs] if m not in gains]
        if gains and losses:
            text += (
                f" — it trades a worse {fmt.join_words([metric_words(m.metric) for m in losses])} "
                f"for a better {fmt.join_words([metric_words(m.metric) for m in gains])}"
            )
        out.append(text[0].upper() + text[1:] + ".")
    return out


# ------------------------------------------------------------------------------ the section


def of(verdict: Verdict) -> list[str]:
    """The 'why' lines of a run (folded metrics are not repeated)."""
    attrs = attributions(verdict, folded_metrics(verdict))
    return why(attrs, verdict.settings.axis, several_series(verdict))


#: What explains the differences, on the first screen (in the headline's partial).
SECTION = Section("why", None, lambda inputs: of(inputs.verdict))

"""The document's first screen: its title, what the ingested files limit, the verdict on the
primary metric and the advice (which arm to use where, from the regimes along the axis), what
would settle what is undecided, a run that did not finish, the hypothesis against the data,
the author's notes. The lines between them are sections of their own (`launches`, `checks`,
`why`), each included by `templates/sections/headline.md.j2`.

A recommendation is a derivation, not a statistic: it reads the verdict's regimes, crossovers
and per-arm means and never estimates anything, so it can never claim more than the cells it
cites."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import (
    AnalysisSettings,
    CellVerdict,
    Comparison,
    Crossover,
    OverallVerdict,
    Verdict,
)
from matrixrun.report import fmt
from matrixrun.report.inputs import RunInputs, compared_pair, spec_path_of
from matrixrun.report.section import Section
from matrixrun.report.series import (
    Stretch,
    primary_result,
    series_label,
    stretches,
    varying_keys,
)
from matrixrun.report.wording.verdicts import RUNS_WORTH_RUNNING, crossover, xs_range
from matrixrun.rundir.settings import RunSettings
from matrixrun.spec.models import MAX_RUNS


class Advice(StrEnum):
    """What the data support doing with a candidate (along one series)."""

    ADOPT = "adopt"  # better somewhere, worse nowhere
    KEEP = "keep"  # worse somewhere, better nowhere
    SPLIT = "split"  # better in one regime, worse in another
    EITHER = "either"  # the same everywhere it is decided
    UNDECIDED = "undecided"  # no cell decided


@dataclass(frozen=True)
class Direction:
    """Which way the undecided changes point and how consistently: what an undecided
    headline still says ('+26% at all 3 points, each measured once')."""

    up: int  # cells whose candidate mean is above the baseline's
    down: int
    cells: int
    lo: float | None
    hi: float | None
    max_n: int  # the most runs of one arm in one cell (1: each measured once)
    min_n: int


@dataclass(frozen=True)
class Recommendation:
    """A candidate's advice along one series of the primary metric."""

    slice: str
    series: str
    candidate: str
    baseline: str
    advice: Advice
    overall: OverallVerdict
    stretches: list[Stretch]
    crossovers: list[Crossover]
    undecided: list[Comparison]
    direction: Direction
    non_monotone: bool
    provisional: bool
    suspect: bool
    runs_needed: int | None  # the most any undecided cell needs per arm, if known
    no_noise: bool
    #: What each undecided cell needs per arm, where known (the settle line says how many
    #: points a smaller number would already decide).
    runs_needed_each: tuple[int, ...] = ()


def direction(cells: Sequence[Comparison]) -> Direction:
    """Sign and spread of the changes (the candidate's mean against the baseline's)."""
    changes = [c.change for c in cells if c.change is not None]
    ns = [n for c in cells for n in (c.baseline.n, c.candidate.n)]
    return Direction(
        up=sum(1 for x in changes if x > 0),
        down=sum(1 for x in changes if x < 0),
        cells=len(changes),
        lo=min(changes) if changes else None,
        hi=max(changes) if changes else None,
        max_n=max(ns) if ns else 0,
        min_n=min(ns) if ns else 0,
    )


def _advice(found: Sequence[Stretch], cells: Sequence[Comparison]) -> Advice:
    verdicts = {s.verdict for s in found}
    if verdicts == {CellVerdict.BETTER}:
        return Advice.ADOPT
    if verdicts == {CellVerdict.WORSE}:
        return Advice.KEEP
    if verdicts:
        return Advice.SPLIT
    if any(c.verdict == CellVerdict.SAME for c in cells):
        return Advice.EITHER
    return Advice.UNDECIDED


def recommendations(verdict: Verdict) -> list[Recommendation]:
    """One per (slice, candidate, series) of the primary metric, in the verdict's order."""
    out = []
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, verdict.settings.primary)
            if mr is None:
                continue
            varying = varying_keys(mr.series)
            for series in mr.series:
                found = stretches(series)
                undecided = [c for c in series.cells if c.verdict == CellVerdict.UNDECIDED]
                needed = [  # a count read off a σ too uncertain to print an interval is no advice
                    c.runs_needed
                    for c in undecided
                    if c.runs_needed is not None
                    and (c.change_lo is None or fmt.interval_usable(c.change_lo, c.change_hi))
                ]
                out.append(
                    Recommendation(
                        slice=sl.slice,
                        series=series_label(series, varying),
                        candidate=cand.candidate,
                        baseline=verdict.settings.baseline,
                        advice=_advice(found, series.cells),
                        overall=mr.overall.verdict,
                        stretches=found,
                        crossovers=list(series.crossovers),
                        undecided=undecided,
                        direction=direction(series.cells),
                        non_monotone=series.non_monotone,
                        provisional=any(c.provisional for s in found for c in s.cells),
                        suspect=cand.suspect,
                        runs_needed=max(needed) if needed else None,
                        no_noise=mr.sigma.value is None,
                        runs_needed_each=tuple(sorted(needed)),
                    )
                )
    return out


def did_not_finish(events: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the run's last session started and never ended (no `run_end` after its last
    `run_start`): a directory without run events (an ingest) is not a run that stopped."""
    starts = [i for i, e in enumerate(events) if e.get("event") == "run_start"]
    return bool(starts) and not any(e.get("event") == "run_end" for e in events[starts[-1] :])


def settle_command(
    settings: RunSettings,
    run_dir: str,
    spec_path: str | None,
    ingest: Mapping[str, object] | None,
    runs_needed: Sequence[int],
    slurm_run: bool = False,
) -> str | None:
    """The command that would settle undecided cells: this run resumed with more runs allowed
    (every measurement kept, only the reruns the policy then asks for made: run/amend.py), or
    for an ingested run the same ingest with a second file per arm measured on a fresh
    server. None where the spec already allows the most runs it can."""
    if settings.spec is not None and spec_path is not None:
        if settings.spec.max_runs >= MAX_RUNS:
            return None
        rehearse = " --rehearse" if settings.rehearsal else ""
        slurm = " --executor slurm" if slurm_run else ""
        worth = [n for n in runs_needed if n <= RUNS_WORTH_RUNNING]
        need = min(max([settings.spec.max_runs + 1, *worth]), MAX_RUNS)
        if spec_path == f"{run_dir}/spec.yaml":  # the run's own copy is the record: never edited
            return (
                f"matrixrun run extended.yaml{rehearse}{slurm} --resume {run_dir}  # "
                f"extended.yaml: a copy of {spec_path} with verify.max_runs: {need}"
            )
        return (
            f"matrixrun run {spec_path}{rehearse}{slurm} --resume {run_dir}  # after raising "
            f"verify.max_runs to {need} in {spec_path}"
        )
    written = ingest.get("settle_command") if ingest else None
    if isinstance(written, str):  # ingest words it: it knows the options it was given
        return written
    given = ingest.get("files") if ingest else None
    if isinstance(given, list):
        files = [str(f) for f in given]
        # the second file as the first one's kind: x.json -> x.2.json, a directory -> dir.2
        again = [str(Path(f).with_name(f"{Path(f).stem}.2{Path(f).suffix}")) for f in files]
        return (
            f"matrixrun ingest {' '.join(files + again)} --baseline "
            f"{settings.analysis.baseline} --out {run_dir}  # the .2 files: each arm again "
            "on a freshly started server"
        )
    return None


def settle_of(inputs: RunInputs) -> str | None:
    """The command that would settle what is undecided (rerun the spec, or re-ingest); none
    for two runs compared."""
    if compared_pair(inputs) is not None:
        return None
    needed = [
        c.runs_needed for _, _, c in inputs.verdict.comparisons() if c.runs_needed is not None
    ]
    return settle_command(
        inputs.settings,
        inputs.run_dir,
        spec_path_of(inputs),
        inputs.ingest,
        needed,
        slurm_run=inputs.jobs is not None,  # a Slurm run has jobs.json
    )


def resume_of(inputs: RunInputs) -> str | None:
    """The command that continues a run that stopped before its end (None: it ended)."""
    if not did_not_finish(inputs.events):
        return None
    rehearse = " --rehearse" if inputs.settings.rehearsal else ""
    slurm = " --executor slurm" if inputs.jobs is not None else ""  # a Slurm run has jobs.json
    return f"matrixrun run {inputs.run_dir}/spec.yaml{rehearse}{slurm} --resume {inputs.run_dir}"


# ------------------------------------------------------------------------------ words


def _cite(c: Comparison, u: str) -> str:
    """'+67.0% at 10 (38.16 → 63.73 tok/s)'."""
    change = "n/a" if c.change is None else fmt.change(c.change)
    where = f"at {fmt.x(c.x)}" if c.x is not None else "here"
    values = f"{fmt.value(c.baseline.mean)} → {fmt.value(c.candidate.mean)} {u}".rstrip()
    return f"{change} {where} ({values})"


def _cites(cells: Sequence[Comparison], u: str, most: int = 3) -> str:
    picked = list(cells) if len(cells) <= most else [*cells[: most - 1], cells[-1]]
    text = ", ".join(_cite(c, u) for c in picked)
    if len(cells) > most:
        text += f" ({len(cells) - most} more between)"
    return text


def _stretch(s: Stretch, r: Recommendation, axis: str, u: str) -> str:
    xs = xs_range([c.x for c in s.cells])
    if r.suspect:  # its speed does not count: say what was measured, advise nothing
        return f"`{r.candidate}` is {s.verdict.value} at {axis} {xs}: {_cites(s.cells, u)}"
    if s.verdict == CellVerdict.BETTER:
        return f"use `{r.candidate}` at {axis} {xs}: {_cites(s.cells, u)}"
    return f"keep `{r.baseline}` at {axis} {xs}: {_cites(s.cells, u)}"


def _crossovers(found: Sequence[Crossover], axis: str) -> str:
    return "; ".join(crossover(c, axis) for c in found)


def consistency(d: Direction, metric: str) -> str:
    """'+25.7% to +26.4%, higher at all 3 points, each measured once'."""
    if d.cells == 0 or d.lo is None or d.hi is None:
        return "no point has both arms measured"
    lo, hi = fmt.change(d.lo), fmt.change(d.hi)
    span = lo if lo == hi else f"{lo} to {hi}"
    if d.up == d.cells:
        way = f"higher at all {d.cells} points" if d.cells > 1 else "higher"
    elif d.down == d.cells:
        way = f"lower at all {d.cells} points" if d.cells > 1 else "lower"
    elif d.up == d.down == 0:
        way = f"no change at any of the {d.cells} points"
    else:
        way = f"higher at {d.up}, lower at {d.down} of {d.cells} points"
    runs = (
        "each measured once"
        if d.max_n == 1
        else f"{d.min_n}–{d.max_n} runs per arm"
        if d.min_n != d.max_n
        else f"{d.max_n} runs per arm"
    )
    return f"`{metric}` {span}, {way}, {runs}"


def recommendation(r: Recommendation, axis: str, metric: str, margin: str) -> str:
    """The advice for one series: which arm to use where, with the changes and absolute values
    it rests on; undecided points after it."""
    u = unit(metric)
    head = ""
    if r.suspect:
        head = (
            f"**Suspect:** `{r.candidate}`'s outputs disagree with the baseline's, so its "
            "speed does not count: do not adopt it on these numbers. On speed alone: "
        )
    if r.advice == Advice.SPLIT:
        text = "; ".join(_stretch(s, r, axis, u) for s in r.stretches)
        if r.non_monotone:
            text += "; the sign changes more than once: re-measure before relying on it"
        elif r.crossovers:
            text += "; " + _crossovers(r.crossovers, axis)
        text = text[0].upper() + text[1:] + "."
    elif r.advice == Advice.ADOPT:
        cells = [c for s in r.stretches for c in s.cells]
        xs = xs_range([c.x for c in cells])
        verb = f"`{r.candidate}` is" if r.suspect else f"Use `{r.candidate}`:"
        text = f"{verb} better at {axis} {xs}: {_cites(cells, u)}."
    elif r.advice == Advice.KEEP:
        cells = [c for s in r.stretches for c in s.cells]
        xs = xs_range([c.x for c in cells])
        text = f"Keep `{r.baseline}`: `{r.candidate}` is worse at {axis} {xs}: {_cites(cells, u)}."
    elif r.advice == Advice.EITHER:
        text = (
            f"No difference: `{r.candidate}` is within {margin} of `{r.baseline}` wherever a "
            "cell is decided; choose on other grounds."
        )
    else:
        text = f"`{r.candidate}` against `{r.baseline}`: {consistency(r.direction, metric)}; " + (
            "no noise estimate, so no interval and no verdict."
            if r.no_noise
            else "no cell clears the margin yet."
        )
    if r.advice != Advice.UNDECIDED and r.undecided:
        xs = fmt.join_words([fmt.x(c.x) for c in r.undecided if c.x is not None])
        changes = ", ".join(
            fmt.change(c.change) + f" (n={c.baseline.n}/{c.candidate.n})"
            for c in r.undecided
            if c.change is not None
        )
        text += f" Undecided at {xs or 'other points'}: {changes}."
    if r.provisional:
        text += " Provisional: some of these cells rest on one run per arm."
    return head + text


def candidate_summary(candidate: str, recs: Sequence[Recommendation], metric: str) -> str:
    """One line for a candidate over many series: how many series each advice got, and the
    direction over all their points (the per-series advice is in the tables)."""
    counts: dict[str, int] = {}
    for r in recs:
        counts[verdict_word(r)] = counts.get(verdict_word(r), 0) + 1
    parts = ", ".join(f"{word} in {n}" for word, n in counts.items())
    ds = [r.direction for r in recs if r.direction.cells]
    if not ds:
        return f"`{candidate}` over {len(recs)} series: {parts}."
    merged = Direction(
        up=sum(d.up for d in ds),
        down=sum(d.down for d in ds),
        cells=sum(d.cells for d in ds),
        lo=min(d.lo for d in ds if d.lo is not None),
        hi=max(d.hi for d in ds if d.hi is not None),
        max_n=max(d.max_n for d in ds),
        min_n=min(d.min_n for d in ds),
    )
    return f"`{candidate}` over {len(recs)} series: {parts}; {consistency(merged, metric)}."


def verdict_word(r: Recommendation) -> str:
    return {
        Advice.SPLIT: "mixed",
        Advice.ADOPT: "better",
        Advice.KEEP: "worse",
        Advice.EITHER: "same",
        Advice.UNDECIDED: "undecided",
    }[r.advice]


def unfinished(command: str) -> str:
    """A run directory whose last session has no end: interrupted, killed, or out of time."""
    return (
        "**This run did not finish**: it stopped before its verify policy was done "
        "(interrupted, or out of time); everything it measured is here and judged as it stands. "
        f"Continue it, measuring only what is missing: `{command}`."
    )


def settle(command: str | None, needed: Sequence[int] = (), points: int = 0) -> str:
    """The exact command that would settle an undecided verdict, with what it takes: runs per
    arm for every undecided point, and — when one point needs far more than the rest (a near
    tie at the margin) — how many points the smaller number already decides, so one hard point
    does not make the whole matrix look out of reach."""
    if command is None:
        return ""
    if not needed:
        return f"Settle it (more runs): `{command}`."
    if min(needed) > RUNS_WORTH_RUNNING:
        return (
            f"More runs will not settle it: the changes sit so close to the margin that "
            f"deciding even one point would take more than {RUNS_WORTH_RUNNING} runs per arm "
            f"(about {min(needed)} if the change and the noise held). Read it as no change "
            "beyond the margin shown; to resolve smaller changes, lower the noise (a longer "
            "cell, `verify.noise_from` a calibration run) or widen the margin."
        )
    beyond = sum(1 for n in needed if n > RUNS_WORTH_RUNNING)
    if beyond:
        worth = [n for n in needed if n <= RUNS_WORTH_RUNNING]
        return (
            f"Settle it (about {max(worth)} runs per arm would decide {len(worth)} of the "
            f"{max(points, len(needed))} undecided points; {beyond} more would need over "
            f"{RUNS_WORTH_RUNNING}, not worth running): `{command}`."
        )
    ordered = sorted(needed)
    top = ordered[-1]
    if len(ordered) == 1 or ordered[-2] == top:
        return f"Settle it (about {top} runs per arm): `{command}`."
    most = ordered[-2]
    decided = sum(1 for n in ordered if n <= most)
    of = max(points, len(ordered))
    rest = "all of them" if of == len(ordered) else "every one with an estimate"
    return (
        f"Settle it (about {most} runs per arm would decide {decided} of the {of} undecided "
        f"points; {rest} about {top}): `{command}`."
    )


def hypothesis(text: str, recs: Sequence[Recommendation], axis: str, limit: int = 400) -> str:
    """The hypothesis, shortened, and what the primary metric's regimes say about it (the
    reader judges whether that holds it up; the harness does not parse the claim)."""
    short = text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
    parts = []
    for r in recs:
        for s in r.stretches:
            parts.append(f"{s.verdict.value} at {axis} {xs_range([c.x for c in s.cells])}")
    if not parts and any(r.advice is Advice.EITHER for r in recs):
        # "same" is a decision too: a control that came out the same has tested its claim
        return (
            f"*{short}* — the data: `{recs[0].candidate}` the same as `{recs[0].baseline}` "
            "(within the margin) wherever a cell is decided."
        )
    if not parts:
        return f"*{short}* — the data do not test it yet: no cell is decided."
    return f"*{short}* — the data: `{recs[0].candidate}` {'; '.join(parts)}."


def ingest_caveat(c: Mapping[str, Any]) -> str:
    """One sentence before an ingested run's verdict for what its files limit (kinds from
    ingest/formats/checks.py); an unknown kind is shown as its name, never dropped."""
    kind = c.get("kind")
    if kind == "differs":
        values = "; ".join(
            f"`{arm}`: {', '.join(str(v) for v in vs)}"
            for arm, vs in (c.get("values") or {}).items()
        )
        what = str(c.get("field", "?")).replace("-", " ")
        return (
            f"the arms differ in {what} ({values}), compared anyway as asked "
            f"(--allow-difference): a difference below may come from the {what}, not from "
            "the server configuration."
        )
    if kind == "spec_decode":
        shown = ", ".join(f"`{arm}` ({why})" for arm, why in (c.get("arms") or {}).items())
        return (
            f"speculative decoding in {shown}: each streamed chunk carries several accepted "
            "tokens, so the gaps between chunks are not per-token inter-token latency; ITL "
            "is left out of this comparison, TPOT (time per output token) is kept."
        )
    if kind == "one_arm_points":
        points = "; ".join(
            f"{p} (only {', '.join(f'`{a}`' for a in arms)})"
            for p, arms in (c.get("points") or {}).items()
        )
        return f"points not every arm ran, with nothing to compare them with: {points}."
    if kind == "failures_not_recorded":
        groups: dict[str, list[str]] = {}
        for arm, why in (c.get("arms") or {}).items():
            groups.setdefault(str(why), []).append(f"`{arm}`")
        shown = "; ".join(f"{', '.join(arms)} ({why})" for why, arms in groups.items())
        return (
            f"failed requests are not recorded for {shown}: the failed-request count below "
            "counts them as 0, which was not measured."
        )
    return f"{kind}: see ingest.json."


def ingested_title(candidates: Sequence[str], baseline: str) -> str:
    return f"{' vs '.join(candidates)} against {baseline} (ingested)"


def compare_title(a: str, b: str) -> str:
    return f"{b} against {a} (two runs compared)"


# ------------------------------------------------------------------------------ the section

#: More (candidate, series) pairs than this get one advice line per candidate.
MAX_ADVICE_LINES = 4


@dataclass
class Headline:
    """What a reviewer reads first: the title, what the ingested files limit, the verdict and
    the advice, what would settle it, the hypothesis against the data, the notes. (Whether the
    run was simulated is the `simulation` section's part, which the partial reads too.)"""

    title: str
    #: what the ingested files limit, said before the verdict (`caveats_of`)
    caveats: list[str]
    verdict: str
    metric: str
    recommendations: list[str]
    settle: str
    hypothesis: str | None
    notes: str | None
    #: The run stopped before its verify policy was done, and how to continue it; "" if not.
    unfinished: str = ""


def title_of(inputs: RunInputs) -> str:
    """The plan's title, or for an ingested run what it compares."""
    if inputs.settings.spec is not None and inputs.plan is not None:
        return fmt.user_heading(inputs.plan.title)
    pair = compared_pair(inputs)
    if pair is not None:
        return fmt.user_heading(compare_title(pair[0], pair[1]))
    return fmt.user_heading(
        ingested_title(list(inputs.verdict.overall), inputs.verdict.settings.baseline)
    )


def caveats_of(inputs: RunInputs) -> list[str]:
    """What the ingested files limit (arms allowed to differ, speculative decoding, points
    only some arms ran): said before the verdict."""
    found = (inputs.ingest or {}).get("caveats", [])
    return [ingest_caveat(c) for c in found if isinstance(c, dict)]


def advice_lines(recs: Sequence[Recommendation], s: AnalysisSettings) -> list[str]:
    """One line per series, each naming its candidate when there are several; past
    `MAX_ADVICE_LINES` one line per candidate (the tables have each series)."""
    margin = fmt.margin(s.margin_for(s.primary))
    if len(recs) > MAX_ADVICE_LINES:
        by_candidate: dict[str, list[Recommendation]] = {}
        for r in recs:
            by_candidate.setdefault(r.candidate, []).append(r)
        return [candidate_summary(c, rs, s.primary) for c, rs in by_candidate.items()]
    lines = []
    for r in recs:
        text = recommendation(r, s.axis, s.primary, margin)
        if len(recs) > 1:
            where = " · ".join(x for x in (r.slice, r.series) if x)
            name = f"`{fmt.user_plain(r.candidate)}`"
            text = name + (f" ({where})" if where else "") + ": " + text
        lines.append(text)
    return lines


def verdict_words(recs: Sequence[Recommendation]) -> str:
    """'better', 'mixed, undecided', '… on speed, but the outputs disagree'."""
    found = sorted(
        {verdict_word(r) for r in recs},
        key=[w for w in ("mixed", "better", "worse", "same", "undecided")].index,
    )
    suspect = any(r.suspect for r in recs)
    return (", ".join(found) or "undecided") + (
        " on speed, but the outputs disagree" if suspect else ""
    )


def of(inputs: RunInputs) -> Headline:
    verdict, facts = inputs.verdict, inputs.settings.spec
    s = verdict.settings
    recs = recommendations(verdict)
    resume = resume_of(inputs)
    # the command leads only when nothing is decided; an undecided point beside decided
    # regimes says what would settle it under the table
    undecided = [r for r in recs if r.advice == Advice.UNDECIDED]
    if len(undecided) < len(recs):
        undecided = []
    needed = sorted(n for r in undecided for n in r.runs_needed_each)
    points = sum(len(r.undecided) for r in undecided)
    return Headline(
        title=title_of(inputs),
        caveats=caveats_of(inputs),
        verdict=verdict_words(recs),
        metric=s.primary,
        recommendations=advice_lines(recs, s),
        # an unfinished run is settled by continuing it first, not by a bigger spec
        settle=settle(settle_of(inputs), needed, points) if undecided and not resume else "",
        hypothesis=hypothesis(fmt.user(facts.hypothesis), recs, s.axis)
        if facts is not None and facts.hypothesis
        else None,
        notes=fmt.user_block(facts.notes) if facts is not None and facts.notes else None,
        unfinished=unfinished(resume) if resume else "",
    )


#: First in the document; its partial includes the launches, SLO, checks and why lines.
SECTION = Section("headline", 10, of)

"""The document's first screen as plain data for the templates: the decision block, the SLO
table and the folded-metric lines (the charts are `report.charts`).
Pure functions of the `Verdict` and `settings.json`'s facts; derivations come from
`report.decision`, sentences from `wording.decision`, numbers from `fmt`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import Verdict
from matrixrun.report import decision, fmt
from matrixrun.report.wording import decision as words
from matrixrun.report.wording import launches as launch_words
from matrixrun.report.wording.verdicts import RUNS_WORTH_RUNNING
from matrixrun.rundir.settings import RunSettings

#: More (candidate, series) pairs than this get one advice line per candidate.
MAX_ADVICE_LINES = 4


@dataclass
class DecisionBlock:
    """What a reviewer reads first: the verdict and the advice, the hypothesis against the
    data, the checks with their numbers, what moved with the primary metric, the notes."""

    verdict: str
    metric: str
    recommendations: list[str]
    settle: str
    hypothesis: str | None
    checks: str
    why: list[str]
    notes: str | None
    #: The run stopped before its verify policy was done, and how to continue it; "" if not.
    unfinished: str = ""
    #: Arms whose launches disagree beyond run noise (the document's first lines).
    unstable: list[str] = field(default_factory=list)


@dataclass
class SloView:
    bounds: str
    header: list[str]
    rows: list[list[str]]


def _fewest_launches(verdict: Verdict) -> int:
    """The fewest server launches any arm of a primary cell ran on: what a fixed design's
    checks line may say every cell had (a failed run or a trimmed round leaves fewer than
    max_runs)."""
    cells = [c for _, _, c in verdict.comparisons(verdict.settings.primary)]
    return min((len(set(a.instances)) for c in cells for a in (c.baseline, c.candidate)), default=0)


def decision_of(
    verdict: Verdict,
    settings: RunSettings,
    *,
    simulated: bool,
    settle_command: str | None,
    resume_command: str | None = None,
) -> DecisionBlock:
    s = verdict.settings
    recs = decision.recommendations(verdict)
    margin = f"±{fmt.setting_percent(s.margin)}"
    facts = settings.spec
    several = len({r.candidate for r in recs}) > 1 or len(recs) > 1
    lines = []
    if len(recs) > MAX_ADVICE_LINES:  # a line per candidate; the tables have each series
        by_candidate: dict[str, list[decision.Recommendation]] = {}
        for r in recs:
            by_candidate.setdefault(r.candidate, []).append(r)
        lines = [words.candidate_summary(c, rs, s.primary) for c, rs in by_candidate.items()]
    for r in recs if len(recs) <= MAX_ADVICE_LINES else []:
        text = words.recommendation(r, s.axis, s.primary, margin)
        if several:
            where = " · ".join(x for x in (r.slice, r.series) if x)
            name = f"`{fmt.user_plain(r.candidate)}`"
            text = name + (f" ({where})" if where else "") + ": " + text
        lines.append(text)
    # the command leads only when nothing is decided; an undecided point beside decided
    # regimes says what would settle it under the table
    undecided = [r for r in recs if r.advice == decision.Advice.UNDECIDED]
    if len(undecided) < len(recs):
        undecided = []
    needed = sorted(n for r in undecided for n in r.runs_needed_each)
    points = sum(len(r.undecided) for r in undecided)
    verdict_words = sorted(
        {words.verdict_word(r) for r in recs},
        key=[w for w in ("mixed", "better", "worse", "same", "undecided")].index,
    )
    folded = decision.folded_metrics(verdict)
    suspect = any(r.suspect for r in recs)
    return DecisionBlock(
        verdict=(", ".join(verdict_words) or "undecided")
        + (" on speed, but the outputs disagree" if suspect else ""),
        metric=s.primary,
        recommendations=lines,
        # an unfinished run is settled by continuing it first, not by a bigger spec
        settle=words.settle(settle_command, needed, points)
        if undecided and not resume_command
        else "",
        hypothesis=words.hypothesis(fmt.user(facts.hypothesis), recs, s.axis)
        if facts is not None and facts.hypothesis
        else None,
        checks=words.checks_line(
            decision.checks(verdict),
            simulated,
            facts is None,
            s.axis,
            copied=facts is not None and facts.workload.warmup_requests == "cell",
            fixed=_fewest_launches(verdict) if s.design == "fixed" else None,
        ),
        why=words.why(decision.attributions(verdict, folded), s.axis, several),
        notes=fmt.user_block(facts.notes) if facts is not None and facts.notes else None,
        unfinished=words.unfinished(resume_command) if resume_command else "",
        unstable=launch_words.unstable_launches(
            verdict.launch_check,
            s.axis,
            unit(s.primary),
            {o.arm for x in verdict.sigma if x.metric == s.primary for o in x.odd_groups},
        )
        or launch_words.untested(verdict.launch_check),
    )


def folded_lines(verdict: Verdict) -> list[str]:
    return [words.folded(m, into) for m, into in decision.folded_metrics(verdict).items()]


def slo_of(verdict: Verdict, settings: RunSettings) -> SloView | None:
    facts = settings.spec
    if facts is None or not facts.slo:
        return None
    best = decision.slo_best(verdict, facts.slo)
    with_series = any(b.series for b in best)
    s = verdict.settings
    return SloView(
        bounds=words.slo_bounds(facts.slo),
        header=[
            "arm",
            *(["series"] if with_series else []),
            f"best `{s.primary}` within the SLO",
            "at",
            "points meeting it",
        ],
        rows=[words.slo_row(b, s.axis, s.primary) for b in best],
    )


def settle_command(
    settings: RunSettings,
    run_dir: str,
    spec_path: str | None,
    ingest: Mapping[str, object] | None,
    runs_needed: Sequence[int],
) -> str | None:
    """The command that would settle undecided cells: the spec run again with more runs
    allowed, or for an ingested run the same ingest with a second file per arm measured on a
    fresh server."""
    if settings.spec is not None and spec_path is not None:
        rehearse = " --rehearse" if settings.rehearsal else ""
        worth = [n for n in runs_needed if n <= RUNS_WORTH_RUNNING]
        need = max([settings.spec.max_runs + 1, *worth])
        return f"nox -s matrix -- {spec_path}{rehearse}  # with verify.max_runs: {need} in the spec"
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


def secondary_lines(verdict: Verdict) -> list[str]:
    """One line per secondary metric's verdict (per candidate and slice), metrics whose
    sentences differ only in their name joined into one line: three 'no noise estimate'
    sentences say one thing."""
    from matrixrun.report import wording

    s = verdict.settings
    folded = decision.folded_metrics(verdict)
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

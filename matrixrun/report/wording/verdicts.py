"""The sentences about the verdict that several sections cite: a cell, a place along the axis,
a crossover, a series' regimes, a candidate's overall verdict (σ and the run's caveats are
the noise section's, `sections/noise.py`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from matrixrun.core.verdict import (
    LEADING_NOTES,
    AnalysisSettings,
    ArmSample,
    CellNote,
    Comparison,
    Crossover,
    Overall,
    OverallVerdict,
    Place,
    Series,
    SigmaSource,
)
from matrixrun.core.words import plural
from matrixrun.report import fmt

NON_MONOTONE = "the sign changes more than once along the axis: non-monotone, re-measure"


# ------------------------------------------------------------------------------ places


def num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def label(axis: str, x: float | None, point: dict[str, Any]) -> str:
    """'concurrency 64', or every key of a point off the axis."""
    if x is not None:
        return f"{axis} {num(x)}"
    return ", ".join(f"{k} {num(v)}" for k, v in point.items()) or "the only point"


def measured_at(axis: str, point: Mapping[str, Any], slice_name: str) -> str:
    """Where a measurement or rerun ran: 'concurrency 64', 'concurrency 64 [tp2]'."""
    return f"{axis} {fmt.x(point.get(axis, '?'))}" + (f" [{slice_name}]" if slice_name else "")


def where(places: Sequence[Place], axis: str) -> str:
    """'concurrency 10, 64' when the places lie on one series, else each labelled."""
    fixed = {p.series for p in places}
    if len(fixed) == 1 and all(p.x is not None for p in places):
        return f"{axis} " + ", ".join(num(p.x) for p in places)
    return "; ".join(label(axis, p.x, p.point) for p in places)


def span(places: Sequence[Place]) -> str:
    ch = sorted(p.change for p in places if p.change is not None)
    if not ch:
        return ""
    if len(ch) == 1:
        return fmt.change(ch[0])
    return f"{fmt.change(ch[0])} to {fmt.change(ch[-1])}"


def xs_range(xs: Sequence[float | None]) -> str:
    """'10–64', '256', or 'all points' when the axis has no values."""
    vals = [x for x in xs if x is not None]
    if not vals:
        return "every point"
    if len(vals) == 1:
        return fmt.x(vals[0])
    return f"{fmt.x(vals[0])}–{fmt.x(vals[-1])}"


def crossover(c: Crossover, axis: str) -> str:
    """'crossover between concurrency 64 and 256 (≈ 98, interpolated in log concurrency)':
    the one wording of a crossover, in the headline and under every table."""
    text = f"crossover between {axis} {fmt.x(c.x_lo)} and {fmt.x(c.x_hi)}"
    if c.estimate is not None:
        text += f" (≈ {fmt.approx(c.estimate)}, interpolated in log {axis}"
        if c.estimate_lo is not None and c.estimate_hi is not None:
            text += (
                f"; {fmt.approx(c.estimate_lo)}–{fmt.approx(c.estimate_hi)} if the change is "
                f"a straight line in log {axis} between them"
            )
        text += ")"
    return text


# ------------------------------------------------------------------------------ σ


#: Runs per arm past which "about N runs would settle it" is no advice (issue 33: "about 188
#: runs per arm" for a −2.5% change against a 3% margin): a change that close to the margin is
#: below what repetition resolves at this noise. The first screen's settle line uses it too.
RUNS_WORTH_RUNNING = 20
#: What would give σ the df a reader can trust, said wherever it is missing.
WHAT_PINS_SIGMA = (
    "a calibration run (`verify.design: fixed`, then `verify.noise_from` naming it), "
    "`verify.noise_from` an earlier run of the same engine, model and hardware, or 3 or more "
    "launches per arm (`verify.max_runs: 3` with fresh-server reruns) would pin it down"
)


# ------------------------------------------------------------------------------ one cell


def warmup_evidence(c: Comparison) -> str:
    return "; ".join(
        f"later runs of {w.arm} on a server beat the first by {fmt.change(math.expm1(w.gap))} "
        f"({w.pairs} pair(s)); {w.cold} of its {w.n} run(s) here were first on their server"
        for w in c.warmup
    )


#: The arm a note is about, for the notes that are about one.
_ROLE = {
    CellNote.NO_BASELINE: "baseline",
    CellNote.BASELINE_UNRELIABLE: "baseline",
    CellNote.BASELINE_FAILED_RUNS: "baseline",
    CellNote.BASELINE_FAILED_REQUESTS: "baseline",
    CellNote.NO_CANDIDATE: "candidate",
    CellNote.CANDIDATE_UNRELIABLE: "candidate",
    CellNote.CANDIDATE_FAILED_RUNS: "candidate",
    CellNote.CANDIDATE_FAILED_REQUESTS: "candidate",
}


def cell_note(note: CellNote, c: Comparison, *, short: bool = False) -> str:
    """One note of a cell in words (`short`: as the one-line summary shows it)."""
    arms: dict[str, ArmSample] = {"baseline": c.baseline, "candidate": c.candidate}
    role = _ROLE.get(note, "")
    if note in (CellNote.NO_BASELINE, CellNote.NO_CANDIDATE):
        arm = arms[role]
        behind = len(arm.reasons) - arm.failed_measurements  # succeeded, yet gave no value
        if behind > 0 and not arm.values:
            return (
                f"no usable measurement of the {role}: its {behind} successful "
                f"{'run' if behind == 1 else 'runs'} fell behind (the load client's self-check "
                "or the simulator), so none gives a number"
            )
        return f"no successful measurement of the {role}"
    if note == CellNote.NO_NOISE:
        return "no noise estimate"
    if note in (CellNote.CANDIDATE_UNRELIABLE, CellNote.BASELINE_UNRELIABLE):
        return f"{role} fails too many requests to be called better"
    if note == CellNote.WARMUP:
        return f"first-run warmup could account for it: {warmup_evidence(c)}"
    if note in (CellNote.BASELINE_FAILED_RUNS, CellNote.CANDIDATE_FAILED_RUNS):
        return f"{role}: {arms[role].failed_measurements} failed measurement(s)"
    if note in (CellNote.BASELINE_FAILED_REQUESTS, CellNote.CANDIDATE_FAILED_REQUESTS):
        return f"{role} failed {fmt.share(arms[role].failure_rate)} of requests"
    if note == CellNote.CLIENT_BOUND:
        bound = max(c.baseline.client_bound, c.candidate.client_bound)
        if short:
            return f"the client's own lag (up to {fmt.share(bound)}) could account for it"
        return (
            f"the load client fell behind in this cell (its self-check bounds the error at "
            f"{fmt.share(bound)}), enough to account for the verdict"
        )
    if note == CellNote.CAPPED:
        capped = [a.arm for a in (c.baseline, c.candidate) if a.capped]
        if short:
            return f"capped: {', '.join(capped)}"
        return (
            f"{' and '.join(f'`{a}`' for a in capped)} hit the cell's time cap: metrics are "
            "over the requests that finished, so latency flatters the capped arm"
        )
    if note == CellNote.ONE_SERVER:
        return "repeats on one server count once toward the interval: σ is the server-to-server one"
    if short:
        return "small change"
    return "small change, below the margin or not yet shown to exceed it"


def cell_text(c: Comparison) -> str:
    """benchstat/criterion style: '−28.3% [−31.0, −25.5] n=2/2 worse',
    '~ +1.1% [−3.0, +5.4] n=3/3 same'. n is baseline/candidate; '~' marks same/undecided."""
    parts = []
    if c.verdict in ("same", "undecided"):
        parts.append("~")
    parts.append("n/a" if c.change is None else fmt.change(c.change))
    if c.change_lo is not None and c.change_hi is not None:
        parts.append(fmt.change_interval(c.change_lo, c.change_hi, c.df, decided=c.confident))
    parts.append(f"n={c.baseline.n}/{c.candidate.n}")
    parts.append(c.verdict.value)
    text = " ".join(parts)
    lead = c.leading_note
    extras = [
        e
        for e in (
            "provisional" if c.provisional and c.change_lo is not None else "",
            cell_note(lead, c, short=True) if lead is not None else "",
        )
        if e
    ]
    if extras:
        text += " (" + "; ".join(extras) + ")"
    return text


def undecided(c: Comparison) -> str:
    """What an undecided cell needs, in words (never 'better' for an undecided cell)."""
    parts = []
    if c.small_change:
        parts.append("a change exists but is below the margin or not yet shown to exceed it")
    wide = c.change_lo is not None and not fmt.interval_usable(c.change_lo, c.change_hi)
    if wide:  # σ itself is unknown: a count of runs read off it would be as unknown
        parts.append(f"its interval is too wide to read: {WHAT_PINS_SIGMA}")
    elif c.runs_needed is not None and c.runs_needed > RUNS_WORTH_RUNNING:
        parts.append(
            f"more than {RUNS_WORTH_RUNNING} runs per arm would be needed (about "
            f"{c.runs_needed} if the change and the noise held): it sits too close to the "
            "margin for more runs to settle"
        )
    elif c.runs_needed is not None:
        parts.append(
            f"about {c.runs_needed} runs per arm in all, the extra ones each on a fresh "
            "server, would settle it if the observed change and the noise estimate held"
        )
    elif c.d is not None and c.leading_note not in LEADING_NOTES and not wide:
        # (an interval that clears the margin but lost its confidence to a leading note —
        # a capped arm's latency, warm-up, the client — is said by that note, not this)
        parts.append("the change sits on the margin: more runs alone may not settle it")
    parts += [cell_note(n, c) for n in c.notes if n != CellNote.SMALL_CHANGE]
    return "; ".join(parts)


# ------------------------------------------------------------------------------ along the axis


def regimes(series: Series, axis: str, margin: float) -> str:
    """'Along concurrency: undecided at 1, better at 10 and 64, worse at 256 and 1024;
    crossover between concurrency 64 and 256 (≈ 95, interpolated in log concurrency).'"""
    x_of = {c.point_id: c.x for c in series.cells}
    parts = []
    for r in series.regimes:
        xs = fmt.join_words([fmt.x(x_of[p]) for p in r.point_ids if x_of.get(p) is not None])
        word = f"the same within {fmt.margin(margin)}" if r.verdict == "same" else r.verdict
        parts.append(f"{word} at {xs}" if xs else f"{word} at {plural(len(r.point_ids), 'point')}")
    text = f"Along {axis}: " + ", ".join(parts)
    if series.non_monotone:
        text += "; " + NON_MONOTONE
    else:
        text += "".join("; " + crossover(c, axis) for c in series.crossovers)
    return text + "."


def _inconclusive(ov: Overall, m: str, margin: str) -> str:
    if not ov.cells:
        return f"undecided on {m}: no cell has measurements of both arms."
    if ov.sigma is None:
        return (
            f"undecided on {m}: there is no noise estimate (n = 1 everywhere, no "
            "declared prior); rerun some cells on a fresh server, or declare the noise."
        )
    text = f"undecided on {m}: no cell clears the ±{margin} margin"
    if ov.runs_needed is not None and ov.runs_needed > RUNS_WORTH_RUNNING:
        text += (
            f"; settling it would take more than {RUNS_WORTH_RUNNING} runs per arm (about "
            f"{ov.runs_needed} if the observed changes and σ = {fmt.percent(ov.sigma)} held): "
            "the changes sit too close to the margin for more runs to settle"
        )
    elif ov.runs_needed is not None:
        text += (
            f"; about {ov.runs_needed} runs per arm in all in the undecided cells, the extra "
            f"ones each on a fresh server, would settle it (if the observed changes and "
            f"σ = {fmt.percent(ov.sigma)} held)"
        )
    else:
        text += "; the observed changes sit on the margin, so more runs alone may not settle it"
    return text + "."


def overall(ov: Overall, s: AnalysisSettings) -> str:
    """A candidate's verdict on one metric in one sentence (VERDICTS.md §8)."""
    m, axis, margin = ov.metric, s.axis, fmt.setting_percent(s.margin_for(ov.metric))
    better, worse = ov.better_at, ov.worse_at
    rest = ov.cells - len(better) - len(worse)
    if ov.verdict == OverallVerdict.MIXED:
        text = (
            f"mixed on {m}: better at {where(better, axis)} ({span(better)}), "
            f"worse at {where(worse, axis)} ({span(worse)})"
        )
        if ov.non_monotone:
            text += "; " + NON_MONOTONE
        else:
            text += "".join("; " + crossover(c, axis) for c in ov.crossovers)
        text += "."
    elif ov.verdict in (OverallVerdict.BETTER, OverallVerdict.WORSE):
        group = better or worse
        are = "is" if rest == 1 else "are"
        tail = f"; the other {plural(rest, 'cell')} {are} same or undecided" if rest else ""
        text = (
            f"{ov.verdict} on {m} at {where(group, axis)} ({span(group)}, beyond the "
            f"±{margin} margin){tail}."
        )
    elif ov.verdict == OverallVerdict.SAME:
        text = (
            f"same on {m}: every cell ({ov.cells}) is within ±{margin} at "
            f"{fmt.confidence(s.level)} confidence."
        )
    else:
        text = _inconclusive(ov, m, margin)
    if ov.provisional:
        text += " Provisional: it rests on cells with n = 1."
    if ov.verdict != OverallVerdict.UNDECIDED and ov.sigma_source == SigmaSource.WARM:
        text += " σ comes from warm repeats only (within-instance), which may understate."
    elif ov.verdict != OverallVerdict.UNDECIDED and ov.sigma_source == SigmaSource.PRIOR:
        text += " σ is the declared prior, not measured."
    if ov.by_slice:
        text += " By slice: " + "; ".join(f"{b.slice or '—'}: {b.verdict}" for b in ov.by_slice)
        text += "."
    if ov.suspect is not None:
        text += (
            f" Suspect: its outputs agree with the baseline's on only {fmt.share(ov.suspect)} "
            "of checks."
        )
    return text


# ------------------------------------------------------------------------------ caveats

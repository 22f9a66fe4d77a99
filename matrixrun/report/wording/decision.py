"""The sentences of the decision block (the document's first screen): the recommendation, the
hypothesis line, the checks line, the 'why' line, folded metrics, the SLO view, the charts'
titles and the main table's short words. The data come from `report.decision`."""

from __future__ import annotations

from collections.abc import Sequence

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import (
    CellVerdict,
    CheckOutcome,
    Comparison,
    Crossover,
    Explanation,
    Rerun,
    RerunKind,
)
from matrixrun.report import fmt
from matrixrun.report.decision import (
    Advice,
    Attribution,
    Checks,
    Direction,
    Movement,
    Recommendation,
    SloBest,
    Stretch,
)
from matrixrun.report.wording.counts import outcome, plural
from matrixrun.report.wording.verdicts import RUNS_WORTH_RUNNING, crossover
from matrixrun.rundir.settings import SloBound

#: What a metric measures, in words a reviewer uses (the name follows in code font).
METRIC_WORDS = {
    "tpot": "time per output token",
    "itl": "inter-token latency",
    "ttft": "time to first token",
    "e2e_latency": "end-to-end latency",
}

EXPLANATION_WORDS = {Explanation.WARMUP: "warm-up", Explanation.INSTANCE: "an odd server instance"}

OK, WARN, BAD = "✅", "⚠️", "❌"


def metric_words(metric: str) -> str:
    """'time per output token' for mean_tpot_ms, 'p99 time to first token' for p99_ttft_ms;
    the name itself when no words are known."""
    for key, words in METRIC_WORDS.items():
        if f"_{key}_" in f"_{metric}_" or metric.endswith(f"_{key}_ms"):
            stat = metric.split("_", 1)[0]
            return words if stat == "mean" else f"{stat} {words}"
    return metric.replace("_", " ")


def xs_range(xs: Sequence[float | None]) -> str:
    """'10–64', '256', or 'all points' when the axis has no values."""
    vals = [x for x in xs if x is not None]
    if not vals:
        return "every point"
    if len(vals) == 1:
        return fmt.x(vals[0])
    return f"{fmt.x(vals[0])}–{fmt.x(vals[-1])}"


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
        return f"`{r.candidate}` is {outcome(s.verdict.value)} at {axis} {xs}: {_cites(s.cells, u)}"
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
            parts.append(f"{outcome(s.verdict.value)} at {axis} {xs_range([c.x for c in s.cells])}")
    if not parts:
        return f"*{short}* — the data do not test it yet: no cell is decided."
    return f"*{short}* — the data: `{recs[0].candidate}` {'; '.join(parts)}."


def _rerun_numbers(r: Rerun) -> str:
    where = f" at {fmt.x(r.point.get('concurrency', r.point_id))}"
    if r.value is None or r.first_value is None:
        return "the rerun failed" + where
    kind = "warm rerun" if r.kind == RerunKind.WARM else "fresh server"
    u = unit(r.metric)
    return (
        f"{kind} {fmt.exact(r.value)} vs first run {fmt.exact(r.first_value)} {u}{where}".replace(
            "  ", " "
        )
    )


def checks_line(
    c: Checks,
    simulated: bool,
    ingested: bool,
    axis: str,
    copied: bool = False,
    fixed: int | None = None,
) -> str:
    """'Ruled out: warm-up ✅ (…) · Ruled out: an odd server ✅ (…) · outputs agree ✅ (…) ·
    failed requests 0 ✅'. `copied`: each cell ran after an unmeasured copy of itself
    (`warmup_requests: cell`), which an untested warm-up says (it lowers a first pass's
    warm-up, it does not rule it out: on the lent H200 a first pass stayed 10–15% slow).
    `fixed`: in a fixed design (`verify.design: fixed`), which tests no explanation, the fewest
    launches any cell ran on (measured: a failed run leaves fewer than max_runs); on two or
    more an odd launch is in the launch noise."""
    items = []
    tested = {e.explanation for e in c.explanations}
    for e in c.explanations:
        words = EXPLANATION_WORDS.get(e.explanation, e.explanation.value)
        if e.reruns:
            cite = _rerun_numbers(e.reruns[0]).replace(" at ", f" at {axis} ", 1)
            if len(e.reruns) > 1:
                cite += f"; {len(e.reruns)} tests"
        else:
            cite = "later runs on a server beat the first: see the caveats"
        if e.outcome == CheckOutcome.FALSIFIED:
            items.append(f"Ruled out: {words} {OK} ({cite})")
        elif e.outcome == CheckOutcome.CONFIRMED:
            items.append(f"{words.capitalize()} confirmed {BAD} ({cite})")
        else:
            items.append(f"{words.capitalize()} not settled {WARN} ({cite})")
    untested = [
        EXPLANATION_WORDS[x] for x in (Explanation.WARMUP, Explanation.INSTANCE) if x not in tested
    ]
    if untested:
        why = "one run per cell" if ingested else "no rerun tested it"
        if fixed is not None:
            why = (
                f"a fixed design tests no explanation; every cell ran on {fixed} launches, so "
                "an odd one is in the launch noise"
                if fixed >= 2
                else "a fixed design tests no explanation, and some cell ran on one launch only"
            )
        if copied and EXPLANATION_WORDS[Explanation.WARMUP] in untested:
            why += "; each cell ran after an unmeasured copy of itself"
        fresh = sum(1 for r in c.replicates if r.kind == RerunKind.FRESH_SERVER)
        if fresh and fixed is None and EXPLANATION_WORDS[Explanation.INSTANCE] in untested:
            # the rerun log below lists these: say what they were for, so the two agree
            why += (
                f"; the {plural(fresh, 'fresh-server replicate')} in the rerun log measured "
                "the launch-to-launch noise, which an odd server is part of, but none "
                "re-measured a surprising cell"
            )
        items.append(f"not tested: {' or '.join(untested)} {WARN} ({why})")
    if c.suspect:
        shares = [
            f"`{s}` {fmt.share(c.agreement[s])}" if s in c.agreement else f"`{s}`"
            for s in c.suspect
        ]
        items.append(f"outputs disagree {BAD} ({', '.join(shares)} agreement)")
    elif c.agreement:
        low = min(c.agreement.values())
        tail = "; simulated: identical by construction" if simulated else ""
        items.append(f"outputs agree {OK} ({fmt.share(low)}{tail})")
    else:
        items.append(f"outputs not checked {WARN}")
    failed = c.failed_requests
    mark = OK if failed == 0 and c.failed_measurements == 0 else WARN
    text = f"{failed} failed requests"
    if c.total_requests:
        text += f" of {c.total_requests:,}"
    if c.failed_measurements:
        text += f", {c.failed_measurements} failed measurements"
    items.append(f"{text} {mark}")
    return " · ".join(items)


# ------------------------------------------------------------------------------ why


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
            f"where it is {outcome(a.verdict.value)} ({where})"
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


def folded(metric: str, into: str) -> str:
    return (
        f"`{metric}`: identical to `{into}` (within 0.1% in every arm at every point), "
        "not repeated."
    )


# ------------------------------------------------------------------------------ SLO


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


# ------------------------------------------------------------------------------ the tables


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
    word = outcome(c.verdict.value)
    if c.provisional and c.change_lo is not None:
        word += " (n=1)"
    return word


def rerun_summary(replicates: Sequence[Rerun]) -> str:
    """Routine replicates in one line: how many, where, and how far from their first runs —
    counted against the same noise band each replicate's own line uses (`Rerun.matches_first`,
    z·√2·σ for its kind of pair), not against the margin (a real run showed "2 of 2 within ±5%"
    beside changes of −18.5% and +30.4%)."""
    ok = [r for r in replicates if r.change_vs_first is not None]
    if not ok:
        return f"{plural(len(replicates), 'routine replicate')}; none has both values."
    ch = sorted(r.change_vs_first or 0.0 for r in ok)
    judged = [r for r in ok if r.matches_first is not None]
    within = sum(1 for r in judged if r.matches_first)
    fresh = sum(1 for r in ok if r.kind == RerunKind.FRESH_SERVER)
    spread = (
        fmt.change(ch[0], 2)
        if ch[0] == ch[-1]
        else f"{fmt.change(ch[0], 2)} to {fmt.change(ch[-1], 2)}"
    )
    head = (
        f"{plural(len(replicates), 'routine replicate')} ({fresh} on fresh servers) to narrow "
        "intervals and bracket the crossover"
    )
    if all(r.reason == "fixed" for r in replicates):
        head = f"{plural(len(replicates), 'replicate')} of the fixed design, each on its own launch"
    if not judged:
        return f"{head}: changes from their first runs {spread} (no noise estimate to judge them)."
    return (
        f"{head}: {within} of {len(judged)} within the noise of their first run (95% band for "
        f"a pair); changes {spread}."
    )

"""The first screen's checks line: which explanations of a surprising change the reruns tested
and how they came out (warm-up, an odd server instance), whether the arms' outputs agree, and
how many requests and measurements failed — counted once per (arm, point) over the primary
metric's cells (`checks`), then said in one line of marks (`checks_line`).
Template: `templates/sections/checks.md.j2`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import (
    Caveat,
    CaveatKind,
    CheckOutcome,
    Explanation,
    Rerun,
    RerunKind,
    Verdict,
)
from matrixrun.core.words import plural
from matrixrun.report import fmt
from matrixrun.report.inputs import RunInputs
from matrixrun.report.section import Section
from matrixrun.report.sections import simulation
from matrixrun.rundir.settings import RunSettings


@dataclass(frozen=True)
class ExplanationCheck:
    """What the reruns that tested one explanation (warm-up, odd instance) showed."""

    explanation: Explanation
    outcome: CheckOutcome  # falsified only when every test of it falsified it
    reruns: list[Rerun]  # the tests with that outcome (the evidence), the one to cite first
    tests: int = 0  # how many reruns tested it, whatever they showed
    caveat: Caveat | None = None  # the analysis's warm-up finding over all of an arm's pairs


@dataclass(frozen=True)
class Checks:
    explanations: list[ExplanationCheck]
    agreement: dict[str, float]  # candidate -> output agreement with the baseline
    suspect: list[str]
    failed_measurements: int
    failed_requests: int
    total_requests: int
    replicates: list[Rerun] = field(default_factory=list)  # routine reruns, no explanation
    gate_errors: dict[str, str] = field(default_factory=dict)  # arm -> why its gate failed
    #: where warm runs were set aside, so cold was compared with cold (`analysis.warm`)
    cold_at: list[str] = field(default_factory=list)
    #: a warm-up of some arms only: (the arms it was confirmed on, the arms measured warm
    #: that showed none) — empty unless both lists are
    one_arm: tuple[list[str], list[str]] = ([], [])


def checks(verdict: Verdict) -> Checks:
    """The explanations the reruns tested and how they came out, the output agreement and the
    failures, counted once per (arm, point) over the primary metric's cells."""
    by_kind: dict[Explanation, list[Rerun]] = {}
    replicates = []
    for r in verdict.reruns:
        if r.tests == Explanation.REPLICATE or r.outcome is None:
            replicates.append(r)
        else:
            by_kind.setdefault(r.tests, []).append(r)
    explanations = []
    for kind, tests in by_kind.items():
        outcomes = {r.outcome for r in tests}
        if outcomes == {CheckOutcome.FALSIFIED}:
            outcome = CheckOutcome.FALSIFIED
        elif CheckOutcome.CONFIRMED in outcomes:
            outcome = CheckOutcome.CONFIRMED
        else:
            outcome = CheckOutcome.NOT_SETTLED
        # the evidence that decided it: the tests with that outcome, the first one run first;
        # never a test the rerun log words otherwise
        cited = [r for r in tests if r.outcome == outcome] or tests
        explanations.append(ExplanationCheck(kind, outcome, cited, len(tests)))
    # The analysis's own warm-up finding (over all of an arm's repeats) outranks single
    # reruns: a line saying "ruled out" beside a warm-up caveat would contradict it. It is
    # cited by the reruns that confirmed it, else by its own numbers (the caveat's).
    found = [c for c in verdict.caveats if c.kind == CaveatKind.WARMUP]
    if found:
        explanations = [e for e in explanations if e.explanation != Explanation.WARMUP]
        warm = by_kind.get(Explanation.WARMUP, [])
        confirmed = [r for r in warm if r.outcome == CheckOutcome.CONFIRMED]
        explanations.insert(
            0,
            ExplanationCheck(
                Explanation.WARMUP, CheckOutcome.CONFIRMED, confirmed, len(warm), found[0]
            ),
        )
    seen: dict[tuple[str, str, str], tuple[int, int, int]] = {}
    for sl, _cand, cell in verdict.comparisons():
        for arm in (cell.baseline, cell.candidate):
            seen[(sl, arm.arm, cell.point_id)] = (
                arm.failed_measurements,
                arm.failed_requests,
                arm.total_requests,
            )
    agreement: dict[str, float] = {}
    suspect: list[str] = []
    for sl_result in verdict.slices:
        for c in sl_result.candidates:
            if c.correctness is not None:
                agreement[c.candidate] = min(agreement.get(c.candidate, 1.0), c.correctness)
            if c.suspect and c.candidate not in suspect:
                suspect.append(c.candidate)
    return Checks(
        cold_at=_cold_at(verdict),
        one_arm=_one_arm(verdict),
        explanations=explanations,
        agreement=agreement,
        suspect=suspect,
        failed_measurements=sum(v[0] for v in seen.values()),
        failed_requests=sum(v[1] for v in seen.values()),
        total_requests=sum(v[2] for v in seen.values()),
        replicates=replicates,
        gate_errors=dict(verdict.settings.correctness_errors),
    )


def _cold_at(verdict: Verdict) -> list[str]:
    """The points where warm runs were set aside (either arm), in axis order."""
    xs = sorted({w.x for w in verdict.warm_aside if w.x is not None})
    return [fmt.x(x) for x in xs] + sorted({w.point_id for w in verdict.warm_aside if w.x is None})


def _one_arm(verdict: Verdict) -> tuple[list[str], list[str]]:
    """A warm-up confirmed on some arms while others, measured warm at a point where those
    arms' warm runs were set aside (a warm rerun that ruled the warm-up out there), showed
    none: the first-run (JIT) explanation of those arms alone, a finding in itself. Empty
    lists unless there are both."""
    confirmed = sorted(
        {c.arm for c in verdict.caveats if c.kind == CaveatKind.WARMUP and c.arm is not None}
    )
    aside = {(w.slice, w.point_id) for w in verdict.warm_aside}
    none = sorted(
        {
            r.arm
            for r in verdict.reruns
            if r.kind == RerunKind.WARM
            and r.tests == Explanation.WARMUP
            and r.outcome == CheckOutcome.FALSIFIED
            and (r.slice, r.point_id) in aside  # warm at a point where the others warmed up
        }
        - set(confirmed)
    )
    return (confirmed, none) if confirmed and none else ([], [])


def _warm_detail(c: Checks, axis: str) -> str:
    """After a confirmed warm-up: where cold was compared with cold, and whether the warm-up
    is some arms' only."""
    out = ""
    if c.cold_at:
        out += f"; compared cold with cold at {axis} {', '.join(c.cold_at)}, warm runs set aside"
    confirmed, none = c.one_arm
    if confirmed:
        names = ", ".join(f"`{a}`" for a in confirmed)
        others = ", ".join(f"`{a}`" for a in none)
        out += (
            f"; a warm-up of {names} only ({others} measured warm there showed none): the "
            f"first-run JIT/warm-up explanation holds for {names} alone, a finding in itself"
        )
    return out


def _fewest_launches(verdict: Verdict) -> int:
    """The fewest server launches any arm of a primary cell ran on: what a fixed design's
    checks line may say every cell had (a failed run or a trimmed round leaves fewer than
    max_runs)."""
    cells = [c for _, _, c in verdict.comparisons(verdict.settings.primary)]
    return min((len(set(a.instances)) for c in cells for a in (c.baseline, c.candidate)), default=0)


# ------------------------------------------------------------------------------ words

EXPLANATION_WORDS = {Explanation.WARMUP: "warm-up", Explanation.INSTANCE: "an odd server instance"}


OK, WARN, BAD = "✅", "⚠️", "❌"

#: what would settle a check that one test left open (the rerun log says it at length)
SETTLE = {
    Explanation.WARMUP: "more warm reruns",
    Explanation.INSTANCE: "another fresh launch",
}


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


def _cite(e: ExplanationCheck, axis: str) -> str:
    """The evidence that decided a check: the first rerun with its outcome (and how many
    tests there were), or the analysis's warm-up finding in its own numbers."""
    if e.caveat is not None and not e.reruns:
        c = e.caveat
        return (
            f"later runs on a server beat the first by {fmt.change(math.expm1(c.value or 0.0))} "
            f"on average, {plural(c.count or 0, 'pair')}: see the caveats"
        )
    if not e.reruns:
        return "see the rerun log"
    cite = _rerun_numbers(e.reruns[0]).replace(" at ", f" at {axis} ", 1)
    if e.tests > 1:
        cite += f"; {e.tests} tests"
    if e.outcome == CheckOutcome.NOT_SETTLED:
        cite += f"; {SETTLE.get(e.explanation, 'more runs')} would settle it"
    return cite


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
        cite = _cite(e, axis)
        if e.outcome == CheckOutcome.FALSIFIED:
            items.append(f"Ruled out: {words} {OK} ({cite})")
        elif e.outcome == CheckOutcome.CONFIRMED:
            if e.explanation == Explanation.WARMUP:
                cite += _warm_detail(c, axis)
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
    elif c.gate_errors:  # a gate that could not run is a failure, never a quiet "not checked"
        arm, why = next(iter(c.gate_errors.items()))
        more = f" and {len(c.gate_errors) - 1} more" if len(c.gate_errors) > 1 else ""
        items.append(
            f"outputs not checked: the correctness gate failed {BAD} (`{arm}`{more}: {why})"
        )
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


# ------------------------------------------------------------------------------ the section


def of(verdict: Verdict, settings: RunSettings, simulated: bool) -> str:
    """The checks line of a run: a fixed design says how many launches every cell had, a
    spec whose cells each ran after an unmeasured copy of themselves says so."""
    facts = settings.spec
    s = verdict.settings
    return checks_line(
        checks(verdict),
        simulated,
        facts is None,
        s.axis,
        copied=facts is not None and facts.workload.warmup_requests == "cell",
        fixed=_fewest_launches(verdict) if s.design == "fixed" else None,
    )


def _build(inputs: RunInputs) -> str:
    simulated = simulation.of(inputs.measurements, inputs.settings, inputs.env) is not None
    return of(inputs.verdict, inputs.settings, simulated)


#: The checks line, on the first screen (in the headline's partial).
SECTION = Section("checks", None, _build)

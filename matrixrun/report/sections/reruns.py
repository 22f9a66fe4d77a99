"""The rerun log: every rerun kept beside its first run — why the verify policy asked for it (the
verify event's reason, as data), on which server, what it showed, and for a rerun that tested
an explanation (warm-up, an odd server) whether it ruled it out; routine replicates in one
line; and why the log is empty when it is. Template: `templates/sections/reruns.md.j2`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from pydantic import ValidationError

from matrixrun.core.metrics import higher_is_better, unit
from matrixrun.core.rerun_reason import RerunWhy, WhyKind
from matrixrun.core.tuning import FUTILITY, WARMUP_Z
from matrixrun.core.verdict import (
    AnalysisSettings,
    CheckOutcome,
    Comparison,
    Explanation,
    Rerun,
    RerunKind,
    Verdict,
)
from matrixrun.core.words import plural
from matrixrun.report import fmt, wording
from matrixrun.report.inputs import RunInputs
from matrixrun.report.section import Section, Trim
from matrixrun.report.wording.verdicts import cell_text

# ------------------------------------------------------------------------------ words


def _effect(cell: Comparison | None, metric: str) -> str:
    d = cell.d if cell is not None else None
    if d is None:
        return "change"
    if higher_is_better(metric):
        return "speed-up" if d > 0 else "slowdown"
    return "improvement" if d > 0 else "regression"


def rerun_server(r: Rerun) -> str:
    return (
        "same warm server " if r.kind == RerunKind.WARM else "fresh server "
    ) + f"`{r.instance}`"


#: the level of a warm check's one-sided test (`analysis.reruns.warm_floor`), as printed
WARM_LEVEL = fmt.setting_percent(round(NormalDist().cdf(WARMUP_Z), 3))
#: what would settle a check that is not settled
SETTLE_WARM = (
    "more warm reruns at this point (or a smaller σ, from more replicates) would settle it"
)
SETTLE_INSTANCE = (
    "another fresh launch at this point (or a smaller σ, from more replicates) would settle it"
)


def rerun_showed(
    r: Rerun, cell: Comparison | None, where: str, s: AnalysisSettings, aside: bool = False
) -> str:
    """'the slowdown at concurrency 256 is not warmup: warm rerun 515.77 vs first run 515.58
    tok/s (+0.04%; noise explains up to +9.1% for one pair, 95% one-sided) — the JIT/warmup
    explanation is falsified.' Each check's sentence prints the band its test used, so
    "within noise" never stands beside "confirmed" or "falsified"."""
    if r.value is None or r.first_value is None:
        failed = "the rerun failed" if r.value is None else "the first run failed"
        return f"{failed}, so it shows nothing about the explanation."
    margin = fmt.margin(s.margin_for(r.metric))
    numbers = (
        f"{fmt.exact(r.value)} vs first run {fmt.exact(r.first_value)} {unit(r.metric)}".rstrip()
    )
    delta = fmt.change(r.change_vs_first or 0.0, 2)
    band = f"±{fmt.percent(r.noise_band)}" if r.noise_band is not None else margin
    within = f"within noise, {band}" if r.matches_first else f"beyond noise, {band}"
    alone = (
        f"; on its own the rerun gives {fmt.change(r.alone)} vs `{s.baseline}`"
        if r.alone is not None
        else ""
    )
    if r.tests == Explanation.WARMUP:
        return _warm_showed(r, cell, where, numbers, (delta, alone), aside)
    if r.tests == Explanation.INSTANCE:
        bits = f"{delta}, {within}{alone}" if r.noise_band is not None else delta + alone
        if r.outcome == CheckOutcome.FALSIFIED and r.alone is not None:
            # what decided it: the effect on the fresh server alone, beyond the pair's band
            bits = (
                f"{delta}; on its own the rerun gives {fmt.change(r.alone)} vs "
                f"`{s.baseline}`, beyond noise, {band}"
            )
        return _instance_showed(r, cell, where, f"fresh server {numbers} ({bits})")
    kind = "on the same server" if r.kind == RerunKind.WARM else "on a fresh server"
    return f"replicate {kind}: {numbers} ({delta}, {within})."


def _warm_showed(
    r: Rerun,
    cell: Comparison | None,
    where: str,
    numbers: str,
    delta: tuple[str, str],
    aside: bool,
) -> str:
    effect = f"the {_effect(cell, r.metric)} at {where}"
    noise = (
        f"; noise explains up to +{fmt.percent(r.noise_band)} for one pair, {WARM_LEVEL} one-sided"
        if r.noise_band is not None
        else "; no noise estimate to test it against"
    )
    rerun = f"warm rerun {numbers} ({delta[0]}{noise}{delta[1]})"
    if r.outcome == CheckOutcome.CONFIRMED:
        return (
            f"the first run at {where} was held back: {rerun}, better than the first run "
            "beyond the margin and beyond what noise explains — the JIT/warmup explanation is "
            "confirmed for that "
            + (
                "first run; the warm run is set aside here (another condition than the "
                "cold runs: cold is compared with cold, see the caveats)."
                if aside
                else "first run; both runs are kept and counted (whether a verdict rests on "
                "cold first runs is judged over all of the arm's repeats: see the caveats)."
            )
        )
    if r.outcome == CheckOutcome.FALSIFIED:
        drift = (
            ", worse than the first run; the server drifts"
            if r.noise_band is not None
            and r.change_vs_first is not None
            and (r.change_vs_first > 0) != higher_is_better(r.metric)
            and abs(r.change_vs_first) > r.noise_band
            else ""
        )
        return (
            f"{effect} is not warmup: {rerun}{drift}; a warm-up large enough to explain it "
            "would have shown beyond that — the JIT/warmup explanation is falsified."
        )
    return (
        f"one warm pair cannot tell warm-up from noise at {where}: {rerun} — the JIT/warmup "
        f"explanation is neither confirmed nor falsified; {SETTLE_WARM}."
    )


def _instance_showed(r: Rerun, cell: Comparison | None, where: str, rerun: str) -> str:
    effect = f"the {_effect(cell, r.metric)} at {where}"
    if r.outcome == CheckOutcome.FALSIFIED:
        return (
            f"{effect} is not an odd server instance: {rerun}, so the fresh server "
            "reproduces it beyond noise — the odd-instance explanation is falsified."
        )
    if r.outcome == CheckOutcome.CONFIRMED:
        return (
            f"{effect} does not reproduce on a fresh server: {rerun}, the two servers "
            "differing beyond noise — the odd-instance explanation is confirmed."
        )
    return (
        f"one fresh server does not settle {effect}: {rerun} — the odd-instance "
        f"explanation is neither confirmed nor falsified; {SETTLE_INSTANCE}."
    )


def _undecided_why(w: RerunWhy) -> str:
    """An undecided cell's rerun: which arm's n limits it, and the futility rule's chance."""
    cell = f"undecided ({cell_text(w.cell)}); " if w.cell is not None else ""
    if w.no_sigma:
        return (
            f"{cell}{w.arm}'s n limits the interval; no σ measured yet, so runs are "
            "needed to measure it"
        )
    chance = w.chance or 0.0
    rule = (
        f"below the rule's {FUTILITY:.0%}, but one run per arm is too few to give a cell up on"
        if chance < FUTILITY
        else "the futility rule's input, not a prediction"
    )
    return (
        f"{cell}{w.arm}'s n limits the interval; an optimistic estimate gives {w.max_runs} "
        f"runs per arm a {chance:.0%} chance to settle it ({rule})"
    )


def rerun_why(w: RerunWhy) -> str:
    """Why the verify policy asked for a rerun (from the verify event's numbers)."""
    if w.kind == WhyKind.WARM_CHECK:
        return (
            f"first-run change {fmt.change(w.change or 0.0)} vs {w.baseline} exceeds the surprise "
            f"threshold {w.surprise or 0.0:.0%} with {w.arm} the slower arm: a warm rerun "
            "tests first-run JIT compile/warmup"
        )
    if w.kind == WhyKind.WARM_PARTNER:
        return (
            f"the other arm's confirmed first-run warm-up could account for this cell "
            f"({fmt.change(w.change or 0.0)}) and {w.arm} was never measured warm here: "
            f"{w.arm} on a fresh launch, then once more on it, warm, tells whether both arms "
            "warm up alike (then cold is compared with cold)"
        )
    if w.kind == WhyKind.CAPPED:
        return (
            f"the cell's time cap ended {w.arm}'s only run here with requests cut or never "
            "sent, so it is not compared: once more, on a fresh launch"
        )
    if w.kind == WhyKind.AA:
        return "A/A: the baseline again on a fresh server measures the server-to-server spread"
    if w.kind == WhyKind.UNDECIDED:
        return _undecided_why(w)
    if w.kind == WhyKind.INSTANCE_CHECK:
        return (
            f"first-run change {fmt.change(w.change or 0.0)} is surprising: a rerun on a freshly "
            "launched server tests whether the first server was odd"
        )
    if w.kind == WhyKind.SIGMA_REPLICATE:
        return (
            f"a fresh-server replicate so the pooled σ has {w.target_df} degrees of freedom "
            "(the analysis prefers fresh-server σ once one exists)"
        )
    if w.kind == WhyKind.UNSTABLE_LAUNCH:
        return (
            f"launches of `{fmt.user_plain(w.arm or '')}` disagree here by "
            f"{fmt.percent(w.change or 0.0)}, beyond run noise: one more launch tells which "
            "was odd"
        )
    if w.kind == WhyKind.FIXED_DESIGN:
        return (
            f"fixed design (verify.design: fixed): every cell {w.max_runs} times, each run on "
            "its own launch, whatever the data say"
        )
    if w.kind == WhyKind.CAPACITY and w.bracket is not None:
        return (
            f"a new cell of `{fmt.user_plain(w.arm or '')}` at {fmt.x(w.x)}, the geometric "
            f"midpoint of {w.axis} {fmt.x(w.bracket[0])}–{fmt.x(w.bracket[1])} inside its "
            "capacity bracket under the SLO: to narrow the bracket"
        )
    if w.kind == WhyKind.CAPACITY_NEAR:
        return (
            f"`{fmt.user_plain(w.arm or '')}` at {w.axis} {fmt.x(w.x)} is within noise of an "
            "SLO bound (its interval straddles it), so it ends neither side of the capacity "
            "bracket: one more run narrows the interval"
        )
    if w.kind == WhyKind.BISECTION and w.bracket is not None:
        return (
            f"the geometric midpoint of the crossover bracket {w.axis} {fmt.x(w.bracket[0])}–"
            f"{fmt.x(w.bracket[1])}: a new cell at {fmt.x(w.x)} to narrow it"
        )
    return (
        f"brackets the crossover at {w.axis} {w.x or 0.0:g}: a second run so the bracket rests "
        "on more than one"
    )


def no_reruns(v: Verdict, max_runs: int | None, ingested: bool) -> str:
    """Why the log is empty, said plainly."""
    if ingested:
        return "The input files hold one run per cell and arm; nothing was rerun."
    if max_runs is not None and max_runs < 2:
        return "The spec allows one run per cell (verify.max_runs: 1), so the policy reran nothing."
    flagged = [c for _, _, c in v.comparisons() if c.surprise or c.verdict == "undecided"]
    if not flagged:
        return (
            "No cell was surprising (|change| above the surprise threshold) or "
            "undecided, so the verify policy had nothing to rerun."
        )
    return (
        f"{plural(len(flagged), 'cell')} {'was' if len(flagged) == 1 else 'were'} surprising "
        "or undecided, but no rerun was "
        "recorded (reruns disabled, budget spent, or the run stopped before stage 2)."
    )


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
    # counted where they have a value, so the count and the "k of n" beside it agree; a run
    # with none (it fell behind on a busy host and was measured again, or failed) said apart
    head = (
        f"{plural(len(ok), 'routine replicate')} ({fresh} on fresh servers) to narrow "
        "intervals and bracket the crossover"
    )
    # a fixed design's replicates, and any first run measured again after it fell behind
    if any(r.reason == "fixed" for r in replicates) and all(
        r.reason in ("fixed", "first") for r in replicates
    ):
        head = f"{plural(len(ok), 'replicate')} of the fixed design, each on its own launch"
    missing = len(replicates) - len(ok)
    tail = (
        f" {plural(missing, 'more run')} carried no value (fell behind or failed)."
        if missing
        else ""
    )
    if not judged:
        return (
            f"{head}: changes from their first runs {spread} (no noise estimate to judge "
            f"them).{tail}"
        )
    return (
        f"{head}: {within} of {len(judged)} within the noise of their first run (95% band for "
        f"a pair); changes {spread}.{tail}"
    )


# ------------------------------------------------------------------------------ the section


@dataclass
class RerunEntry:
    where: str
    arm: str
    attempt: int
    reason: str
    reason_text: str
    server: str
    why: str
    showed: str
    outcome: str | None
    cell_now: str
    error: str


def verify_whys(events: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """(cell id, attempt) → why the verify event that asked for that rerun asked, in words
    (the runner records the attempt the rerun will have, and the reason as data)."""
    out: dict[tuple[str, int], str] = {}
    for e in events:
        if e.get("event") == "verify" and e.get("cell") and isinstance(e.get("attempt"), int):
            why = e.get("why")
            try:
                text = rerun_why(RerunWhy.model_validate(why))
            except ValidationError:  # not a reason this version records: shown as written
                text = str(why or "")
            out[(str(e["cell"]), int(e["attempt"]))] = text
    return out


#: Runs labelled by the check that asked for them rather than by their reason: a warm-up
#: partner check's two runs (a fresh-server run's reason and a warm one's), a capacity
#: midpoint's (reason `bisection`, as a crossover's), a load near an SLO bound's
#: (`undecided`, as an undecided cell's).
KIND_LABELS: dict[str, str] = {
    WhyKind.WARM_PARTNER.value: "warm-up partner check",
    WhyKind.CAPACITY.value: "capacity midpoint",
    WhyKind.CAPACITY_NEAR.value: "load within noise of an SLO bound",
}


def labelled_runs(events: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """(cell id, attempt) → its label, for the runs `KIND_LABELS` names, from their verify
    events."""
    out: dict[tuple[str, int], str] = {}
    for e in events:
        why = e.get("why")
        if e.get("event") != "verify" or not isinstance(why, dict):
            continue
        label = KIND_LABELS.get(str(why.get("kind")))
        if label is not None and isinstance(e.get("attempt"), int):
            out[(str(e["cell"]), int(e["attempt"]))] = label
    return out


def rerun_entries(verdict: Verdict, events: Sequence[Mapping[str, Any]]) -> list[RerunEntry]:
    """Every rerun of the primary metric, with why it was run and what it showed."""
    settings = verdict.settings
    axis = settings.axis
    whys = verify_whys(events)
    labelled = labelled_runs(events)
    aside = {(w.slice, w.point_id, w.arm) for w in verdict.warm_aside}
    cells: dict[tuple[str, str, str], Comparison] = {
        (s, c, cell.point_id): cell for s, c, cell in verdict.comparisons()
    }
    out = []
    for r in verdict.reruns:
        cell = cells.get((r.slice, r.candidate, r.point_id))
        where = wording.measured_at(axis, r.point, r.slice)
        out.append(
            RerunEntry(
                where=where,
                arm=r.arm,
                attempt=r.attempt,
                reason=r.reason,
                reason_text=labelled.get(
                    (r.cell_id, r.attempt), wording.REASON_WORDS.get(r.reason, r.reason)
                ),
                server=rerun_server(r),
                why=fmt.shorten(whys.get((r.cell_id, r.attempt), "")),
                showed=rerun_showed(
                    r, cell, where, settings, (r.slice, r.point_id, r.arm) in aside
                ),
                outcome=r.outcome.value if r.outcome is not None else None,
                cell_now=wording.cell_text(cell) if cell is not None else "",
                error=fmt.shorten(r.error) if r.error else "",
            )
        )
    return out


@dataclass
class RerunLog:
    """The rerun log: every rerun (`entries`), those that tested an explanation (`checks`),
    the routine replicates in one line (`routine`), and why the log is empty (`none`)."""

    entries: list[RerunEntry]
    checks: list[RerunEntry]
    routine: str | None
    none: str | None


def of(inputs: RunInputs) -> RerunLog:
    verdict, facts = inputs.verdict, inputs.settings.spec
    entries = rerun_entries(verdict, inputs.events)
    tested = [i for i, r in enumerate(verdict.reruns) if r.outcome is not None]
    routine = [r for r in verdict.reruns if r.outcome is None]
    empty = (
        None if entries else no_reruns(verdict, facts.max_runs if facts else None, facts is None)
    )
    return RerunLog(
        entries=entries,
        checks=[entries[i] for i in tested if i < len(entries)],
        routine=rerun_summary(routine) if routine else None,
        none=empty,
    )


def trim(part: RerunLog, keep: int = 20) -> str | None:
    """The size budget's: the rerun log after its first `keep` entries."""
    if len(part.entries) <= keep:
        return None
    total = len(part.entries)
    part.entries = part.entries[:keep]
    return f"the rerun log after its first {keep} of {total} entries"


SECTION = Section("reruns", 80, of, (Trim(50, trim),))

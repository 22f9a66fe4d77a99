"""The noise and confidence section: σ per metric (where it came from, on how many degrees of
freedom), the interval level and margin, the correction for looking at many cells, and the
run's caveats, with their sentences (a cell's own notes are `wording.verdicts`').
Template: `templates/sections/noise.md.j2`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from matrixrun.core.verdict import AnalysisSettings, Caveat, CaveatKind, Sigma, SigmaSource, Verdict
from matrixrun.core.words import plural
from matrixrun.report import fmt
from matrixrun.report.section import Section
from matrixrun.report.wording.verdicts import WHAT_PINS_SIGMA, label

# ------------------------------------------------------------------------------ words


SOURCE_WORDS: dict[SigmaSource, str] = {
    SigmaSource.FRESH_SERVER: "fresh-server replicates",
    SigmaSource.WARM: "warm repeats on the same server: within-instance only, may understate",
    SigmaSource.PRIOR: "declared prior, not measured",
    SigmaSource.NONE: "no noise estimate",
}


#: Below this many degrees of freedom σ is not stated as a measurement (issue 33: "σ 0.00056%
#: on 1 df"): a 90% interval for σ on 1 df runs from 0.51× to 16× the estimate (√(1/χ²₁)).
FEW_DF = 2


def sigma_text(s: Sigma, short: bool = False) -> str:
    """'σ = 1.2% (df = 4, fresh-server replicates)'; on fewer than `FEW_DF` df 'σ ≈ 0.3% on
    only 1 df', with (unless `short`, inside another sentence) why that is no measurement."""
    if s.source == SigmaSource.NONE or s.value is None:
        return "no noise estimate (every cell has n = 1 and no noise prior is declared)"
    if s.df is None:
        return f"σ = {fmt.percent(s.value)} ({SOURCE_WORDS[s.source]})"
    if s.df < FEW_DF and short:
        return f"σ ≈ {fmt.percent(s.value)} on only {s.df:g} df"
    if s.df < FEW_DF:
        text = (
            f"σ ≈ {fmt.percent(s.value)} on only {s.df:g} df ({SOURCE_WORDS[s.source]}): too "
            "few to know the noise (on 1 df a 90% interval for the true σ runs from half to 16 "
            f"times this estimate); {WHAT_PINS_SIGMA}"
        )
    else:
        text = f"σ = {fmt.percent(s.value)} (df = {s.df:g}, {SOURCE_WORDS[s.source]})"
    if s.history:
        # a prior from the results store (verify.noise_from: auto) names its runs in its label
        stored = s.history.startswith("the results store")
        which = (
            "a calibration run (verify.design: fixed) measured, its launch part included"
            if s.history_fixed
            else "earlier runs of this engine, model and hardware measured"
            if stored
            else "an earlier run measured"
        )
        whose, key = ("their", "verify.noise_from: auto") if stored else ("that run's", "")
        text += (
            f", pooled with the noise {which} ({s.history_df:g} df, "
            f"`{fmt.user_plain(s.history)}`, {key or 'verify.noise_from'}): it holds only if "
            f"{whose} noise is this one's"
        )
    if s.fixed_design:
        text += (
            "; measured by a fixed design, so a later run naming this one in verify.noise_from "
            "pools all of it, the launch part included"
        )
    return text


def level_text(s: AnalysisSettings) -> str:
    if s.looks == 1:
        fixed = ": a fixed design, every cell judged once at the end" if s.design == "fixed" else ""
        return f"{fmt.confidence(s.level)} confidence (one look{fixed})"
    head = f"{fmt.setting_percent(s.confidence)} confidence over {s.looks} planned looks"
    if s.spending == "equal":
        return f"{head} (Bonferroni): each interval is a {fmt.confidence(s.level)} interval"
    if s.spending == "information":
        levels = ", ".join(fmt.confidence(s.level_at(k)) for k in range(1, s.states + 1))
        totals = ", ".join(str(k + 1) for k in range(1, s.states + 1))
        return (
            f"{fmt.setting_percent(s.confidence)} confidence spent over every state a cell "
            f"can stop in (Lan–DeMets O'Brien–Fleming on the share of its planned runs): a "
            f"cell's interval is at {levels} with {totals} runs in both arms together"
        )
    levels = ", ".join(fmt.confidence(s.level_at(k)) for k in range(1, s.looks + 1))
    return (
        f"{head} (α split over each cell's data states, more to later ones): a cell's "
        f"interval is at {levels} after 0, 1, 2… stage-2 rounds gave it runs"
    )


def multiplicity(v: Verdict) -> str:
    s = v.settings
    judged = v.cells_judged
    return (
        f"{plural(judged, 'cell')} judged at {fmt.confidence(s.level)} confidence"
        + (" or stricter: at most about " if s.looks > 1 else ": about ")
        + f"{judged * (1 - s.level):.1f} may flag by chance; no multiplicity correction is "
        "applied, so treat an isolated flag as a lead to re-measure."
    )


def caveat(c: Caveat, v: Verdict) -> str:
    """One run-level caveat in words."""
    s = v.settings
    k = c.kind
    if k == CaveatKind.NO_BASELINE:
        return f"the baseline arm {c.arm!r} has no measurements; arms seen: " + ", ".join(c.arms)
    if k == CaveatKind.WARM_SIGMA:
        sigma = next(x for x in v.sigma if x.metric == c.metric)
        return (
            f"σ for {c.metric} comes from warm repeats on the same server "
            f"({sigma_text(sigma, short=True)}): "
            "cross-server noise, which separates arms, may be larger; rerun some cells on a "
            "fresh server."
        )
    if k == CaveatKind.NO_SIGMA:
        return (
            f"no noise estimate for {c.metric}: every cell has n = 1 and no prior is "
            "declared, so no cell can be decided."
        )
    if k == CaveatKind.SIGMA_BELOW_PRIOR:
        assert c.value is not None and c.reference is not None
        return (
            f"measured σ for {c.metric} ({fmt.percent(c.value)}) is less than half the "
            f"declared prior ({fmt.percent(c.reference)})."
        )
    if k == CaveatKind.SIGMA_DF1:
        return (
            f"σ for {c.metric} has df = 1 (t = {c.value or 0.0:.1f}): "
            "one pair of repeats buys little."
        )
    if k == CaveatKind.WARMUP:
        return (
            f"first-run warmup on {c.arm}: its later runs on a server beat the first by "
            f"{fmt.change(math.expm1(c.value or 0.0))} on average ({plural(c.count or 0, 'pair')}, "
            f"{c.metric}), beyond the margin and beyond what noise explains: a "
            "verdict its cold first runs could account for is undecided (warm each cell "
            "up before measuring it: workload.warmup_requests: cell runs an unmeasured copy "
            "of it first; with transformers serve on an H200 one wave at the cell's "
            "concurrency was not enough)."
        )
    if k == CaveatKind.WARM_ASIDE:
        where = ", ".join(fmt.x(x) for x in c.xs)
        return (
            f"{c.arm}'s warm runs at {s.axis} {where} are left out of its comparison and of "
            f"the noise: there its later runs on a server beat the first by "
            f"{fmt.change(math.expm1(c.value or 0.0))} ({plural(c.count or 0, 'pair')}, "
            f"{c.metric}), a first-run warm-up at those points, so a warm run measures another "
            "condition than the cold runs it would be averaged with; cold is compared with "
            "cold there, and the warm-up check asks whether the other arm warms up alike."
        )
    if k == CaveatKind.FAILED_RUNS:
        return (
            f"{c.arm} ({c.role}) at {label(s.axis, c.x, c.point or {})}"
            + (f" [{c.slice}]" if c.slice else "")
            + f": {c.count} failed measurement(s): "
            + "; ".join(c.errors)
        )
    return _run_caveat(c, v)


def _run_caveat(c: Caveat, v: Verdict) -> str:
    s = v.settings
    k = c.kind
    if k == CaveatKind.NO_SHARED_POINT:
        return (
            f"{c.arm} shares no measured point with the baseline {s.baseline!r}: "
            "nothing to compare."
        )
    if k == CaveatKind.SUSPECT:
        return (
            f"{c.arm}'s outputs agree with the baseline's on only {fmt.share(c.value or 0.0)} of "
            f"checks (< {fmt.setting_percent(c.reference or 0.0)}): treat its speed as suspect."
        )
    if k == CaveatKind.PROVISIONAL:
        return (
            f"{c.count} of {c.total} cells have n = 1 in an arm: their verdicts are "
            "provisional (the interval exists only through the pooled or declared σ)."
        )
    if k == CaveatKind.ONE_SERVER:
        return (
            f"{c.count} of {c.total} cells have an arm with repeats on one server (warm "
            "reruns): n counts all runs, but their interval counts the repeats on each server "
            "once (σ is the server-to-server one; a warm rerun cannot average away its "
            "server's offset)."
        )
    return multiplicity(v)


# ------------------------------------------------------------------------------ the section


@dataclass
class SigmaLine:
    metric: str
    text: str
    source: str
    primary: bool


@dataclass
class NoiseSection:
    """The noise and confidence section: σ per metric, the levels, and the caveats."""

    metrics: list[SigmaLine]
    level: str
    margin: str
    multiplicity: str
    warnings: list[str]


def of(verdict: Verdict) -> NoiseSection:
    s = verdict.settings
    return NoiseSection(
        metrics=[
            SigmaLine(
                metric=x.metric,
                text=sigma_text(x),
                source=x.source.value,
                primary=x.metric == s.primary,
            )
            for x in verdict.sigma
        ],
        level=level_text(s),
        margin=fmt.margins(s.margin, s.margins, s.metrics),
        multiplicity=multiplicity(verdict),
        warnings=[caveat(c, verdict) for c in verdict.caveats],
    )


SECTION = Section("noise", 90, lambda inputs: of(inputs.verdict))

"""The document's first words when launches of one configuration disagree beyond run noise
(`analysis/launches.py`): which arm, at which points, each launch's value, by how much — and
that this, not the flag, is what limits the comparison there. Also the one line a reader gets
when the check could not run, so silence never reads as "stable"."""

from __future__ import annotations

from collections.abc import Collection

from matrixrun.core.metrics import unit
from matrixrun.core.verdict import LaunchCheck, LaunchSpread, Verdict
from matrixrun.report import fmt
from matrixrun.report.section import Section
from matrixrun.report.wording.verdicts import label


def _values(s: LaunchSpread, unit: str) -> str:
    vals = [fmt.value(v.value) for v in s.launches]
    runs = (
        ""
        if all(v.n == 1 for v in s.launches)
        else " (" + ", ".join(f"{v.n} run{'s' if v.n > 1 else ''}" for v in s.launches) + ")"
    )
    return f"{fmt.join_words(vals)} {unit}{runs}"


def _one(s: LaunchSpread, axis: str, unit: str) -> str:
    return (
        f"at {label(axis, s.x, s.point)}{' [' + s.slice + ']' if s.slice else ''} its "
        f"{len(s.launches)} launches gave {_values(s, unit)}, the highest "
        f"{fmt.percent(s.spread)} above the lowest, "
        + (
            f"where repeats on one launch vary by σ {fmt.percent(s.run_sigma)}"
            if s.against == "repeats"
            else f"where the other configurations' launches vary by σ {fmt.percent(s.run_sigma)}"
        )
        + " (p = "
        f"{s.p:.2g} after Bonferroni over {{tested}} points)"
    )


def unstable_launches(
    check: LaunchCheck | None, axis: str, unit: str, odd: Collection[str] = ()
) -> list[str]:
    """One sentence per arm whose launches disagree; [] when none do or none were tested.
    `odd`: arms the noise model judged with a launch variance of their own."""
    if check is None or not check.unstable:
        return []
    by_arm: dict[str, list[LaunchSpread]] = {}
    for s in check.unstable:
        by_arm.setdefault(s.arm, []).append(s)
    out = []
    for arm, spreads in by_arm.items():
        tested = str(check.tested)
        parts = "; ".join(_one(s, axis, unit).replace("{tested}", tested) for s in spreads)
        out.append(
            f"**Unstable launches: `{fmt.user_plain(arm)}`** — {parts}. The same configuration "
            "launched again gives a different number, so at "
            f"{fmt.join_words([label(axis, s.x, s.point) for s in spreads])} this, not the "
            "flag, is what the comparison's uncertainty comes from"
            + (
                f" (its cells are judged with `{fmt.user_plain(arm)}`'s own launch variance, "
                "the other arms' with theirs)"
                if arm in odd
                else ""
            )
            + ": another launch of it, not more runs on these, is what narrows it."
        )
    return out


def untested(check: LaunchCheck | None) -> list[str]:
    """Where configurations ran on several launches but no cell twice on one launch, the one
    line that says launch stability went untested (so silence never reads as "stable")."""
    if check is None or check.untested_reason != "no_repeats":
        return []
    return [
        "**Launch stability not tested:** configurations ran on more than one launch, but no "
        "cell twice on one launch, so how much launches of one configuration disagree cannot "
        "be told from run noise."
    ]


# ------------------------------------------------------------------------------ the section


def of(verdict: Verdict) -> list[str]:
    """The document's first lines: the arms whose launches disagree, else the one line saying
    the check could not run (empty when it ran and found nothing)."""
    s = verdict.settings
    odd = {o.arm for x in verdict.sigma if x.metric == s.primary for o in x.odd_groups}
    return unstable_launches(verdict.launch_check, s.axis, unit(s.primary), odd) or untested(
        verdict.launch_check
    )


#: The launch check's lines, on the first screen (the headline's partial includes it).
SECTION = Section("launches", None, lambda inputs: of(inputs.verdict))

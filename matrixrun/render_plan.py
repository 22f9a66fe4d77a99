"""The plan as text for `matrixrun plan`: what will launch, what each launch measures, and what
it may cost — shown before anything runs. Pure: returns a string."""

from __future__ import annotations

from collections.abc import Mapping

from matrixrun.plan import Plan
from matrixrun.spec import Spec
from matrixrun.units import format_duration


def _flags(flags: Mapping[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in flags.items()) or "(none)"


def plan_text(spec: Spec, plan: Plan) -> str:
    c = plan.cost
    v = spec.verify
    lines = [
        f"{plan.experiment}: {plan.title}",
        f"baseline {plan.baseline}; candidate(s) {', '.join(plan.candidates)}; rows: {plan.axis}",
        "",
    ]
    for g in plan.groups:
        where = f" [{g.slice}]" if g.slice else ""
        xs = ", ".join(str(cell.x) for cell in g.cells)
        lines.append(f"launch {g.group_id}  {g.arm}{where}: {_flags(g.flags)}")
        lines.append(f"    {len(g.cells)} cells, {plan.axis} = {xs}")
    budget = f", rerun budget {format_duration(c.budget_s)}" if c.budget_s else ""
    policy = (
        f"threshold {v.threshold:.1%}, surprise {v.surprise:.0%}, max_runs {v.max_runs}"
        f"{', warm reruns' if v.warm_rerun else ''}"
        f"{', fresh-server reruns' if v.fresh_server else ''}{', A/A' if v.aa else ''}{budget}"
    )
    timed = c.time_first_pass_s is not None and c.time_worst_case_s is not None

    def when(seconds: float | None) -> str:
        return f", ≈ {format_duration(seconds)}" if timed and seconds is not None else ""

    lines += [
        "",
        f"verify policy: {policy}",
        f"best case (nothing surprising or inconclusive): {c.launches} launches, "
        f"{c.runs_first_pass} cell runs{when(c.time_first_pass_s)}",
        f"worst case (every cell to max_runs): {c.launches_worst_case} launches, "
        f"{c.runs_worst_case} cell runs{when(c.time_worst_case_s)}",
    ]
    if timed:
        lines.append("times from the spec's estimate block")
    else:
        lines.append(
            "time: add `estimate: {launch: 10m, cell: 3m}` to the spec for a time estimate"
        )
    return "\n".join(lines)

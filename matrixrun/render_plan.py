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
    lines += [
        "",
        f"first pass: {c.launches} launches, {c.runs_first_pass} cell runs",
        f"verify (threshold {v.threshold:.1%}, surprise {v.surprise:.0%}, max_runs {v.max_runs}"
        f"{', fresh-server reruns' if v.fresh_server else ''}{', A/A' if v.aa else ''}): "
        f"worst case {c.launches_worst_case} launches, {c.runs_worst_case} cell runs"
        + (f", rerun budget {format_duration(c.budget_s)}" if c.budget_s else ""),
    ]
    if c.time_first_pass_s is not None and c.time_worst_case_s is not None:
        lines.append(
            f"time: first pass ≈ {format_duration(c.time_first_pass_s)}, worst case ≈ "
            f"{format_duration(c.time_worst_case_s)} (from the spec's estimate block)"
        )
    else:
        lines.append(
            "time: add `estimate: {launch: 10m, cell: 3m}` to the spec for a time estimate"
        )
    return "\n".join(lines)

"""The plan as text for `matrixrun plan`: what will launch, what each launch measures, and what
it may cost — shown before anything runs. Pure: returns a string."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from matrixrun.core.capacity import LOAD_AXES
from matrixrun.core.metrics import higher_is_better
from matrixrun.core.tuning import MIN_FRESH_DF
from matrixrun.core.units import format_duration
from matrixrun.plan import Plan
from matrixrun.plan.rehearsal import (
    Blind,
    RehearsalSetup,
    blind_pairs,
    rehearsal_setup,
    wall_seconds,
)
from matrixrun.spec import Spec

if TYPE_CHECKING:
    from matrixrun.plan.history import NoiseHistory


def _flags(flags: Mapping[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in flags.items()) or "(none)"


def sigma_cost(plan: Plan) -> tuple[float, int, int] | None:
    """GPU time of the cheapest fresh-server σ the verify policy tops up to (`MIN_FRESH_DF`
    replicates, or every cell in a smaller matrix): relaunch the largest groups until they
    hold enough cells, one run each. (seconds, relaunches, runs); None without estimates."""
    c = plan.cost
    if c.launch_s is None or c.cell_s is None:
        return None
    need = min(MIN_FRESH_DF, c.cells)
    launches = covered = 0
    for size in sorted((len(g.cells) for g in plan.groups), reverse=True):
        if covered >= need:
            break
        launches += 1
        covered += size
    return launches * c.launch_s + need * c.cell_s, launches, need


def noise_line(history: NoiseHistory, primary: str) -> str:
    """What `verify.noise_from` brings, before anything runs: the earlier run's σ of one run on
    the primary metric and the df it rests on (what a reviewer weighs the borrowing by)."""
    s = history.sigmas.get(primary)
    if s is None or s.value is None:
        return f"noise from {history.label}: it measured no σ on {primary}; nothing is borrowed"
    size = "estimated at 0" if s.launch == 0 else f"σ_b {s.launch or 0:.1%}"
    where = (
        "pooled by df too (a fixed design: no stopping selected it)"
        if s.fixed_design
        else "only where this run relaunches nothing"
    )
    launch = (
        f"; its launch part, {size} on {s.launch_df} df, {where}" if s.launch is not None else ""
    )
    return (
        f"noise from {history.label}: {primary} σ {s.value:.1%}, run noise on "
        f"{s.run_df:g} df, pooled by df with this run's{launch}"
    )


def _pct(fraction: float) -> str:
    return f"{100 * fraction:g}%"


def decision_words(spec: Spec, code: bool = False) -> str:
    """The metric and margin that will decide, with the others' margins, for the plan and the
    PR proposal: 'p99_ttft_ms (lower is better), margin ±10% at 95% confidence; also reported:
    output_throughput ±3%'."""
    m, own = spec.metrics, spec.metrics.margins()
    primary = m.primary

    def name(metric: str) -> str:
        return f"`{metric}`" if code else metric

    def margin(metric: str) -> str:
        return f"±{_pct(own.get(metric, spec.verify.threshold))}"

    better = "higher" if higher_is_better(primary) else "lower"
    text = (
        f"{name(primary)} ({better} is better), margin {margin(primary)} at "
        f"{_pct(spec.verify.confidence)} confidence"
    )
    others = [x for x in m.secondary if x != primary]
    if others:
        text += "; also reported: " + ", ".join(f"{name(x)} {margin(x)}" for x in others)
    return text


def _bisected(spec: Spec) -> str:
    """What bisection narrows: crossover brackets, and with an SLO along a load axis each
    arm's capacity bracket (its midpoints share the crossover's limit, so the count holds)."""
    if spec.slo and spec.main_axis() in LOAD_AXES:
        return "bisection of crossover and capacity brackets"
    return "crossover bisection"


def policy_words(spec: Spec, budget_s: float | None) -> str:
    """The verify block in one line, for the plan and the PR proposal."""
    v = spec.verify
    budget = f", rerun budget {format_duration(budget_s)}" if budget_s else ""
    if v.design == "fixed":
        return (
            f"fixed design (calibration): every cell {v.max_runs} times, each run on its own "
            f"launch, judged once at the end; threshold {_pct(v.threshold)}{budget}"
        )
    return (
        f"threshold {_pct(v.threshold)}, surprise {_pct(v.surprise)}, max_runs {v.max_runs}"
        f"{', warm reruns' if v.warm_rerun else ''}"
        f"{', fresh-server reruns' if v.fresh_server else ''}{', A/A' if v.aa else ''}{budget}"
    )


def plan_text(
    spec: Spec, plan: Plan, noise: NoiseHistory | None = None, noise_note: str | None = None
) -> str:
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
    policy = policy_words(spec, c.budget_s)
    timed = c.time_first_pass_s is not None and c.time_worst_case_s is not None

    def when(seconds: float | None) -> str:
        return f", ≈ {format_duration(seconds)}" if timed and seconds is not None else ""

    lines += [
        "",
        f"decided on: {decision_words(spec)}",
        f"verify policy: {policy}",
        *([noise_line(noise, spec.metrics.primary)] if noise is not None else []),
        *([noise_note] if noise_note else []),
        *(
            [
                f"fixed design: {c.launches_worst_case} launches, {c.runs_worst_case} cell "
                f"runs{when(c.time_worst_case_s)}"
            ]
            if v.design == "fixed"
            else [
                f"best case (nothing surprising or undecided): {c.launches} launches, "
                f"{c.runs_first_pass} cell runs{when(c.time_first_pass_s)}",
                f"worst case (every cell to max_runs): {c.launches_worst_case} launches, "
                f"{c.runs_worst_case} cell runs{when(c.time_worst_case_s)}",
            ]
        ),
    ]
    if c.bisection_runs_worst_case:
        lines.append(
            f"{_bisected(spec)} (verify.bisect {v.bisect}) may add up to "
            f"{c.bisection_runs_worst_case} runs of new cells on top"
            + (", within the rerun budget" if c.budget_s is not None else "")
        )
    sigma = sigma_cost(plan)
    if c.budget_s is not None and sigma is not None and v.max_runs > 1 and c.budget_s < sigma[0]:
        lines.append(
            f"warning: the rerun budget {format_duration(c.budget_s)} is less than a "
            f"fresh-server σ with {sigma[2]} degrees of freedom costs (≈ "
            f"{format_duration(sigma[0])}: {sigma[1]} relaunch(es) and {sigma[2]} runs, before "
            "any warm rerun); with less, σ rests on a few fresh replicates (t ≥ 3 at df ≤ 3) "
            "or none and most cells stay undecided: raise verify.budget"
        )
    if timed:
        lines.append("times from the spec's estimate block")
    else:
        lines.append(
            "time: add `estimate: {launch: 10m, cell: 3m}` to the spec for a time estimate"
        )
    return "\n".join([*lines, "", *rehearsal_lines(spec, plan)])


def rehearsal_lines(spec: Spec, plan: Plan) -> list[str]:
    """What `run --rehearse` would run on and how long it takes, and — before anything runs —
    a warning for each candidate the profile cannot tell from the baseline, with the rule to
    write. Printed by `plan` and by `run --rehearse` before its first launch."""
    setup = rehearsal_setup(spec)
    wall = wall_seconds(spec, plan, setup)
    where = (
        f"the bundled profile {setup.profile.name!r} (the spec has no rehearsal.profile)"
        if setup.bundled
        else "the spec's profile"
        + ("" if setup.profile.name == "default" else f" {setup.profile.name!r}")
    )
    pace_words = (
        f"{setup.time_scale:g}× faster than modelled"
        if setup.time_scale != 1
        else "in real time" + (f" ({setup.real_time_why})" if setup.real_time_why else "")
    )
    chosen = (
        ", chosen so the load client keeps up" if setup.bundled and setup.time_scale != 1 else ""
    )
    lines = [
        f"rehearsal (--rehearse): {where}, {pace_words}{chosen}; about "
        f"{format_duration(wall.first_pass_s)} for the first pass, at most "
        f"{format_duration(wall.most_s)} (an estimate from the profile's curves)"
    ]
    return lines + [blind_warning(b, setup) for b in blind_pairs(plan, setup)]


def blind_warning(b: Blind, setup: RehearsalSetup) -> str:
    """The warning for a candidate the profile runs as the baseline, with a rule to copy."""
    differ = ", ".join(b.keys) or "nothing the simulator reads"
    example = ""
    if b.keys:
        when = ", ".join(f"{k}: {_yaml(v)}" for k, v in zip(b.keys, b.values, strict=True))
        example = (
            " To rehearse a difference, give the candidate its own behaviour, e.g. (your "
            "numbers; docs/simulator.md):\n"
            "    rehearsal:\n"
            "      profile:\n"
            "        base: {step_ms: [[1, 20], [256, 60]], noise: 0.02, instance_noise: 0.01}\n"
            "        rules:\n"
            f"          - when: {{{when}}}\n"
            "            set: {step_ms: [[1, 19], [256, 50]]}"
        )
    name = "the bundled profile" if setup.bundled else f"profile {setup.profile.name!r}"
    return (
        f"warning: {name} has no rule that tells {b.candidate} from {b.baseline} (they differ "
        f"in {differ}): a rehearsal runs both as the same simulated engine, so its verdict "
        f"shows the simulator's noise, not your change.{example}"
    )


def _yaml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

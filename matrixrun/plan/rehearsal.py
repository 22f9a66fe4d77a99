"""What a rehearsal of a plan can show, and how long it takes, said before it runs.

Two things a newcomer's first `--rehearse` got wrong without a word (issue 33): an own spec
rehearsed on a profile with no rule for the flag its arms differ in ran both arms as the same
simulated engine, and the report said "same" — a verdict about the profile, not the change;
and nothing said how long the rehearsal would take. `blind_pairs` finds the arms the profile
cannot tell apart (the same resolution the simulator makes from each launch's flags);
`wall_seconds` estimates the real time from the profile's curves (`core/pace.py`). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from matrixrun.core import pace
from matrixrun.core.profile import Curve, Profile, as_launched, bundled, same_behaviour
from matrixrun.plan.expansion import Cell, Plan, ServerGroup
from matrixrun.spec import Spec


@dataclass(frozen=True)
class RehearsalSetup:
    """What a rehearsal of a spec runs on: the profile, and how fast. One function decides it
    for the engine, `plan` and the report, so what they say is what runs."""

    profile: Profile
    bundled: bool  # the spec brings no profile: the simulator's default one
    time_scale: float
    stream_interval: int | None
    #: why a spec without a profile still runs in real time (None when it does not)
    real_time_why: str | None = None


def rehearsal_setup(spec: Spec) -> RehearsalSetup:
    """The spec's profile, time scale and stream interval; for a spec without a profile the
    bundled one, as fast as the load client can follow (`core/pace.py`) unless the spec sets
    `rehearsal.time_scale` or `stream_interval` itself."""
    given = spec.rehearsal.profile
    if isinstance(given, Profile):
        return RehearsalSetup(
            given, False, spec.rehearsal.time_scale, spec.rehearsal.stream_interval
        )
    profile = bundled()
    chosen = spec.rehearsal.model_fields_set
    interval = spec.rehearsal.stream_interval
    if "stream_interval" not in chosen:
        interval = pace.STREAM_INTERVAL
    if "time_scale" in chosen:
        return RehearsalSetup(profile, True, spec.rehearsal.time_scale, interval)
    top = max_concurrency(spec)
    curves = [profile.resolve(as_launched(arm.flags))[0] for arm in spec.arms.values()]
    scale = pace.safe_scale(curves, top, interval or 1)
    why = None
    if scale == 1.0:
        rate = max(pace.events_per_second(c, top, interval or 1, 2.0) for c in curves)
        why = (
            f"at concurrency {top} even ×2 would ask the load client for {rate:,.0f} events/s "
            f"(it keeps up with about {pace.EVENT_BUDGET:,.0f})"
        )
    return RehearsalSetup(profile, True, scale, interval, why)


def max_concurrency(spec: Spec) -> int:
    """The largest concurrency a spec's matrix runs (its sweep and its include entries)."""
    extra = [int(c["concurrency"]) for c in spec.include if "concurrency" in c]
    return max([*spec.sweep.concurrency, *extra])


@dataclass(frozen=True)
class Blind:
    """A candidate the profile runs exactly as the baseline (on every launch it shares)."""

    candidate: str
    baseline: str
    #: the flags the two arms differ in (what a rule's `when:` should name)
    keys: tuple[str, ...]
    #: the candidate's values of them, for the example rule
    values: tuple[object, ...]


def blind_pairs(plan: Plan, setup: RehearsalSetup) -> list[Blind]:
    """Candidates whose every launch resolves to the same curve and effects as the baseline's
    launch of the same slice and server axes: the rehearsal cannot show them differ."""
    base = {(g.slice, _axes(g)): g for g in plan.groups if g.arm == plan.baseline}
    seen: dict[str, list[bool]] = {}
    keys: dict[str, tuple[tuple[str, ...], tuple[object, ...]]] = {}
    for g in plan.groups:
        b = base.get((g.slice, _axes(g)))
        if g.arm == plan.baseline or b is None:
            continue
        seen.setdefault(g.arm, []).append(same_behaviour(setup.profile, b.flags, g.flags))
        differ = sorted(k for k in {*b.flags, *g.flags} if b.flags.get(k) != g.flags.get(k))
        keys.setdefault(g.arm, (tuple(differ), tuple(g.flags.get(k) for k in differ)))
    return [
        Blind(arm, plan.baseline, *keys[arm])
        for arm in plan.candidates
        if seen.get(arm) and all(seen[arm])
    ]


def _axes(g: ServerGroup) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in g.server_axes.items()))


@dataclass(frozen=True)
class WallTime:
    """Real seconds a rehearsal takes: the first pass, and every cell to max_runs plus the
    bisection midpoints (the most the verify policy can run)."""

    first_pass_s: float
    most_s: float


def wall_seconds(spec: Spec, plan: Plan, setup: RehearsalSetup) -> WallTime:
    """From each cell's modelled time on its arm's curve, divided by the time scale, plus the
    measured overhead of a launch and of a cell (`pace.LAUNCH_S`, `pace.CELL_S`). An estimate:
    continuous batching overlaps waves, so it errs long."""
    w = spec.workload
    copies = 2 if w.warmup_requests == "cell" else 1
    per_run = []
    for g in plan.groups:
        curve = setup.profile.resolve(as_launched(g.flags))[0]
        for c in g.cells:
            modelled = _cell_model_s(c, curve, spec) * copies
            per_run.append(modelled / setup.time_scale + pace.CELL_S)
    if not per_run:
        return WallTime(0.0, 0.0)
    first = sum(per_run) + plan.cost.launches * pace.LAUNCH_S
    mean = sum(per_run) / len(per_run)
    more = plan.cost.runs_worst_case - plan.cost.runs_first_pass
    more += plan.cost.bisection_runs_worst_case
    extra_launches = plan.cost.launches_worst_case - plan.cost.launches
    return WallTime(first, first + more * mean + extra_launches * pace.LAUNCH_S)


def _cell_model_s(c: Cell, curve: Curve, spec: Spec) -> float:
    w = spec.workload
    if w.duration is not None:
        return float(w.duration)
    return pace.cell_seconds(
        curve,
        int(c.point.get("concurrency", 1)),
        c.num_prompts,
        int(c.point.get("input_len", w.input_len)),
        int(c.point.get("output_len", w.output_len)),
    )

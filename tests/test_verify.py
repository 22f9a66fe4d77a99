"""The verify policy as a pure function: measurements in, reruns (with reasons) out."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from matrixrun.core.measurement import Measurement, Reason
from matrixrun.core.metrics import Metrics
from matrixrun.core.rerun_reason import WhyKind
from matrixrun.core.verdict import CellNote
from matrixrun.plan import Cell, Plan, ServerGroup, expand
from matrixrun.report.sections.reruns import rerun_why
from matrixrun.spec import Spec, parse_spec
from matrixrun.verify import Pick, Policy, Schedule, Work, decide_chance, rounds_done
from matrixrun.verify import policy as policy_module

SPEC = """
experiment: verify-test
title: policy unit tests
model: {{path: /models/m}}
hardware: {{gpu: H200, count: 1}}
arms:
  base: {{backend: a}}
  cand: {{backend: b}}
sweep: {{concurrency: [1, 4, 16]}}
workload: {{input_len: 16, output_len: 8, num_prompts: 16}}
metrics: {{primary: output_throughput}}
verify: {verify}
estimate: {{launch: 10m, cell: 2m}}
correctness: {{enabled: false}}
"""
EPOCH = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def setup(verify: str = "{threshold: 3%, surprise: 10%, max_runs: 3}") -> tuple[Spec, Plan]:
    spec = parse_spec(SPEC.format(verify=verify))
    return spec, expand(spec)


def cell(plan: Plan, arm: str, x: int) -> Cell:
    return next(c for c in plan.cells() if c.arm == arm and c.x == x)


def group(plan: Plan, arm: str) -> ServerGroup:
    return next(g for g in plan.groups if g.arm == arm)


def m(plan: Plan, arm: str, x: int, value: float, instance: int = 1,
      reason: Reason = "first", attempt: int = 1, seconds: float = 120) -> Measurement:  # fmt: skip
    c = cell(plan, arm, x)
    g = group(plan, arm)
    start = EPOCH + dt.timedelta(hours=attempt)
    iso = "%Y-%m-%dT%H:%M:%S.%f"
    return Measurement(
        cell_id=c.cell_id, point_id=c.point_id, arm=arm, group_id=g.group_id, slice=c.slice,
        point=c.point, attempt=attempt, instance=f"{g.group_id}#{instance}", reason=reason,
        metrics=Metrics(duration=10, completed=8, total_input_tokens=128,
                        total_output_tokens=64, request_throughput=0.8, input_throughput=12.8,
                        output_throughput=value, total_throughput=value + 12.8),
        started_at=start.strftime(iso) + "Z",
        finished_at=(start + dt.timedelta(seconds=seconds)).strftime(iso) + "Z",
    )  # fmt: skip


def first_pass(plan: Plan, cand: dict[int, float]) -> list[Measurement]:
    """Baseline at 100 everywhere, the candidate at the given values."""
    return [m(plan, "base", x, 100.0) for x in (1, 4, 16)] + [
        m(plan, "cand", x, v) for x, v in cand.items()
    ]


def picks(batch: list[tuple[ServerGroup, list[Pick]]]) -> set[tuple[str, int, str]]:
    return {(p.cell.arm, int(p.cell.x), p.reason) for _, cells in batch for p in cells}


# --------------------------------------------------------------------------- stage 1


def test_warm_rerun_only_for_surprises_where_this_arm_is_the_slow_one() -> None:
    spec, plan = setup()
    ms = first_pass(plan, {1: 70.0, 4: 140.0, 16: 101.0})
    policy = Policy(spec, plan)
    warm = policy.warm_reruns(group(plan, "cand"), ms)
    assert [(c.arm, c.x) for c, _ in warm] == [("cand", 1)]  # −30% is JIT-shaped; +40% is not
    why = warm[0][1]
    assert why.kind == WhyKind.WARM_CHECK and why.arm == "cand"
    assert why.change == pytest.approx(-0.30) and why.surprise == 0.10
    assert "−30.0% vs base" in rerun_why(why) and "first-run JIT" in rerun_why(why)
    # the baseline's server would be the one to recheck for the +40% cell
    assert [(c.arm, c.x) for c, _ in policy.warm_reruns(group(plan, "base"), ms)] == [("base", 4)]


def test_warm_rerun_happens_once_and_respects_switches() -> None:
    spec, plan = setup()
    ms = first_pass(plan, {1: 70.0, 4: 100.0, 16: 100.0})
    ms.append(m(plan, "cand", 1, 72.0, reason="surprise", attempt=2))
    assert Policy(spec, plan).warm_reruns(group(plan, "cand"), ms) == []
    for verify in ("{warm_rerun: false}", "{max_runs: 1}"):
        spec2, plan2 = setup(verify)
        ms2 = first_pass(plan2, {1: 70.0, 4: 100.0, 16: 100.0})
        assert Policy(spec2, plan2).warm_reruns(group(plan2, "cand"), ms2) == []


# --------------------------------------------------------------------------- stage 2


def test_without_any_sigma_every_inconclusive_cell_gets_both_arms() -> None:
    spec, plan = setup("{threshold: 3%, surprise: 90%, max_runs: 3}")
    ms = first_pass(plan, {1: 80.0, 4: 100.0, 16: 120.0})
    got = picks(Policy(spec, plan).next_round(1, ms))
    assert got == {(a, x, "undecided") for a in ("base", "cand") for x in (1, 4, 16)}


def test_limiting_arm_and_futility() -> None:
    """With σ known (5%, df 6), the cell at n = 2/1 reruns only the candidate; a tie that 3
    runs per arm cannot settle within ±3% is left alone."""
    spec, plan = setup("{threshold: 3%, surprise: 90%, max_runs: 3}")
    ms = first_pass(plan, {1: 88.0, 4: 100.5, 16: 100.0})
    for x, (a, b) in {1: (100.0, 110.0), 4: (95.0, 105.0), 16: (104.0, 96.0)}.items():
        ms.append(m(plan, "base", x, a, instance=2, reason="fresh_server", attempt=2))
        ms.append(m(plan, "cand", x, (b / 100) * 100.0 * (0.88 if x == 1 else 1.0), instance=2,
                    reason="fresh_server", attempt=2))  # fmt: skip
    ms = [x for x in ms if not (x.arm == "cand" and x.point["concurrency"] == 1 and x.attempt == 2)]
    got = picks(Policy(spec, plan).next_round(2, ms))
    assert ("cand", 1, "undecided") in got
    assert ("base", 1, "undecided") not in got  # baseline already has 2 runs there
    assert not any(x == 4 or x == 16 for _, x, _ in got)  # futile ties


def test_futility_waits_for_two_runs_per_arm(monkeypatch: pytest.MonkeyPatch) -> None:
    """A noisy tie measured once per arm is rerun even though its predicted chance is below
    the futility rule's threshold (one run per arm is too few to give a cell up on), and the
    rerun log says so; once both arms have two runs the rule applies (the tie at 4)."""
    spec, plan = setup("{threshold: 3%, surprise: 90%, max_runs: 3}")
    ms = first_pass(plan, {1: 88.0, 4: 100.5, 16: 100.0})
    for x, (a, b) in {1: (100.0, 110.0), 4: (95.0, 105.0)}.items():
        ms.append(m(plan, "base", x, a, instance=2, reason="fresh_server", attempt=2))
        ms.append(m(plan, "cand", x, b * (0.88 if x == 1 else 1.0), instance=2,
                    reason="fresh_server", attempt=2))  # fmt: skip
    batch = Policy(spec, plan).next_round(2, ms)
    got = picks(batch)
    assert {("base", 16, "undecided"), ("cand", 16, "undecided")} <= got
    assert not any(x == 4 for _, x, _ in got)  # 2 runs per arm: futile
    why = next(p.why for _, cells in batch for p in cells if p.cell.x == 16)
    assert why.chance is not None and why.chance < policy_module.FUTILITY
    assert "one run per arm is too few to give a cell up on" in rerun_why(why)
    # the same state under a rule judged from the first run: the tie at 16 is given up on
    monkeypatch.setattr(policy_module, "FUTILITY_MIN_RUNS", 1)
    assert not any(x == 16 for _, x, _ in picks(Policy(spec, plan).next_round(2, ms)))


def test_max_runs_caps_every_reason() -> None:
    spec, plan = setup("{threshold: 3%, surprise: 10%, max_runs: 2}")
    ms = first_pass(plan, {1: 80.0, 4: 100.0, 16: 120.0})
    ms += [m(plan, arm, x, 100.0, instance=2, reason="undecided", attempt=2)
           for arm in ("base", "cand") for x in (1, 4, 16)]  # fmt: skip
    policy = Policy(spec, plan)
    assert policy.next_round(1, ms) == []
    # the round after the planned one serves only undecided cells with runs left; then nothing
    extra = policy.next_round(2, first_pass(plan, {1: 80.0}))
    assert {p.why.kind for _, cells in extra for p in cells} == {WhyKind.UNDECIDED}
    assert policy.next_round(3, first_pass(plan, {1: 80.0})) == []  # past the rounds


def test_one_instance_check_per_server_plus_sigma_calibration() -> None:
    """Two surprising candidate cells, decided by a 1% prior: one fresh-server check (the more
    surprising one); the tie gets both arms; then fresh replicates so that σ gets
    min(6, cells) = 6 degrees of freedom."""
    spec, plan = setup("{threshold: 3%, surprise: 10%, max_runs: 3, noise: 1%}")
    ms = first_pass(plan, {1: 60.0, 4: 70.0, 16: 100.0})
    batch = Policy(spec, plan).next_round(1, ms)
    reasons = [(p.cell.arm, p.cell.x, p.why) for _, cells in batch for p in cells]
    checks = [(a, x) for a, x, why in reasons if why.kind == WhyKind.INSTANCE_CHECK]
    assert checks == [("cand", 1)]
    undecided = [(a, x, why) for a, x, why in reasons if why.kind == WhyKind.UNDECIDED]
    assert {(a, x) for a, x, _ in undecided} == {("base", 16), ("cand", 16)}
    assert all(why.arm == a and why.cell is not None for a, _, why in undecided)
    replicates = [why for *_, why in reasons if why.kind == WhyKind.SIGMA_REPLICATE]
    assert len(replicates) == 3 and all(why.target_df == 6 for why in replicates)
    assert len(reasons) == 6
    # the report words the numbers once
    assert "first server was odd" in rerun_why(
        next(w for *_, w in reasons if w.kind == WhyKind.INSTANCE_CHECK)
    )
    assert "has 6 degrees of freedom" in rerun_why(replicates[0])


def test_budget_trims_a_round_and_counts_relaunches() -> None:
    spec, plan = setup("{threshold: 3%, surprise: 90%, max_runs: 3, budget: 30m}")
    ms = first_pass(plan, {1: 80.0, 4: 100.0, 16: 120.0})
    policy = Policy(spec, plan)
    # 30 min: one 10-min launch + 2-min cells fits ten cells on one server, not two launches
    batch = policy.next_round(1, ms)
    assert len(batch) == 2 and sum(len(c) for _, c in batch) == 5
    ms.append(m(plan, "cand", 1, 80.0, instance=2, reason="undecided", attempt=2))
    assert policy.rerun_time_spent(ms) == pytest.approx(600 + 120)


def test_abba_order_alternates_by_round() -> None:
    spec, plan = setup("{threshold: 3%, surprise: 90%, max_runs: 4}")
    ms = first_pass(plan, {1: 80.0, 4: 100.0, 16: 120.0})
    policy = Policy(spec, plan)
    plan_order = [g.arm for g in plan.groups]
    assert [g.arm for g, _ in policy.next_round(1, ms)] == plan_order[::-1]
    assert [g.arm for g, _ in policy.next_round(2, ms)] == plan_order


def test_same_measurements_same_picks_and_resume_round() -> None:
    spec, plan = setup()
    ms = first_pass(plan, {1: 70.0, 4: 100.0, 16: 120.0})
    a = Policy(spec, plan).next_round(1, ms)
    b = Policy(spec, plan).next_round(1, list(ms))
    assert [(g.group_id, cells) for g, cells in a] == [(g.group_id, cells) for g, cells in b]
    policy = Policy(spec, plan)
    assert rounds_done(policy, ms) == 0
    ms.append(m(plan, "cand", 1, 70.0, instance=2, reason="undecided", attempt=2))
    assert rounds_done(policy, ms) == 1


def test_decide_chance() -> None:
    assert decide_chance(0.5, 0.05, 1, 1, 3, 0.03, 2.4) > 0.99
    assert decide_chance(0.0, 0.08, 1, 1, 3, 0.03, 2.4) < 0.05  # a noisy tie: futile
    assert decide_chance(0.0, 0.004, 1, 1, 3, 0.03, 2.4) > 0.9  # a quiet tie: "same" reachable
    assert decide_chance(0.1, 0.05, 3, 3, 3, 0.03, 2.4) == 0.0  # no runs left


# --------------------------------------------------------------------------- schedule

#: A test's launch: more (cell, reason) pairs while the server is up.
After = Callable[[], list[tuple[Cell, Reason]]]


def consume(
    policy: Policy,
    ms: list[Measurement],
    run_cells: Callable[[ServerGroup, list[tuple[Cell, Reason]], After | None], None],
    note: Callable[[int, int, Cell, Reason, Any], None] | None = None,
) -> None:
    """Consume the verify schedule as the runner does (no launch for no work; a chosen
    rerun noted before it is measured), through a test's `run_cells`."""

    def emit(items: list[Work]) -> list[tuple[Cell, Reason]]:
        for w in items:
            if note is not None and w.why is not None:
                note(w.stage, w.round_no, w.cell, w.reason, w.why)
        return [(w.cell, w.reason) for w in items]

    for launch in Schedule(policy, lambda: ms).launches():
        first = launch.next()
        if first:
            run_cells(launch.group, emit(first), lambda launch=launch: emit(launch.next()))


def test_drive_runs_stage_one_then_warm_then_rounds_and_resumes() -> None:
    spec, plan = setup("{threshold: 3%, surprise: 10%, max_runs: 2}")
    values = {("base", 1): 100.0, ("base", 4): 100.0, ("base", 16): 100.0,
              ("cand", 1): 70.0, ("cand", 4): 100.0, ("cand", 16): 130.0}  # fmt: skip
    ms: list[Measurement] = []
    calls: list[tuple[str, list[tuple[int, str]]]] = []
    launches: dict[str, int] = {}

    def run_cells(g: ServerGroup, cells: list[tuple[Cell, Reason]], after: After | None) -> None:
        launches[g.arm] = launches.get(g.arm, 0) + 1
        queue = list(cells)
        while queue:
            c, reason = queue.pop(0)
            n = sum(1 for x in ms if x.cell_id == c.cell_id)
            ms.append(m(plan, c.arm, int(c.x), values[(c.arm, int(c.x))], launches[g.arm],
                        reason, n + 1))  # fmt: skip
            calls.append((g.arm, [(int(c.x), reason)]))
            if not queue and after is not None:
                queue.extend(after())

    notes: list[tuple[int, int, str]] = []
    policy = Policy(spec, plan)
    consume(policy, ms, run_cells, lambda st, r, c, reason, why: notes.append((st, r, reason)))
    order = [(arm, x, r) for arm, cs in calls for x, r in cs]
    assert order[:3] == [("base", 1, "first"), ("base", 4, "first"), ("base", 16, "first")]
    assert order[3:7] == [("cand", 1, "first"), ("cand", 4, "first"), ("cand", 16, "first"),
                          ("cand", 1, "surprise")]  # fmt: skip
    assert notes[0] == (1, 0, "surprise")
    assert all(st == 2 and r == 1 for st, r, _ in notes[1:])
    done = len(ms)
    consume(policy, ms, run_cells)  # resumed: nothing left to do
    assert len(ms) == done


def test_a_round_chooses_inconclusive_reruns_again_once_its_replicates_bring_sigma() -> None:
    """At the start of round 1 nothing has a σ, so every cell looks inconclusive; each launch
    re-chooses as σ arrives: a +50% cell is settled after one rerun (one relaunch is one
    launch df: the honest σ needs it) and is never rerun again, while the policy computed at
    the round's start would have kept rerunning it."""
    spec, plan = setup("{threshold: 3%, surprise: 60%, max_runs: 3, warm_rerun: false}")
    truth = {("base", 1): 100.0, ("base", 4): 100.0, ("base", 16): 100.0,
             ("cand", 1): 101.0, ("cand", 4): 102.0, ("cand", 16): 150.0}  # fmt: skip
    ms: list[Measurement] = []
    launches: dict[str, int] = {}

    def run_cells(g: ServerGroup, cells: list[tuple[Cell, Reason]], after: After | None) -> None:
        launches[g.arm] = launches.get(g.arm, 0) + 1
        queue = list(cells)
        while queue:
            c, reason = queue.pop(0)
            n = sum(1 for x in ms if x.cell_id == c.cell_id)
            wobble = 1.0 + 0.004 * (-1) ** (launches[g.arm] + int(c.x))  # ±0.4% per launch
            ms.append(m(plan, c.arm, int(c.x), truth[(c.arm, int(c.x))] * wobble,
                        launches[g.arm], reason, n + 1))  # fmt: skip
            if not queue and after is not None:
                queue.extend(after())

    policy = Policy(spec, plan)
    for g in plan.groups:  # stage 1 only
        run_cells(g, [(c, "first") for c in g.cells], None)
    at_start = picks(policy.next_round(1, ms))
    assert ("cand", 16, "undecided") in at_start  # no σ yet: it looks undecided
    consume(policy, ms, run_cells)
    reruns = {(x.arm, int(x.point["concurrency"]), x.reason) for x in ms if x.reason != "first"}
    assert sum(1 for x in ms if x.arm == "cand" and x.point["concurrency"] == 16) == 2
    assert any(r == "fresh_server" for _, _, r in reruns)  # the σ replicates ran


def test_an_unstable_launch_is_answered_by_a_further_launch_of_its_group() -> None:
    """The candidate's two launches agree within 1%; the baseline's disagree by 40% at 4
    (launch check: named). Round 2 reruns the baseline at 4 on a further fresh launch of its
    group, with the unstable-launch reason, whatever else it picks."""
    spec, plan = setup("{threshold: 3%, surprise: 50%, max_runs: 3, budget: 10h}")
    ms = [m(plan, "base", x, 100.0, attempt=1) for x in (1, 4, 16)]
    ms += [m(plan, "cand", x, 120.0, attempt=1) for x in (1, 4, 16)]
    ms += [m(plan, "cand", x, 121.0, instance=2, attempt=2) for x in (1, 4, 16)]
    ms += [m(plan, "base", 1, 100.5, instance=2, attempt=2)]
    ms += [m(plan, "base", 4, 140.0, instance=2, attempt=2)]
    ms += [m(plan, "base", 16, 99.5, instance=2, attempt=2)]
    policy = Policy(spec, plan)
    check = policy._verdict(ms).launch_check
    assert check is not None and [(s.arm, s.x) for s in check.unstable] == [("base", 4.0)]
    batch = policy.next_round(2, ms)
    chosen = {(p.cell.arm, int(p.cell.x)): p for _, cells in batch for p in cells}
    pick = chosen[("base", 4)]
    assert pick.reason == "fresh_server" and pick.why.kind == WhyKind.UNSTABLE_LAUNCH
    assert "disagree here by 40.0%" in rerun_why(pick.why)


def test_a_warm_up_both_arms_share_is_checked_on_the_partner_and_compared_cold_with_cold() -> None:
    """An engine 40% slow on the first run of a cell on each server at concurrency 4, for both
    arms (CUDA graphs captured per batch shape), the candidate truly 25% slower there. Stage 1
    reruns the slow candidate warm; that warm run is set aside (not in the cell's runs, not in
    the noise), the baseline gets a partner check on a stage-2 launch — the cell, then once
    more on that launch, warm — and with both arms shown to warm up alike the cell is
    decided worse, cold against cold, without the warm-up note."""
    spec, plan = setup()
    truth = {("base", 1): 100.0, ("base", 4): 100.0, ("base", 16): 100.0,
             ("cand", 1): 100.0, ("cand", 4): 75.0, ("cand", 16): 100.0}  # fmt: skip
    ms: list[Measurement] = []
    seen: set[tuple[str, str]] = set()
    launches: dict[str, int] = {}
    calls: list[tuple[str, int, int, str]] = []

    def run_cells(g: ServerGroup, cells: list[tuple[Cell, Reason]], after: After | None) -> None:
        launches[g.arm] = launches.get(g.arm, 0) + 1
        queue = list(cells)
        while queue:
            c, reason = queue.pop(0)
            n = sum(1 for x in ms if x.cell_id == c.cell_id) + 1
            inst = f"{g.group_id}#{launches[g.arm]}"
            cold = (c.cell_id, inst) not in seen
            seen.add((c.cell_id, inst))
            value = truth[(c.arm, int(c.x))] * (1 + 0.01 * ((n * 7 + len(ms)) % 3 - 1))
            if cold and int(c.x) == 4:
                value *= 0.6
            ms.append(m(plan, c.arm, int(c.x), value, launches[g.arm], reason, n))
            calls.append((c.arm, int(c.x), launches[g.arm], reason))
            if not queue and after is not None:
                queue.extend(after())

    policy = Policy(spec, plan)
    consume(policy, ms, run_cells)
    assert ("cand", 4, 1, "surprise") in calls  # stage 1's warm check on the slow arm
    partner = [c for c in calls if c[:2] == ("base", 4) and c[2] > 1]
    launch = partner[0][2]
    assert [c[3] for c in partner if c[2] == launch] == ["fresh_server", "surprise"]
    verdict = policy._verdict(ms)
    assert {(w.arm, w.x) for w in verdict.warm_aside} == {("base", 4.0), ("cand", 4.0)}
    at4 = next(c for _, _, c in verdict.comparisons() if c.x == 4)
    assert at4.verdict == "worse" and CellNote.WARMUP not in at4.notes
    assert "surprise" not in at4.candidate.reasons + at4.baseline.reasons  # cold with cold
    for arm in (at4.baseline, at4.candidate):  # one cold run per server: the warm ones left out
        assert arm.n == len(set(arm.instances)) >= 2


@pytest.mark.parametrize("warm_rerun", [True, False])
def test_the_extra_round_gives_an_unsettled_cell_its_last_run(warm_rerun: bool) -> None:
    """A cell decided when the last planned round was chosen can come out of that round
    undecided, when the round's runs elsewhere move the pooled σ (a powered `h200` cell of
    the scoring benchmark, +31% true, ended at 2/2 runs that way). The round after those
    max_runs implies gives it its last run; beyond it, nothing. Warm checks or not."""
    spec, plan = setup(
        f"{{threshold: 3%, surprise: 10%, max_runs: 3, warm_rerun: {str(warm_rerun).lower()}}}"
    )
    runs = {("base", 1): (100.0, 101.0), ("cand", 1): (100.5, 99.5),
            ("base", 4): (100.0, 99.0), ("cand", 4): (100.0, 101.0),
            ("base", 16): (100.0, 103.0), ("cand", 16): (110.0, 116.0)}  # fmt: skip
    ms = []
    for (arm, x), (first, second) in runs.items():
        ms += [m(plan, arm, x, first), m(plan, arm, x, second, 2, "undecided", 2)]
    policy = Policy(spec, plan)
    at16 = next(c for _, _, c in policy._verdict(ms).comparisons() if c.x == 16)
    assert at16.verdict == "undecided" and at16.change is not None and at16.change > 0.1
    extra = policy.planned_rounds + 1
    chosen = policy.next_round(extra, ms)
    assert picks(chosen) == {("base", 16, "undecided"), ("cand", 16, "undecided")}
    assert all(p.why.kind == WhyKind.UNDECIDED for _, cells in chosen for p in cells)
    assert policy.next_round(extra + 1, ms) == []


def _one_arm_warms_up(base_warm: float) -> list[Measurement]:
    """`cand` 40% slow on the first run of concurrency 4 on each of its two servers (its warm
    reruns there at full speed); `base` measured there cold, then on a fresh launch cold and
    warm (a partner check), its warm run at `base_warm`; 1 and 16 replicated on two launches."""
    _, plan = setup()
    ms = []
    for inst in (1, 2):
        reason: Reason = "first" if inst == 1 else "undecided"
        ms += [m(plan, "base", 1, 100 + inst, inst, reason, inst),
               m(plan, "cand", 1, 100 - inst, inst, reason, inst),
               m(plan, "base", 16, 100 + inst / 2, inst, reason, inst),
               m(plan, "cand", 16, 100, inst, reason, inst)]  # fmt: skip
    return [
        *ms,
        m(plan, "cand", 4, 60, 1, "first", 1), m(plan, "cand", 4, 100, 1, "surprise", 2),
        m(plan, "cand", 4, 61, 2, "undecided", 3), m(plan, "cand", 4, 101, 2, "surprise", 4),
        m(plan, "base", 4, 100, 1, "first", 1), m(plan, "base", 4, 100.5, 2, "fresh_server", 2),
        m(plan, "base", 4, base_warm, 2, "surprise", 3),
    ]  # fmt: skip


def test_the_checks_line_says_where_cold_was_compared_and_a_warm_up_of_one_arm() -> None:
    """The first screen names the points whose warm runs were set aside (cold compared with
    cold there) and, where the other arm was measured warm and showed none, says the warm-up
    is one arm's alone: the first-run (JIT) explanation as a finding. A partner whose warm run
    is as fast as its cold one's partner (base 100.5 cold, 166 warm) warms up too: no such
    claim."""
    from matrixrun.analysis import analyse
    from matrixrun.report.sections.checks import checks, checks_line
    from matrixrun.rundir.settings import analysis_settings

    spec, plan = setup()
    line = checks_line(
        checks(analyse(_one_arm_warms_up(99.8), analysis_settings(spec, plan))),
        False,
        False,
        "concurrency",
    )
    assert "compared cold with cold at concurrency 4, warm runs set aside" in line
    assert "a warm-up of `cand` only (`base` measured warm there showed none)" in line
    both = checks(analyse(_one_arm_warms_up(166.0), analysis_settings(spec, plan)))
    assert both.one_arm == ([], [])
    assert "only" not in checks_line(both, False, False, "concurrency")

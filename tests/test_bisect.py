"""Bisection of crossover brackets (`verify.bisect`): the midpoint rule as a pure function,
the policy's picks, and a rehearsed run whose arms cross between two grid points — the
midpoint measured, the bracket narrowed, the report saying so, a resume keeping the cells."""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
from pathlib import Path

import pytest

from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import Metrics
from matrixrun.plan import Plan, added_cell, expand
from matrixrun.run.experiment import run_experiment
from matrixrun.rundir.results import RunDir
from matrixrun.spec import Spec, parse_spec
from matrixrun.verify import Policy
from matrixrun.verify.bisect import midpoint

ROOT = Path(__file__).resolve().parent.parent
CROSSING = ROOT / "tests" / "specs" / "crossing.yaml"

SPEC = """
experiment: bisect-test
title: bisection unit tests
model: {{path: /models/m}}
hardware: {{gpu: H200, count: 1}}
arms:
  base: {{backend: a}}
  cand: {{backend: b}}
sweep: {{concurrency: {grid}}}
workload: {{input_len: 16, output_len: 8, num_prompts: 1024}}
metrics: {{primary: output_throughput}}
verify: {verify}
estimate: {{launch: 10m, cell: 2m}}
correctness: {{enabled: false}}
"""
VERIFY = "{{threshold: 3%, surprise: 90%, max_runs: 3, noise: 1%, bisect: {bisect}{extra}}}"
EPOCH = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


# --------------------------------------------------------------------------- the midpoint


def test_midpoint_is_geometric_and_rounded_on_count_axes() -> None:
    assert midpoint(64, 256, integer=True) == 128
    assert midpoint(10, 1024, integer=True) == 101  # √10240 = 101.2
    assert midpoint(4, 16, integer=True) == 8
    assert midpoint(256.0, 64.0, integer=True) == 128  # ends in either order
    assert midpoint(1.0, 8.0, integer=False) == pytest.approx(2.83)  # 3 significant digits


def test_no_midpoint_when_it_rounds_onto_an_end() -> None:
    assert midpoint(1, 2, integer=True) is None  # √2 rounds to 1
    assert midpoint(2, 3, integer=True) is None  # √6 = 2.45 rounds to 2
    assert midpoint(1.0, 2.0, integer=False) == pytest.approx(1.41)
    assert midpoint(5, 5, integer=True) is None


def test_no_midpoint_off_a_positive_finite_axis() -> None:
    assert midpoint(1.0, math.inf, integer=False) is None
    assert midpoint("a", "b", integer=False) is None
    assert midpoint(0, 16, integer=True) is None  # no log of 0
    assert midpoint(True, 4, integer=True) is None


# --------------------------------------------------------------------------- the plan


def test_an_added_cell_has_the_ids_expand_gives_the_same_point() -> None:
    """A midpoint cell is the cell a spec with that point in its grid would have had: the
    same point id across arms, the same cell id, so it is just another cell of its group."""
    spec = parse_spec(SPEC.format(grid=[1, 4, 16], verify=VERIFY.format(bisect=1, extra="")))
    wider = parse_spec(SPEC.format(grid=[1, 4, 8, 16], verify=VERIFY.format(bisect=1, extra="")))
    plan, full = expand(spec), expand(wider)
    for group in plan.groups:
        like = next(c for c in group.cells if c.x == 4)
        new = added_cell(spec, group, like, 8)
        same = next(c for g in full.groups if g.arm == group.arm for c in g.cells if c.x == 8)
        assert (new.cell_id, new.point_id, new.num_prompts) == (
            same.cell_id,
            same.point_id,
            same.num_prompts,
        )
        assert new.added_by == "bisection" and same.added_by is None
        assert plan.add_cell(group.group_id, new) and not plan.add_cell(group.group_id, new)
        assert [c.x for c in plan.group(group.group_id).cells] == [1, 4, 8, 16]


# --------------------------------------------------------------------------- the policy


def setup(bisect: int = 1, extra: str = "", grid: str = "[1, 4, 16]") -> tuple[Spec, Plan]:
    spec = parse_spec(SPEC.format(grid=grid, verify=VERIFY.format(bisect=bisect, extra=extra)))
    return spec, expand(spec)


def m(plan: Plan, arm: str, x: int, value: float, seconds: float = 120) -> Measurement:
    c = next(c for c in plan.cells() if c.arm == arm and c.x == x)
    g = plan.group(next(g.group_id for g in plan.groups if c in g.cells))
    iso = "%Y-%m-%dT%H:%M:%S.%f"
    return Measurement(
        cell_id=c.cell_id, point_id=c.point_id, arm=arm, group_id=g.group_id, slice=c.slice,
        point=c.point, instance=f"{g.group_id}#1",
        metrics=Metrics(duration=10, completed=8, total_input_tokens=128,
                        total_output_tokens=64, request_throughput=0.8, input_throughput=12.8,
                        output_throughput=value, total_throughput=value + 12.8),
        started_at=EPOCH.strftime(iso) + "Z",
        finished_at=(EPOCH + dt.timedelta(seconds=seconds)).strftime(iso) + "Z",
    )  # fmt: skip


def crossing(plan: Plan, cand: dict[int, float], seconds: float = 120) -> list[Measurement]:
    xs = sorted(cand)
    return [m(plan, "base", x, 100.0, seconds) for x in xs] + [
        m(plan, "cand", x, v, seconds) for x, v in cand.items()
    ]


def bisections(policy: Policy, ms: list[Measurement]) -> set[tuple[str, int]]:
    return {
        (p.cell.arm, int(p.cell.x))
        for _, picks in policy.next_round(1, ms)
        for p in picks
        if p.reason == "bisection"
    }


def test_a_bracket_gets_its_midpoint_for_both_arms_on_their_groups() -> None:
    spec, plan = setup()
    ms = crossing(plan, {1: 160.0, 4: 60.0, 16: 50.0})  # better at 1, worse from 4
    policy = Policy(spec, plan)
    batch = policy.next_round(1, ms)
    got = {(p.cell.arm, p.cell.x, g.arm) for g, ps in batch for p in ps if p.reason == "bisection"}
    assert got == {("base", 2, "base"), ("cand", 2, "cand")}  # √(1·4) = 2, own arm's group
    pick = next(p for _, ps in batch for p in ps if p.reason == "bisection")
    assert pick.why.bracket == (1.0, 4.0) and pick.cost == 120.0
    assert all(c.x != 2 for c in plan.cells())  # proposed, not yet in the plan


def test_no_bisection_when_off_or_when_the_midpoint_is_a_grid_point() -> None:
    spec, plan = setup(bisect=0)
    assert not bisections(Policy(spec, plan), crossing(plan, {1: 160.0, 4: 60.0, 16: 50.0}))
    # the bracket 1–16 (4 is undecided at 1%): its midpoint 4 is measured already
    spec, plan = setup()
    assert not bisections(Policy(spec, plan), crossing(plan, {1: 160.0, 4: 101.5, 16: 50.0}))


def test_no_bisection_without_the_budget_for_it() -> None:
    """The budget is claimed in priority order; a run's cost is its ends' longest run."""
    spec, plan = setup(extra=", budget: 1h")
    ms = crossing(plan, {1: 160.0, 4: 60.0, 16: 50.0}, seconds=120)
    assert bisections(Policy(spec, plan), ms)
    # the ends took 9 min a run: the crossover replicates and σ replicates still fit
    # 1 h (2 launches + 4 runs), the midpoints' 2 × 9 min do not
    slow = crossing(plan, {1: 160.0, 4: 60.0, 16: 50.0}, seconds=540)
    policy = Policy(spec, plan)
    reasons = {p.reason for _, ps in policy.next_round(1, slow) for p in ps}
    assert "crossover" in reasons and "bisection" not in reasons


def test_at_most_bisect_midpoints_between_the_grid_points_around_a_bracket() -> None:
    spec, plan = setup(grid="[1, 16]")
    ms = crossing(plan, {1: 160.0, 16: 50.0})
    policy = Policy(spec, plan)
    assert bisections(policy, ms) == {("base", 4), ("cand", 4)}
    for p in list(policy.proposed.values()):  # as the driver does when it measures them
        policy.adopt(p.cell)
    ms += [m(plan, "base", 4, 100.0), m(plan, "cand", 4, 60.0)]  # 4 is worse: bracket 1–4
    assert not bisections(policy, ms)  # bisect: 1, and 4 is already between 1 and 16
    spec2, plan2 = setup(bisect=2, grid="[1, 16]")
    policy2 = Policy(spec2, plan2)
    bisections(policy2, crossing(plan2, {1: 160.0, 16: 50.0}))
    for p in list(policy2.proposed.values()):
        policy2.adopt(p.cell)
    ms2 = crossing(plan2, {1: 160.0, 16: 50.0})
    ms2 += [m(plan2, "base", 4, 100.0), m(plan2, "cand", 4, 60.0)]
    assert bisections(policy2, ms2) == {("base", 2), ("cand", 2)}


# --------------------------------------------------------------------------- end to end


def added(run_dir: Path) -> list[tuple[int, str]]:
    plan = json.loads((run_dir / "plan.json").read_text())
    return sorted(
        (c["x"], c["arm"]) for g in plan["groups"] for c in g["cells"] if c.get("added_by")
    )


def bisected_run(out: Path) -> Path:
    """A full rehearsed run of CROSSING that bisected, for the tests that start from one.
    Whether a run brackets the crossover rests on the simulator's timing: on a loaded 2-core
    CI machine one full run in many came out with no bracket to bisect (seen twice in
    .ci/run), so the run is made again, at most twice more, until it has one.
    (`test_rehearsed_crossover_is_bisected_narrowed_and_reported` is the test that a run
    bisects at all, and makes one run only.)"""
    for attempt in range(3):
        run_dir = out.with_name(f"{out.name}{attempt}")
        run_experiment(CROSSING, out=run_dir, rehearse=True)
        if added(run_dir) == [(8, "fast"), (8, "slow")]:
            return run_dir
    raise AssertionError(f"three rehearsed runs of {CROSSING.name} never bisected: {out}*")


@pytest.mark.slow
def test_rehearsed_crossover_is_bisected_narrowed_and_reported(tmp_path: Path) -> None:
    """The arms cross near concurrency 6, between grid points 4 and 16: the policy measures
    8 (= √64) for both arms, twice each, on the groups' stage-2 launches; 8 is decided worse,
    so the bracket the verdict reports is 4–8, and the report marks the row and says why."""
    run_dir = tmp_path / "run"
    summary = run_experiment(CROSSING, out=run_dir, rehearse=True)
    assert added(run_dir) == [(8, "fast"), (8, "slow")]
    ms = RunDir(run_dir).measurements()
    at8 = [x for x in ms if x.point["concurrency"] == 8]
    assert sorted((x.arm, x.reason, x.attempt) for x in at8) == [
        ("fast", "bisection", 1),
        ("fast", "bisection", 2),
        ("slow", "bisection", 1),
        ("slow", "bisection", 2),
    ]
    whys = [
        json.loads(line)
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if '"bisection"' in line
    ]
    assert {tuple(e["why"]["bracket"]) for e in whys} == {(4.0, 16.0)}  # the bracket it halved
    verdict = json.loads((run_dir / "verdict.json").read_text())
    series = verdict["slices"][0]["candidates"][0]["metrics"][0]["series"][0]
    assert [(c["x_lo"], c["x_hi"]) for c in series["crossovers"]] == [(4.0, 8.0)]
    doc = Path(str(summary.report)).read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| 8 "))
    assert row.startswith("| 8 (added by bisection) |") and "| worse |" in row
    assert "crossover between concurrency 4 and 8" in doc
    assert "The point at concurrency 8 is not in the spec's grid" in doc


@pytest.mark.slow
def test_resume_keeps_bisection_cells_once(tmp_path: Path) -> None:
    """Killed after the candidate's stage-2 launch measured its midpoint and before the
    baseline's: the resumed run measures the baseline's midpoint (plan.json has it), never
    re-adds or re-measures the candidate's, and measures no added cell as a first run."""
    full = bisected_run(tmp_path / "full")
    cut = tmp_path / "cut"
    shutil.copytree(full, cut)
    lines = (cut / "events.jsonl").read_text().splitlines(keepends=True)
    done = next(i for i, x in enumerate(lines) if '"round_group_done"' in x)
    (cut / "events.jsonl").write_text("".join(lines[: done + 1]))
    finished = json.loads(lines[done])["group"]
    kept = [x for x in RunDir(full).measurements() if x.group_id == finished or x.reason == "first"]
    (cut / "results.jsonl").write_text("".join(x.model_dump_json() + "\n" for x in kept))
    assert added(cut) == [(8, "fast"), (8, "slow")]
    run_experiment(CROSSING, resume=cut, rehearse=True)
    assert added(cut) == [(8, "fast"), (8, "slow")]
    at8 = sorted(
        (x.arm, x.attempt, x.reason)
        for x in RunDir(cut).measurements()
        if x.point["concurrency"] == 8
    )
    # each arm's midpoint measured by bisection twice, once each (never re-measured as a
    # first run); a later round may give an undecided midpoint its last run (the extra round,
    # `Policy._extra_round`), as an `undecided` rerun
    bisected = [a for a, _, r in at8 if r == "bisection"]
    assert bisected.count("fast") == 2 and bisected.count("slow") == 2, at8
    assert {r for _, _, r in at8} <= {"bisection", "undecided"}, at8
    assert len({(a, n) for a, n, _ in at8}) == len(at8)  # no attempt measured twice


def test_the_plan_says_what_bisection_may_add() -> None:
    """The worst case counts the grid; bisection's new cells are stated on top: per pair of
    adjacent grid points of a candidate's series, `bisect` midpoints × 2 arms × max_runs."""
    _, plan = setup()  # 3 points: 2 pairs, bisect 1, max_runs 3
    assert plan.cost.runs_worst_case == 18
    assert plan.cost.bisection_runs_worst_case == 2 * 1 * 2 * 3
    assert expand(setup(bisect=0)[0]).cost.bisection_runs_worst_case == 0


@pytest.mark.slow
def test_the_report_marks_a_bisection_point_from_its_runs_alone(tmp_path: Path) -> None:
    """A run directory whose plan.json lacks the added cells (a Slurm node measured them
    without rewriting the shared plan) still marks the row: its first run's reason says so."""
    from matrixrun.report import render_run_dir

    run_dir = bisected_run(tmp_path / "run")
    plan = Plan.model_validate_json((run_dir / "plan.json").read_text())
    for g in plan.groups:
        g.cells = [c for c in g.cells if c.added_by is None]
    (run_dir / "plan.json").write_text(plan.model_dump_json())
    doc = render_run_dir(RunDir(run_dir))
    assert "| 8 (added by bisection) |" in doc
    assert "| 4 (added by bisection) |" not in doc


@pytest.mark.slow
def test_slurm_jobs_bisection_cells_reach_the_shared_plan(tmp_path: Path) -> None:
    """Under the Slurm executor each round's jobs run `node._run` on other nodes: a job that
    adds a midpoint writes it to plan.d/<group>.json before measuring it, the controller
    merges those into plan.json (its only writer), and a later job adopts them. Run here as
    the controller would, without Slurm: the jobs' bodies in this process, one after another
    (the Slurm tests exercise submission; this is the plan's path through it)."""
    from matrixrun.engines.sim import rehearsal_engine
    from matrixrun.plan import expand
    from matrixrun.run.executors.node import GroupTask, _run, shared_plan
    from matrixrun.run.measurer import Measurer, RunOptions
    from matrixrun.run.progress import PlainObserver
    from matrixrun.run.record import RunDirRecorder
    from matrixrun.run.session import merge_plan
    from matrixrun.spec import read_spec

    full = bisected_run(tmp_path / "full")
    cut = tmp_path / "cut"
    cut.mkdir()
    for name in ("spec.yaml", "settings.json", "env.json"):
        shutil.copy(full / name, cut / name)
    plan = Plan.model_validate_json((full / "plan.json").read_text())
    for g in plan.groups:
        g.cells = [c for c in g.cells if c.added_by is None]
    (cut / "plan.json").write_text(plan.model_dump_json())
    firsts = [x for x in RunDir(full).measurements() if x.reason == "first"]
    (cut / "results.jsonl").write_text("".join(x.model_dump_json() + "\n" for x in firsts))

    groups = [g.group_id for g in plan.groups]
    for group in reversed(groups):  # round 1 is in ABBA order: the plan's reversed
        _run(GroupTask(str(CROSSING), str(cut), group, 1, rehearse=True, ignore_hardware=True))
    shard = json.loads((cut / "plan.d" / f"{groups[-1]}.json").read_text())
    new = [(c["x"], c["arm"]) for g in shard["groups"] for c in g["cells"] if c["added_by"]]
    assert sorted(new) == [(8, "fast"), (8, "slow")]  # the first job to bisect: both arms
    assert added(cut) == []  # the jobs never write plan.json
    at8 = [x for x in RunDir(cut).measurements() if x.point["concurrency"] == 8]
    assert {x.reason for x in at8} == {"bisection"} and len(at8) == 4

    source = read_spec(CROSSING)
    spec = source.spec
    controller = Measurer(
        source,
        expand(spec, source.hash),
        rehearsal_engine(spec, spec.experiment),
        RunDirRecorder(RunDir(cut)),
        RunOptions(True, PlainObserver()),
    )
    assert merge_plan(controller) is True
    assert added(cut) == [(8, "fast"), (8, "slow")]
    assert merge_plan(controller) is False  # nothing new the second time
    assert added(cut) == [(8, "fast"), (8, "slow")]

    assert [c.x for c in expand(spec, source.hash).group(groups[0]).cells] == [1, 4, 16]
    later = shared_plan(source, RunDir(cut, shard=groups[0]))  # a job of a later round's
    assert [c.x for c in later.group(groups[0]).cells] == [1, 4, 8, 16]

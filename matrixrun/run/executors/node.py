"""The body of one Slurm job: one server group's share of one stage, on whatever node Slurm
gave it, reading and appending to the shared run directory.

A job is a `GroupTask` (picklable, a few strings): stage 1 (`round_no` 0) measures the group's
cells not yet measured and their warm reruns on the same server; stage 2 (`round_no` n) is the
group's launch in round n (`verify.Schedule.round` for that one group). Both compute what is left
from the run directory when they start, so a job that is submitted again after one that died
measures only what is missing. The job's measurer is the one a run on one node uses; only its
recorder differs (`record.ShardRecorder`): everything the job appends goes to files only it
writes (`RunDir(shard=group)`, plan.d/ and env.d/<group>.json), which the controller merges.

Parallel groups see each other's measurements only as they land in the shared directory: a
candidate's warm-rerun check sees the baseline's numbers only if the baseline's job measured
that point first; a cell left surprising gets its fresh-server rerun in stage 2 either way.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrixrun import verify
from matrixrun.engines import for_spec
from matrixrun.engines.base import Engine
from matrixrun.engines.sim import rehearsal_engine
from matrixrun.flags import negatable_for
from matrixrun.plan import Plan, expand
from matrixrun.run.gates import hardware_gate
from matrixrun.run.measurer import Measurer, RunOptions
from matrixrun.run.progress import PlainObserver
from matrixrun.run.record import ShardRecorder
from matrixrun.rundir.results import RunDir
from matrixrun.spec import SpecFile, read_spec
from matrixrun.store.prior import from_run_dir

#: The job's error when Slurm warned that its time limit is near (the controller looks for it).
TIME_LIMIT_MESSAGE = "time limit reached: Slurm's warning signal came before the limit"


class TimeLimitReached(BaseException):
    """Raised by Slurm's warning signal (SIGUSR2, sent by `--signal` shortly before the time
    limit, which submitit asks for): stop measuring at once so the server is stopped cleanly
    and the job ends with a result saying why. A BaseException, so that the load client's
    per-request `except Exception` records no request error for it and carries on."""


def _on_time_limit(signum: int, frame: object) -> None:
    raise TimeLimitReached


@dataclass(frozen=True)
class GroupTask:
    """What one job runs; everything else it reads from the run directory and the spec."""

    spec_path: str
    run_dir: str
    group_id: str
    #: 0: stage 1 (first runs, warm reruns); n ≥ 1: the group's launch in stage-2 round n.
    round_no: int
    rehearse: bool
    ignore_hardware: bool
    #: stage 1: cells of this group to measure again although tried (`--retry-failed`)
    retry: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The job's name in jobs.json: one job per group and stage at a time."""
        return f"{self.group_id}.r{self.round_no}"


def shared_plan(source: SpecFile, run_dir: RunDir) -> Plan:
    """The spec's plan with the cells earlier rounds' bisection added (plan.json, which the
    controller rewrites after each round), so this job's policy knows them: without them a
    midpoint measured in round 1 could not get its reruns in round 2."""
    plan = expand(source.spec, source.hash)
    path = run_dir.path / "plan.json"
    with contextlib.suppress(ValueError, OSError):  # missing or unreadable: adds nothing
        plan.adopt_added(Plan.model_validate_json(path.read_text(encoding="utf-8")))
    return plan


def run_task(task: GroupTask) -> dict[str, Any]:
    """Run one job's work (module-level so submitit can pickle it by reference)."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if threading.current_thread() is threading.main_thread():
        # replaces submitit's handler, which would raise inside whatever runs (a request)
        signal.signal(signal.SIGUSR2, _on_time_limit)
    try:
        return _run(task)
    except TimeLimitReached:
        raise RuntimeError(TIME_LIMIT_MESSAGE) from None


def _run(task: GroupTask) -> dict[str, Any]:
    source = read_spec(task.spec_path)
    rd = RunDir(task.run_dir, shard=task.group_id)
    spec = from_run_dir(source.spec, Path(task.run_dir))  # auto: the prior the controller chose
    source = source.with_spec(spec)
    engine: Engine
    if task.rehearse:
        engine = rehearsal_engine(spec, spec.experiment, negatable_for(spec.engine))
    else:
        engine = for_spec(spec.engine, negatable_for(spec.engine))
    hardware = None
    if engine.launches and not task.rehearse:
        hardware = hardware_gate(spec, task.ignore_hardware)
    recorder = ShardRecorder(rd)
    measurer = Measurer(
        source,
        shared_plan(source, rd),
        engine,
        recorder,
        RunOptions(task.rehearse, PlainObserver()),
        hardware=hardware,
        retry=task.retry,  # tagged extra.retry as on one node (`Measurer.record`)
    )
    policy = verify.policy_for(spec, measurer.plan)
    group = measurer.plan.group(task.group_id)

    # the same work items the local executor consumes (verify.Schedule), one launch of them:
    # stage 1 sees the other groups' numbers as they land (the baseline's, on another node)
    if task.round_no == 0:
        schedule = verify.Schedule(policy, measurer.refreshed, retry=task.retry)
        launches = [schedule.stage1(group)]
    else:
        schedule = verify.Schedule(policy, lambda: measurer.measurements)
        launches = list(itertools.islice(schedule.round(task.round_no, [group]), 1))
    for launch in launches:
        measurer.measure_launch(launch, job=os.environ.get("SLURM_JOB_ID"))
    return {
        "group": task.group_id,
        "round": task.round_no,
        "node": recorder.node,
        "measured": measurer.new_measurements,
        "failed": measurer.new_failed,
    }

"""The body of one Slurm job: one server group's share of one stage, on whatever node Slurm
gave it, reading and appending to the shared run directory.

A job is a `GroupTask` (picklable, a few strings): stage 1 (`round_no` 0) measures the group's
cells not yet measured and their warm reruns on the same server; stage 2 (`round_no` n) is the
group's launch in round n (`verify.Schedule.round` for that one group). Both compute what is left
from the run directory when they start, so a job that is submitted again after one that died
measures only what is missing. Everything the job appends goes to files only it writes
(`RunDir(shard=group)`, env.d/<group>.json); the controller merges env.d into env.json.

Parallel groups see each other's measurements only as they land in the shared directory: a
candidate's warm-rerun check sees the baseline's numbers only if the baseline's job measured
that point first; a cell left surprising gets its fresh-server rerun in stage 2 either way.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrixrun import verify
from matrixrun.core.measurement import Measurement
from matrixrun.core.redact import redact_json
from matrixrun.engines import for_spec
from matrixrun.engines.base import Engine
from matrixrun.engines.sim import rehearsal_engine
from matrixrun.flags import negatable_for
from matrixrun.plan import Plan
from matrixrun.run.gates import hardware_gate
from matrixrun.run.progress import PlainObserver
from matrixrun.run.runner import Runner, RunOptions
from matrixrun.rundir.environment import capture_environment, read_environment
from matrixrun.rundir.results import RunDir
from matrixrun.spec import load_spec
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


class NodeRunner(Runner):
    """The runner inside a job: the same launches and measurements, but env.json facts go to
    env.d/<group>.json (several nodes rewriting one env.json would lose each other's
    servers), and every server instance records the node and GPUs it ran on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.node = socket.gethostname()
        self.failed_here = 0

    def record(self, m: Measurement, note: str = "", round_no: int | None = None) -> None:
        super().record(m, note, round_no)
        self.failed_here += 0 if m.ok else 1

    def refreshed(self) -> list[Measurement]:
        """Every group's measurements as the shared run directory holds them now (this job
        appends to the same list, so its own are there too)."""
        self.measurements[:] = self.run_dir.measurements()
        return self.measurements

    def env_shard(self) -> Path:
        return self.run_dir.path / "env.d" / f"{self.run_dir.shard}.json"

    def adopt_shared_plan(self) -> None:
        """The cells earlier rounds' bisection added (plan.json, which the controller
        rewrites after each round), so this job's policy knows them: without them a midpoint
        measured in round 1 could not get its reruns in round 2."""
        path = self.run_dir.path / "plan.json"
        with contextlib.suppress(ValueError, OSError):  # missing or unreadable: adds nothing
            self.plan.adopt_added(Plan.model_validate_json(path.read_text()))
        self._on_file |= {c.cell_id for c in self.plan.cells()}  # plan.json holds them

    def write_plan_file(self) -> None:
        """plan.d/<group>.json, not plan.json: the controller is plan.json's only writer and
        merges each job's added cells into it (`session.merge_plan`). Written before the
        added cell is measured, so a job killed while measuring it loses nothing."""
        rd = self.run_dir
        rd.write_json(f"plan.d/{rd.shard}.json", redact_json(self.plan.model_dump(mode="json")))
        self._on_file = {c.cell_id for c in self.plan.cells()}

    def write_env_file(self) -> None:
        env = capture_environment(
            self.spec, simulated=self.options.rehearse, time_scale=self.engine.time_scale.factor
        )
        previous = read_environment(self.env_shard())
        here = {
            name: record.model_copy(update={"node": self.node, "gpu_serials": self.serials})
            for name, record in self.servers.items()
        }
        env.servers = {**(previous.servers if previous else {}), **here}
        if self.hardware is not None:
            env.hardware_check = self.hardware
            env.gpus = list(self.hardware.gpus)
        elif previous is not None:
            env.hardware_check, env.gpus = previous.hardware_check, previous.gpus
        shard = str(self.env_shard().relative_to(self.run_dir.path))
        self.run_dir.write_json(shard, redact_json(env.model_dump(mode="json")))  # as env.json


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
    spec_path = Path(task.spec_path)
    spec = load_spec(spec_path)
    rd = RunDir(task.run_dir, shard=task.group_id)
    spec = from_run_dir(spec, Path(task.run_dir))  # auto: the prior the controller chose
    engine: Engine
    if task.rehearse:
        engine = rehearsal_engine(spec, spec.experiment, negatable_for(spec.engine))
    else:
        engine = for_spec(spec.engine, negatable_for(spec.engine))
    runner = NodeRunner(
        spec, spec_path.read_text(), rd, engine, RunOptions(task.rehearse, PlainObserver())
    )
    if engine.launches and not task.rehearse:
        runner.hardware = hardware_gate(spec, task.ignore_hardware)
    runner.adopt_shared_plan()
    policy = verify.policy_for(spec, runner.plan)
    group = runner.plan.group(task.group_id)

    # the same work items the local runner consumes (verify.Schedule), one launch of them:
    # stage 1 sees the other groups' numbers as they land (the baseline's, on another node)
    if task.round_no == 0:
        runner.retry = set(task.retry)  # tagged extra.retry as on one node (`Runner.record`)
        schedule = verify.Schedule(policy, runner.refreshed, retry=runner.retry)
        launches = [schedule.stage1(group)]
    else:
        schedule = verify.Schedule(policy, lambda: runner.measurements)
        launches = list(itertools.islice(schedule.round(task.round_no, [group]), 1))
    for launch in launches:
        runner.run_launch(launch, job=os.environ.get("SLURM_JOB_ID"))
    return {
        "group": task.group_id,
        "round": task.round_no,
        "node": runner.node,
        "measured": runner.new_measurements,
        "failed": runner.failed_here,
    }

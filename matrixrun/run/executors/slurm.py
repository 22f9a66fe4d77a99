"""`matrixrun run SPEC --executor slurm`: every server group's work becomes a Slurm job,
submitted through submitit, and this process (the controller, on a login node) waits for them.

Order of work (the verify policy's, spread over nodes):
- stage 1: one job per server group, all submitted at once (at most `--max-parallel` in the
  queue at a time); each measures its group's cells and their warm reruns (`node.run_task`);
- stage 2: each planned round, from the measurements of the whole matrix once the previous
  stage ended: one job per group that the round relaunches (a fresh server, as on one node);
- when the last job ended: plan.json and env.json are merged from the jobs' plan.d and env.d
  files; the end is the session's, as on one node (`run/session.py`: settings, analysis, the
  report from the run directory alone).

The controller is the only writer of jobs.json, env.json and results.jsonl (where it records,
for a stage-1 job that failed, was cancelled or timed out, each cell it left unmeasured as a
failed measurement with Slurm's reason, so the report's failures show them and the rest of the
matrix goes on). Jobs append to results.d/<group>.jsonl; `RunDir` merges on reading.

Job states come from sacct (`sacct.py`; it needs Slurm's accounting, slurmdbd: without it a
job that dies without writing its result is indistinguishable from one still being cleaned
up), with squeue as the fallback for clusters without accounting. `--resume` reads jobs.json
and waits for jobs still queued or running instead of submitting their groups again. On Ctrl-C
the controller asks (through `on_interrupt`) whether to cancel the jobs or leave them running.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matrixrun import verify
from matrixrun.core.errors import InputError, MatrixError
from matrixrun.core.timescale import TimeScale
from matrixrun.plan import ServerGroup
from matrixrun.run.executors.node import TIME_LIMIT_MESSAGE, GroupTask, run_task
from matrixrun.run.executors.sacct import SlurmState, query_states, slurm_tool
from matrixrun.run.session import merge_plan
from matrixrun.rundir.environment import read_environment
from matrixrun.rundir.jobs import QUEUED, JobRecord, node_sharing, read_jobs
from matrixrun.rundir.results import now_iso
from matrixrun.spec import Spec
from matrixrun.verify import first_pass

if TYPE_CHECKING:
    from matrixrun.run.measurer import Measurer
    from matrixrun.run.session import Opening

#: Asked on Ctrl-C with the jobs still queued or running: True cancels them, False leaves them.
OnInterrupt = Callable[[Sequence[JobRecord]], bool]


#: How often the controller asks Slurm about its jobs (and reads new measurements).
POLL_S = 2.0
#: A job's time limit is its estimate times this, plus `SLACK_S` (Python start, gates).
TIME_MARGIN = 1.5
SLACK_S = 300.0
#: A job that neither sacct nor squeue has known for this long is given up as failed.
LOST_AFTER_S = 120.0


class SlurmInterrupted(MatrixError):
    """Ctrl-C while jobs were queued or running; says what became of them."""

    exit_code = 130


@dataclass(frozen=True)
class SlurmOptions:
    #: The spec the jobs load (the user's file: a rehearsal profile path is relative to it;
    #: `run_experiment` checked it equals the run directory's spec.yaml on a resume).
    spec_path: str
    partition: str | None = None
    max_parallel: int | None = None
    #: More sbatch options (`--slurm-arg account=lab`), written as `#SBATCH --key=value`.
    extra: dict[str, str] = field(default_factory=dict)
    ignore_hardware: bool = False
    on_interrupt: OnInterrupt | None = None
    poll_s: float = POLL_S


def parse_slurm_args(items: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` strings (sbatch long options without the dashes) into a dict."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("_", "-")
        if not sep or not key:
            raise InputError(
                f"--slurm-arg {item!r}: give an sbatch option as KEY=VALUE, e.g. "
                "--slurm-arg account=mylab or --slurm-arg cpus-per-task=16"
            )
        out[key] = value
    return out


def time_limit_minutes(spec: Spec, scale: TimeScale, group: ServerGroup, round_no: int) -> int:
    """A job's time limit from the plan's estimate (`estimate.launch`, `estimate.cell`), or
    from the spec's limits where it gives none (startup_timeout, cell_timeout: upper bounds),
    for one launch and every cell of the group twice in stage 1 (first run and warm rerun),
    once in a stage-2 round; in server time (a rehearsal runs `time_scale` times faster)."""
    launch = spec.estimate.launch or spec.limits.startup_timeout
    cell = spec.estimate.cell or spec.limits.cell_timeout
    runs = len(group.cells) * (2 if round_no == 0 else 1)
    seconds = scale.server_seconds(launch + runs * cell)
    return max(5, math.ceil((seconds * TIME_MARGIN + SLACK_S) / 60))


class SlurmExecutor:
    """Runs a plan's server groups as Slurm jobs (see the module docstring)."""

    name = "slurm"
    servers_here = False

    def __init__(self, options: SlurmOptions) -> None:
        # here, before the run directory exists: a login node without submitit or sbatch
        # is told so before anything is written
        self._submitit = _import_submitit()
        slurm_tool("sbatch")
        self.options = options
        self._missing: dict[str, int] = {}

    # -- the whole run --------------------------------------------------------------------
    def dispatch(self, measurer: Measurer, opening: Opening) -> None:
        """Jobs an earlier session left queued or running first (waited for, not submitted
        again), stage 1's jobs, then each stage-2 round's; the jobs' shards merged at the end.
        `measurer` is the controller's: it launches nothing, and records only the cells a
        failed job left (`_ended`) and the merged plan and servers."""
        self.measurer = measurer
        rd = self.rd = measurer.run_dir
        self.book = read_jobs(rd.path / "jobs.json")
        self.book.partition = self.options.partition
        self.book.max_parallel = self.options.max_parallel
        self._merge_env()  # jobs.json's node summary of the servers so far
        policy = opening.policy
        plan = measurer.plan
        self._seen = {self._mkey(m) for m in measurer.measurements}
        self._last_line = ""
        try:
            self._wait([j for j in self.book.jobs if not j.ended], [])
            self._wait([], [self._task(g, 0) for g in plan.groups if self._todo(g)])
            for round_no in range(
                verify.rounds_done(policy, rd.measurements()) + 1, policy.rounds + 1
            ):
                batch = policy.next_round(round_no, rd.measurements())
                if not batch:
                    break
                self._wait([], [self._task(g, round_no) for g, _ in batch])
                if merge_plan(measurer):  # the next round's policy knows the added cells
                    policy = verify.policy_for(measurer.spec, plan)
        except KeyboardInterrupt:
            self._interrupted()
        merge_plan(measurer)
        self._merge_env()

    def _todo(self, group: ServerGroup) -> bool:
        return bool(first_pass(group, self.measurer.measurements, self.measurer.retry))

    def _task(self, group: ServerGroup, round_no: int) -> GroupTask:
        return GroupTask(
            spec_path=str(self._spec_path()),
            run_dir=str(self.rd.path.resolve()),
            group_id=group.group_id,
            round_no=round_no,
            rehearse=self.measurer.options.rehearse,
            ignore_hardware=self.options.ignore_hardware,
            retry=tuple(c.cell_id for c in group.cells if c.cell_id in self.measurer.retry)
            if round_no == 0
            else (),
        )

    def _spec_path(self) -> Path:
        return Path(self.options.spec_path).resolve()

    # -- submitting and waiting -----------------------------------------------------------
    def _wait(self, attached: list[JobRecord], tasks: list[GroupTask]) -> None:
        """Submit `tasks` (at most max_parallel jobs live at once) and wait until every one
        of them and every `attached` job has ended, recording each as it ends."""
        live = list(attached)
        queue = list(tasks)
        limit = self.options.max_parallel or len(queue) + len(live) or 1
        while queue or live:
            while queue and len(live) < limit:
                live.append(self._submit(queue.pop(0)))
            self._save()
            states = query_states([j.job_id for j in live])
            for job in list(live):
                self._update(job, states.get(job.job_id))
                if job.ended:
                    live.remove(job)
                    self._ended(job)
            self._show_progress()
            if queue or live:
                time.sleep(self.options.poll_s)
        self._save()
        # what the jobs measured, for the next decision (which groups still have cells)
        self.measurer.reload()

    def _submit(self, task: GroupTask) -> JobRecord:
        m = self.measurer
        group = m.plan.group(task.group_id)
        minutes = time_limit_minutes(m.spec, m.engine.time_scale, group, task.round_no)
        gres = f"gpu:{group.hardware.count}" if group.hardware.count else None
        ex = self._submitit.SlurmExecutor(folder=str(self._folder()), max_num_timeout=0)
        params: dict[str, Any] = {
            "job_name": f"matrixrun-{m.plan.experiment}-{task.key}",
            "time": minutes,
            "nodes": 1,
            "ntasks_per_node": 1,
        }
        if gres:
            params["gres"] = gres
        if self.options.partition:
            params["partition"] = self.options.partition
        if self.options.extra:
            params["additional_parameters"] = dict(self.options.extra)
        ex.update_parameters(**params)
        try:
            job = ex.submit(run_task, task)
        except Exception as exc:  # submitit raises its own error types for sbatch failures
            raise InputError(f"sbatch refused the job for group {task.group_id}: {exc}") from exc
        record = JobRecord(
            key=task.key,
            group=group.group_id,
            arm=group.arm,
            slice=group.slice,
            round=task.round_no,
            job_id=str(job.job_id),
            submitted_at=now_iso(),
            time_limit_min=minutes,
            gres=gres,
            partition=self.options.partition,
            log=str(Path(str(job.paths.stderr)).resolve().relative_to(self.rd.path.resolve())),
        )
        self.book.jobs.append(record)
        self.rd.event(
            "slurm_submit",
            job=record.job_id,
            task=task.key,  # not `key`: a secret's name, masked in the audit log
            group=group.group_id,
            arm=group.arm,
            round=task.round_no,
            time_limit_min=minutes,
            gres=gres,
        )
        return record

    def _folder(self) -> Path:
        return self.rd.path.resolve() / "slurm" / "%j"

    def _update(self, job: JobRecord, state: SlurmState | None) -> None:
        if state is None:
            result = self._result(job)
            if result is not None:
                # gone from the queue (no accounting) with its result written
                job.state = "COMPLETED" if result[0] == "success" else "FAILED"
                job.state_detail = f"{job.state} (from submitit's result file)"
                return
            # just submitted (not in sacct yet), or lost: given up after LOST_AFTER_S
            self._missing[job.job_id] = self._missing.get(job.job_id, 0) + 1
            if self._missing[job.job_id] * self.options.poll_s > LOST_AFTER_S:
                job.state, job.state_detail = "FAILED", "unknown to sacct and squeue"
            return
        self._missing.pop(job.job_id, None)
        job.state, job.state_detail = state.state, state.detail
        job.exit_code, job.slurm_reason = state.exit_code, state.reason
        job.node = state.node or job.node
        job.started_at = state.start or job.started_at
        job.ended_at = state.end if job.ended else None
        job.elapsed = state.elapsed

    def _result(self, job: JobRecord) -> tuple[str, Any] | None:
        """submitit's result file of the job: ("success", value) or ("error", traceback)."""
        sub = self._submitit.SlurmJob(folder=str(self._folder()), job_id=job.job_id)
        path = Path(sub.paths.result_pickle)
        if not path.exists():
            return None
        try:
            outcome, value = self._submitit.core.utils.pickle_load(path)
        except Exception:  # a result torn by the kill: as if none
            return None
        return str(outcome), value

    def _ended(self, job: JobRecord) -> None:
        """A job ended: if it did not complete, say why (Slurm's state and exit code, the
        Python error or the last line it wrote) and fail the cells it left unmeasured."""
        result = self._result(job)
        if job.state == "COMPLETED" and (result is None or result[0] == "success"):
            self.rd.event("slurm_end", job=job.job_id, task=job.key, state=job.state, node=job.node)
            self._merge_env()
            return
        if result is not None and TIME_LIMIT_MESSAGE in str(result[1]):
            job.state = "TIMEOUT"  # stopped itself on Slurm's warning, just before the limit
        elif job.state == "COMPLETED":
            job.state = "FAILED"  # the function raised, though the step exited 0
        job.reason = self._why(job, result)
        self.rd.event(
            "slurm_end",
            job=job.job_id,
            task=job.key,
            state=job.state,
            node=job.node,
            reason=job.reason,
        )
        self._merge_env()
        if job.cancelled_by_matrixrun or job.round != 0:
            return  # a stage-2 job's reruns are not owed; jobs.json says what happened
        group = self.measurer.plan.group(job.group)
        for m in self.measurer.fail_unmeasured(group, job.reason):
            self._seen.add(self._mkey(m))
            job.cells_failed += 1

    def _why(self, job: JobRecord, result: tuple[str, Any] | None) -> str:
        where = f" on {job.node}" if job.node else ""
        after = f" after {job.elapsed}" if job.elapsed else ""
        head = {
            "TIMEOUT": f"reached its time limit of {job.time_limit_min} min",
            "CANCELLED": f"was cancelled ({job.state_detail or 'CANCELLED'})",
            "OUT_OF_MEMORY": "ran out of memory",
            "NODE_FAIL": "lost its node",
            "PREEMPTED": "was preempted",
            "FAILED": "failed",
        }.get(job.state, f"ended {job.state}")
        text = f"Slurm job {job.job_id}{where} {head}{after}"
        if job.exit_code and job.exit_code != "0:0":
            text += f", exit code {job.exit_code}"
        detail = None
        if result is not None and result[0] == "error":
            lines = [ln for ln in str(result[1]).strip().splitlines() if ln.strip()]
            detail = lines[-1].strip() if lines else None
        elif result is not None:
            detail = "its work had completed (submitit's result file says so)"
        elif job.log:
            detail = _last_line(self.rd.path / job.log)
        if detail:
            text += f"; last words: {detail}"
        return text

    # -- records and display --------------------------------------------------------------
    def _save(self) -> None:
        self.rd.write_json("jobs.json", self.book.model_dump(mode="json"))

    def _merge_env(self) -> None:
        """env.json with every job's servers so far (`RunDirRecorder.environment` merges
        env.d/), then jobs.json's summary of which nodes each arm ran on and shared with the
        baseline."""
        self.measurer.write_environment()
        env = read_environment(self.rd.path / "env.json")
        by_arm: dict[str, set[str]] = {}
        for rec in env.servers.values() if env is not None else ():
            if rec.node:
                by_arm.setdefault(rec.arm, set()).add(rec.node)
        plan = self.measurer.plan
        self.book.nodes_by_arm = {a: sorted(n) for a, n in sorted(by_arm.items())}
        self.book.shared_nodes, self.book.never_shared_node = node_sharing(
            by_arm, plan.baseline, plan.candidates
        )
        self._save()

    @staticmethod
    def _mkey(m: Any) -> tuple[str, int, str]:
        return (m.cell_id, m.attempt, m.instance)

    def _show_progress(self) -> None:
        """New measurements (from every node) and one line of job states when it changes."""
        obs = self.measurer.options.observer
        for m in self.rd.measurements():
            if self._mkey(m) not in self._seen:
                self._seen.add(self._mkey(m))
                obs.measured(m, "")
        line = progress_line(self.book.jobs)
        if line != self._last_line:
            self._last_line = line
            obs.status(line)

    def _interrupted(self) -> None:
        live = [j for j in self.book.jobs if not j.ended]
        if not live:
            return
        ask = self.options.on_interrupt
        cancel = bool(ask(live)) if ask is not None else False
        ids = [j.job_id for j in live]
        if cancel:
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                subprocess.run(  # noqa: S603 - fixed argv, no shell
                    [slurm_tool("scancel"), *ids], capture_output=True, timeout=60, check=False
                )
            for j in live:
                j.cancelled_by_matrixrun = True
                j.state = "CANCELLED"
                j.reason = "cancelled by matrixrun on Ctrl-C"
        else:
            for j in live:
                j.left_running = True
        self._save()
        self.rd.event("slurm_interrupt", jobs=ids, cancelled=cancel)
        resume = f"matrixrun run SPEC --executor slurm --resume {self.rd.path}"
        if cancel:
            raise SlurmInterrupted(
                f"interrupted: cancelled Slurm jobs {', '.join(ids)}; everything measured "
                f"is kept, and `{resume}` submits what is left"
            )
        raise SlurmInterrupted(
            f"interrupted: left Slurm jobs {', '.join(ids)} queued or running (they keep "
            f"measuring into {self.rd.path}); `{resume}` waits for them instead of "
            "submitting again, `scancel " + " ".join(ids) + "` stops them"
        )


def progress_line(jobs: Sequence[JobRecord]) -> str:
    """`slurm: 1 queued, 2 running, 3 done, 1 failed | g1 slow r0 RUNNING vm | ...`: the
    latest job of every group and stage. Pure."""
    latest: dict[str, JobRecord] = {}
    for j in jobs:
        latest[j.key] = j
    counts = {"queued": 0, "running": 0, "done": 0, "failed": 0}
    parts = []
    for j in latest.values():
        kind = (
            "queued"
            if j.state in QUEUED
            else "failed"
            if j.failed
            else "done"
            if j.ended
            else "running"
        )
        counts[kind] += 1
        where = f" {j.node}" if j.node and kind != "queued" else ""
        parts.append(f"{j.group} {j.arm} r{j.round} {j.state}{where}")
    head = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    return f"slurm: {head} | " + " | ".join(parts)


def _last_line(path: Path) -> str | None:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return None
    return lines[-1][:300] if lines else None


def _import_submitit() -> Any:
    try:
        import submitit  # optional (matrixrun[slurm]): imported when a Slurm run starts
    except ImportError as exc:
        raise InputError(
            "--executor slurm needs submitit: pip install 'matrixrun[slurm]' (on the login "
            f"node and in the environment the jobs run, {sys.executable})"
        ) from exc
    import submitit.core.utils

    return submitit

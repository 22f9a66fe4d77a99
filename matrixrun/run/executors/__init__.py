"""Where a plan's server groups run: here, one after another (`local`, what `matrixrun run`
always did), or as Slurm jobs on a cluster's nodes at the same time (`slurm`).

A server group is already a self-contained unit of work (its slice of the plan, and the run
directory it reads and appends to), so an executor only decides where and when each group's
work runs; what to measure stays the verify policy's, how the measurer's, and the run's start and
end are the session's (`run/session.py`: the same files whatever the executor). The interface is the
run directory: a Slurm job is `node.run_task` on another machine, reading the same directory
over a shared file system and appending to files of its own (`RunDir(shard=...)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from matrixrun.core.errors import InputError
from matrixrun.run.executors.local import LocalExecutor
from matrixrun.run.executors.slurm import SlurmExecutor, SlurmOptions, parse_slurm_args
from matrixrun.run.session import Executor
from matrixrun.rundir.jobs import read_jobs

if TYPE_CHECKING:
    from matrixrun.run.executors.slurm import OnInterrupt

EXECUTORS = ("local", "slurm")

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "make_executor", "refuse_local_resume"]


def refuse_local_resume(run_dir: str | Path) -> None:
    """A run directory whose Slurm jobs may still be queued or running is resumed with
    `--executor slurm` (which waits for them); measuring it here too would run those groups
    twice at once. (jobs.json may be older than the jobs: then the advice costs a poll.)"""
    live = [j.job_id for j in read_jobs(Path(run_dir) / "jobs.json").jobs if not j.ended]
    if live:
        raise InputError(
            f"{run_dir} has Slurm jobs that may still be queued or running "
            f"({', '.join(live)}); resume it with --executor slurm, which waits for them "
            "instead of measuring their groups a second time"
        )


def make_executor(
    kind: str,
    spec_path: str,
    *,
    partition: str | None = None,
    max_parallel: int | None = None,
    slurm_args: Sequence[str] = (),
    ignore_hardware: bool = False,
    on_interrupt: OnInterrupt | None = None,
) -> Executor:
    """The executor `matrixrun run --executor KIND` asked for; options that only mean
    something on Slurm are refused with one sentence elsewhere."""
    if kind not in EXECUTORS:
        raise InputError(f"--executor {kind}: unknown; choose one of {', '.join(EXECUTORS)}")
    if kind == "local":
        given = [
            name
            for name, value in (
                ("--partition", partition),
                ("--max-parallel", max_parallel),
                ("--slurm-arg", list(slurm_args) or None),
            )
            if value is not None
        ]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise InputError(f"{', '.join(given)} only {verb} with --executor slurm")

        return LocalExecutor()

    if max_parallel is not None and max_parallel < 1:
        raise InputError(f"--max-parallel {max_parallel}: give at least 1 job at a time")
    return SlurmExecutor(
        SlurmOptions(
            spec_path=spec_path,
            partition=partition,
            max_parallel=max_parallel,
            extra=parse_slurm_args(slurm_args),
            ignore_hardware=ignore_hardware,
            on_interrupt=on_interrupt,
        )
    )

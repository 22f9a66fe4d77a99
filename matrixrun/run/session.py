"""A run's start and its end, written once, whatever executes the measurements (issue 43).

`matrixrun run` is three steps, and only the middle one depends on where the servers run:

    start ──▶ executor.dispatch ──▶ finish
    run directory, spec copy      local: the verify     settings.json with the gates'
    and hash, plan.json,          policy's launches     outcomes, run_end, verdict.json,
    settings.json, env.json,      in order, here;       report.md redacted as a whole,
    a killed session's repairs,   slurm: one job per    the summary the CLI prints
    run_start                     group and stage,
                                  then the jobs' shards
                                  merged

The Slurm controller once had its own copy of the start and the end; the copies drifted (its
report was not redacted as a whole, its progress and its skipped count were counted another
way). Now both paths write the same files through the same code, so a run directory does not
depend on the executor beyond the executor's own files (jobs.json, the shards, `executor` in
run_start); tests/test_session.py runs one spec both ways and compares settings.json and the
report's head.

The session holds no state of its own: it works on the measurer it is given (`run/measurer.py`,
made once with everything it needs), whose recorder (`run/record.py`) is the run directory's
own. The shards of a Slurm run (plan.d/, env.d/) are merged whenever that recorder writes
plan.json and env.json, at the start too, whatever the executor: a resumed run keeps the
cells its jobs added and the servers they recorded. One node has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from matrixrun import verify
from matrixrun.core import interrupt
from matrixrun.core.measurement import over_failure_rate, retry_note, still_failed
from matrixrun.core.redact import redact_file
from matrixrun.run import outputs
from matrixrun.run.resume import mend_run_dir

if TYPE_CHECKING:
    from matrixrun.run.measurer import Measurer
    from matrixrun.verify import Policy, Unfinished


@dataclass
class RunSummary:
    run_dir: Path
    measured: int
    failed: int
    skipped: int
    report: Path | None
    #: What the run found and mended in its directory before measuring (servers a killed run
    #: left running, a torn last record): one sentence each, for the CLI to print.
    notes: list[str] = field(default_factory=list)
    #: Cells whose requests failed more often than `verify.failure_rate` allows (the
    #: analysis will not trust them): one sentence each. A run with any exits 1.
    over_failure_rate: list[str] = field(default_factory=list)
    #: Why the results store could not be asked for a noise prior (`verify.noise_from: auto`;
    #: the run went on without one), for the CLI to say with the recording's outcome.
    store_error: Exception | None = None


@dataclass(frozen=True)
class Opening:
    """What the start found and decided, for the executor and for the end."""

    #: The verify policy over the plan as started (an executor that adds cells rebuilds it).
    policy: Policy
    #: The stage-2 round a killed session left half done (None: none), for the local order.
    unfinished: Unfinished | None
    #: Measurements on file when the run started: the end counts this session's from it.
    before: int
    #: Cells measured by an earlier session and not measured again (`--retry-failed`'s are).
    skipped: int
    notes: tuple[str, ...] = ()


class Executor(Protocol):
    """Where a run's measurements are made; it only dispatches the work, between the start
    and the end that every executor shares."""

    #: Recorded in the audit log's run_start (`local`, `slurm`).
    name: str
    #: Whether the servers run in this process's machine: then the hardware gate runs here
    #: before anything starts, and servers a killed session left running are stopped here.
    #: (False: the GPUs are on other nodes, each job gates its node, and a pid file here may
    #: be a live job's server.)
    servers_here: bool

    def dispatch(self, measurer: Measurer, opening: Opening) -> None:
        """Measure what the verify policy asks for, into `measurer.run_dir`; return once every
        measurement is on file and merged (Ctrl-C: KeyboardInterrupt, or the executor's own
        error saying what became of the work in flight)."""
        ...


def run(measurer: Measurer, executor: Executor, store_error: Exception | None = None) -> RunSummary:
    """Start, dispatch, finish; a Ctrl-C stops it at the next safe point as a
    KeyboardInterrupt (`core/interrupt.py`), on either path."""
    with interrupt.handling():
        opening = start(measurer, executor)
        executor.dispatch(measurer, opening)
        return finish(measurer, opening, store_error)


def start(measurer: Measurer, executor: Executor) -> Opening:
    """The run's fixed files and the repairs of a directory an earlier session left, then
    run_start. plan.json comes first: a resumed run's added cells are its own."""
    rd = measurer.run_dir.create()
    merge_plan(measurer)
    notes, unfinished = mend_run_dir(
        rd, measurer.plan, measurer.measurements, stop_servers=executor.servers_here
    )
    rd.write_text("spec.yaml", measurer.source.text)
    rd.write_text("spec.sha256", measurer.source.sha256 + "\n")
    rd.results_file.touch()  # `matrixrun report` looks for it, even before a job has measured
    measurer.write_settings()
    measurer.write_environment()  # with the servers of an earlier session and of any jobs
    policy = verify.policy_for(measurer.spec, measurer.plan)
    before = len(measurer.measurements)
    cost = measurer.plan.cost
    most = cost.runs_worst_case + cost.bisection_runs_worst_case
    options = measurer.options
    options.observer.start(policy.expected_runs(), most, done=before)
    rd.event(
        "run_start",
        resumed=bool(before),
        rehearse=options.rehearse,
        executor=executor.name,
    )
    retry = measurer.retry
    plan_cells = measurer.plan.cells()
    skipped = sum(1 for c in plan_cells if measurer.attempts(c) and c.cell_id not in retry)
    if retry:
        rd.event("retry_failed", cells=sorted(retry))
    if options.retry_failed:
        notes.append(retry_note(len(retry)))
    return Opening(policy, unfinished, before, skipped, tuple(notes))


def finish(
    measurer: Measurer, opening: Opening, store_error: Exception | None = None
) -> RunSummary:
    """Analyse and render from the run directory alone (`matrixrun analyse` + `report`), the
    report redacted as a whole (it is what `post` puts on a PR), and the summary."""
    interrupt.check()
    rd, obs = measurer.run_dir, measurer.options.observer
    obs.status("analysing")
    measurer.write_settings()  # now with every correctness gate's outcome
    ms = rd.measurements()
    measured = len(ms) - opening.before
    # before the report: a run directory with no run_end is one that stopped early
    rd.event("run_end", measured=measured)
    outputs.analyse_run(rd)
    report = redact_file(outputs.render_run(rd))
    obs.finish()
    return RunSummary(
        rd.path,
        measured,
        still_failed(ms),
        opening.skipped,
        report,
        list(opening.notes),
        over_failure_rate(ms, measurer.spec.verify.failure_rate),
        store_error,
    )


def merge_plan(measurer: Measurer) -> bool:
    """plan.json = the plan + the cells bisection added: those plan.json already holds (an
    earlier session's) and those a Slurm job wrote to plan.d/<group>.json before measuring
    them (`RunDirRecorder.plan`). This process is plan.json's only writer; a later round's
    jobs read it (`node.run_task`). True when the jobs' files added cells."""
    before = {c.cell_id for c in measurer.plan.cells()}
    measurer.write_plan()
    return bool({c.cell_id for c in measurer.plan.cells()} - before)

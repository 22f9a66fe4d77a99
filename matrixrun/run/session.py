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

The shards of a Slurm run (plan.d/, env.d/) are merged at the start too, whatever the executor:
a resumed run keeps the cells its jobs added and the servers they recorded. One node has none.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from matrixrun import verify
from matrixrun.core import interrupt
from matrixrun.core.measurement import over_failure_rate, retry_note, still_failed
from matrixrun.core.redact import redact_file
from matrixrun.plan import Plan
from matrixrun.run import outputs
from matrixrun.run.resume import mend_run_dir
from matrixrun.rundir.environment import read_environment

if TYPE_CHECKING:
    from matrixrun.run.runner import Runner
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

    def dispatch(self, runner: Runner, opening: Opening) -> None:
        """Measure what the verify policy asks for, into `runner.run_dir`; return once every
        measurement is on file and merged (Ctrl-C: KeyboardInterrupt, or the executor's own
        error saying what became of the work in flight)."""
        ...


def run(runner: Runner, executor: Executor, store_error: Exception | None = None) -> RunSummary:
    """Start, dispatch, finish; a Ctrl-C stops it at the next safe point as a
    KeyboardInterrupt (`core/interrupt.py`), on either path."""
    with interrupt.handling():
        opening = start(runner, executor)
        executor.dispatch(runner, opening)
        return finish(runner, opening, store_error)


def start(runner: Runner, executor: Executor) -> Opening:
    """The run's fixed files and the repairs of a directory an earlier session left, then
    run_start. plan.json comes first: a resumed run's added cells are its own."""
    rd = runner.run_dir.create()
    merge_plan(runner)
    notes, unfinished = mend_run_dir(
        rd, runner.plan, runner.measurements, stop_servers=executor.servers_here
    )
    rd.write_text("spec.yaml", runner.spec_text)
    rd.write_text("spec.sha256", runner.spec_sha256 + "\n")
    rd.results_file.touch()  # `matrixrun report` looks for it, even before a job has measured
    runner.write_settings_file()
    merge_env(runner)
    policy = verify.policy_for(runner.spec, runner.plan)
    before = len(runner.measurements)
    cost = runner.plan.cost
    most = cost.runs_worst_case + cost.bisection_runs_worst_case
    runner.options.observer.start(policy.expected_runs(), most, done=before)
    rd.event(
        "run_start",
        resumed=bool(before),
        rehearse=runner.options.rehearse,
        executor=executor.name,
    )
    retry = runner.retry
    skipped = sum(1 for c in runner.plan.cells() if runner.attempts(c) and c.cell_id not in retry)
    if retry:
        rd.event("retry_failed", cells=sorted(retry))
    if runner.options.retry_failed:
        notes.append(retry_note(len(retry)))
    return Opening(policy, unfinished, before, skipped, tuple(notes))


def finish(runner: Runner, opening: Opening, store_error: Exception | None = None) -> RunSummary:
    """Analyse and render from the run directory alone (`matrixrun analyse` + `report`), the
    report redacted as a whole (it is what `post` puts on a PR), and the summary."""
    interrupt.check()
    rd, obs = runner.run_dir, runner.options.observer
    obs.status("analysing")
    runner.write_settings_file()  # now with every correctness gate's outcome
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
        over_failure_rate(ms, runner.spec.verify.failure_rate),
        store_error,
    )


def merge_plan(runner: Runner) -> bool:
    """plan.json = the plan + the cells bisection added: those plan.json already holds (an
    earlier session's) and those a Slurm job wrote to plan.d/<group>.json before measuring
    them. This process is plan.json's only writer; a later round's jobs read it
    (`NodeRunner.adopt_shared_plan`). True when the jobs' files added cells."""
    before = {c.cell_id for c in runner.plan.cells()}
    for path in sorted((runner.run_dir.path / "plan.d").glob("*.json")):
        with contextlib.suppress(ValueError, OSError):  # torn or unreadable: adds nothing
            runner.plan.adopt_added(Plan.model_validate_json(path.read_text()))
    added = {c.cell_id for c in runner.plan.cells()} - before
    runner.write_plan_file()
    return bool(added)


def merge_env(runner: Runner) -> None:
    """env.json = this process's facts + every server so far, those the jobs recorded in
    env.d/<group>.json included (each with its node), so the report and a resume see every
    instance; a job's hardware gate stands for the run's when none ran here."""
    for path in sorted((runner.run_dir.path / "env.d").glob("*.json")):
        env = read_environment(path)
        if env is None:
            continue
        runner.servers.update(env.servers)
        if env.hardware_check is not None and runner.hardware is None:
            runner.hardware = env.hardware_check
    runner.write_env_file()

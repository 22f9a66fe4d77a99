"""`matrixrun run`: launch, measure, verify, analyse and report a spec, here or on Slurm; then
copy the report where it belongs and index the run in the results store."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from matrixrun.cli.exits import EXIT_FAILED, EXIT_INPUT, EXIT_OK, say
from matrixrun.cli.finish import record, step_summary
from matrixrun.core.redact import redact_text
from matrixrun.core.words import plural
from matrixrun.plan import expand
from matrixrun.plan.render import rehearsal_lines
from matrixrun.run.executors import make_executor, refuse_local_resume
from matrixrun.run.experiment import run_experiment
from matrixrun.run.progress import observer_for
from matrixrun.run.resume import require_run_dir
from matrixrun.rundir.jobs import JobRecord
from matrixrun.spec import SpecFile, read_spec


def cmd_run(args: argparse.Namespace) -> int:
    if args.retry_failed and not args.resume:
        say("--retry-failed measures again the failed cells of a run: give --resume RUN_DIR")
        return EXIT_INPUT
    if args.resume:
        require_run_dir(args.resume)  # before anything is said or started
    executor = None
    if args.executor != "local" or args.partition or args.max_parallel or args.slurm_arg:
        executor = make_executor(
            args.executor,
            args.spec,
            partition=args.partition,
            max_parallel=args.max_parallel,
            slurm_args=args.slurm_arg or (),
            ignore_hardware=args.ignore_hardware,
            on_interrupt=_ask_cancel_jobs,
        )
    elif args.resume:
        refuse_local_resume(args.resume)
    source = read_spec(args.spec)  # once: the preview, the checks and the run all take it
    if args.rehearse:
        _before_rehearsal(source)
    summary = run_experiment(
        source,
        out=args.out,
        resume=args.resume,
        rehearse=args.rehearse,
        observer=observer_for(),
        ignore_hardware=args.ignore_hardware,
        executor=executor,
        retry_failed=args.retry_failed,
    )
    for note in [*summary.notes, record(summary.run_dir, before=summary.store_error)]:
        if note:
            say(note)
    print(f"run directory: {summary.run_dir}")
    print(
        f"measured {summary.measured} (skipped {plural(summary.skipped, 'cell')} already "
        f"measured), failed measurements in the run: {summary.failed}"
    )
    if summary.report is not None:
        target = publish_report(summary.report, args)
        print(f"report: {target}")
        step_summary(summary.report.read_text(encoding="utf-8"))
    for sentence in summary.over_failure_rate:
        say(sentence)
    return EXIT_FAILED if summary.failed or summary.over_failure_rate else EXIT_OK


def _before_rehearsal(source: SpecFile) -> None:
    """What the rehearsal runs on, how long it takes, and each candidate the profile cannot
    tell from the baseline, said before the first launch (the same lines as `plan`)."""
    spec = source.spec
    for line in rehearsal_lines(spec, expand(spec)):
        say(line)


def _ask_cancel_jobs(jobs: Sequence[JobRecord]) -> bool:
    """Ctrl-C during `run --executor slurm`: cancel the jobs still queued or running, or leave
    them? Without a terminal to ask, they are left running (and the message says so)."""
    ids = " ".join(j.job_id for j in jobs)
    if not sys.stdin.isatty():
        say(f"interrupted; no terminal to ask, so Slurm jobs {ids} are left running")
        return False
    try:
        answer = input(
            f"\ncancel the {len(jobs)} Slurm jobs still queued or running ({ids})? [y/N] "
        )
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


def publish_report(report: Path, args: argparse.Namespace) -> Path:
    """Copy the report to reports/<spec stem>.md, a rehearsal's to runs/<stem>.rehearsal.md
    (or --report). A rehearsal is a try-out: written where git ignores it, it never dirties
    the committed example reports (`nox -s reports` regenerates those). With `--out DIR` and
    no `--report`, every file stays in DIR: the report is DIR/report.md and nothing is written
    outside it (a user who names where a run goes means all of it)."""
    if args.report:
        target = Path(args.report)
    elif getattr(args, "out", None):
        return report
    elif args.rehearse:
        target = Path("runs") / f"{Path(args.spec).stem}.rehearsal.md"
    else:
        target = Path("reports") / f"{Path(args.spec).stem}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(redact_text(report.read_text(encoding="utf-8")), encoding="utf-8")
    return target

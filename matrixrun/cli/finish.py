"""What commands do once they have written something: append the document to GitHub Actions'
job summary, index a finished run directory in the results store, and the `--fail-on` gate.
Shared by `plan`, `run`, `report`, `compare` and `ingest`, so each says it once."""

from __future__ import annotations

from pathlib import Path

from matrixrun.cli.exits import EXIT_FAILED, EXIT_OK, say
from matrixrun.cli.history_view import store_failed
from matrixrun.publish.ci import failing_candidates, parse_fail_on, write_step_summary
from matrixrun.store.record import record_run


def step_summary(markdown: str | None) -> None:
    """Append to GitHub Actions' job summary when GITHUB_STEP_SUMMARY is set (publish/ci.py)."""
    if markdown is not None and (warning := write_step_summary(markdown)):
        say(f"warning: {warning}")


def record(run_dir: Path, show: bool = False, before: Exception | None = None) -> str | None:
    """Index a finished run directory in the results store (`store.record.record_run`: never
    raises). One sentence when the store failed, here or already when the run asked it for
    a prior (`before`): printed, or returned."""
    failed = record_run(run_dir)
    note = store_failed(str(run_dir), before, failed) if (failed or before) else None
    if note and show:
        say(note)
    return note


def gate(run_dir: str, fail_on: str) -> int:
    """--fail-on: exit 1 when a candidate's overall verdict is one of those named, so CI can
    stop on it (the same verdict list as `post --fail-on`)."""
    failing = failing_candidates(run_dir, parse_fail_on(fail_on))
    for cand, why in failing:
        say(f"--fail-on {fail_on}: {cand} is {why}")
    return EXIT_FAILED if failing else EXIT_OK

"""Every committed run directory's report.md is what the report code renders today from the
files committed beside it (verdict.json as committed, not analysed again): the report's
safety net. A change to the report that moves one character of a real run's document fails
here, naming the run; a restructuring that moves nothing passes. (`test_committed_runs`
guards the numbers in verdict.json, `test_example_reports` the six documents under reports/.)

After a change that is meant to move the documents: `nox -s reports` re-renders every one."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from scripts_module import load_script

ROOT = Path(__file__).resolve().parent.parent


SCRIPT = load_script("example_reports")


def test_there_are_committed_run_directories() -> None:
    assert len(SCRIPT.RUN_DIRS) >= 10, SCRIPT.RUN_DIRS


@pytest.mark.parametrize("run", SCRIPT.RUN_DIRS)
def test_committed_report_is_what_the_run_directory_renders(run: str) -> None:
    committed = (ROOT / run / "report.md").read_text()
    today = SCRIPT.rendered_as_committed(ROOT / run)
    if today != committed:
        diff = "".join(
            list(
                difflib.unified_diff(
                    committed.splitlines(keepends=True),
                    today.splitlines(keepends=True),
                    "committed",
                    "today",
                    n=1,
                )
            )[:40]
        )
        pytest.fail(f"{run}/report.md differs from what it renders (`nox -s reports`):\n{diff}")

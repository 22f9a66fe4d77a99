"""Every committed run directory (reports/runs/**/results.jsonl) re-analysed today gives the
verdict.json committed beside it: the analysis's safety net. A change to the statistics that
moves any number, verdict, note or caveat of a real run fails here, with the run and the path
of the first field that moved; a refactor that moves nothing passes. (`test_example_reports`
checks the rendered documents of six of them; this checks the numbers of all of them.)

Floats are compared to 1e-6 relative, not bit for bit: the noise model's least squares and
scipy's distributions go through LAPACK and special functions whose results differ between the
numpy and scipy builds a fresh install gets (0.013460544657790223 against 0.013460544682766883
on one: 2e-9), and the moderation and the fit iterate on them, so the last ten bits are not
the code's; a real change to the statistics moves a number by far more than a millionth, and
no number is printed to more than 4 significant digits. Everything else (verdicts, notes,
counts, keys, order) must be equal.

After a change that is meant to move numbers: `python scripts/example_reports.py` rewrites
the example reports; re-analyse the other run directories with `matrixrun analyse RUN_DIR`
and commit their verdict.json with it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from matrixrun.run import outputs
from matrixrun.rundir.results import RunDir

ROOT = Path(__file__).resolve().parent.parent
#: Relative tolerance of a float (see the module's docstring), and the absolute one below
#: which two numbers near zero count as equal.
REL, ABS = 1e-6, 1e-12
RUNS = sorted(p.parent for p in (ROOT / "reports" / "runs").glob("**/results.jsonl"))


def _moved(committed: Any, today: Any, where: str = "$") -> str | None:
    """The path of the first value that differs (floats to `REL` relative), or None."""
    if isinstance(committed, float) or isinstance(today, float):
        numbers = isinstance(committed, int | float) and isinstance(today, int | float)
        if numbers and math.isclose(committed, today, rel_tol=REL, abs_tol=ABS):
            return None
        return f"{where}: committed {committed!r}, today {today!r}"
    if isinstance(committed, dict) and isinstance(today, dict):
        if list(committed) != list(today):
            return f"{where}: committed keys {list(committed)}, today {list(today)}"
        for k in committed:
            found = _moved(committed[k], today[k], f"{where}.{k}")
            if found:
                return found
        return None
    if isinstance(committed, list) and isinstance(today, list):
        if len(committed) != len(today):
            return f"{where}: committed {len(committed)} items, today {len(today)}"
        for i, (a, b) in enumerate(zip(committed, today, strict=True)):
            found = _moved(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    return None if committed == today else f"{where}: committed {committed!r}, today {today!r}"


def test_there_are_committed_runs() -> None:
    assert len(RUNS) >= 10, RUNS


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: str(p.relative_to(ROOT / "reports")))
def test_a_committed_run_analyses_to_its_committed_verdict(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("logs", "requests"))
    written = outputs.analyse_run(copy)
    # as every reader sees it: a verdict.json of an older format through core.migrate
    committed = RunDir(run_dir).read_json("verdict.json")
    moved = _moved(committed, json.loads(written.read_text()))
    assert moved is None, f"{run_dir.relative_to(ROOT)}/verdict.json: {moved}"


@pytest.mark.parametrize(
    ("committed", "today", "moved"),
    [
        ({"a": [1.0, "x"]}, {"a": [1.0 + 1e-12, "x"]}, False),  # last bits only
        ({"a": 0.013460544657790223}, {"a": 0.013460544682766883}, False),  # another scipy
        ({"a": [1.0, "x"]}, {"a": [1.0001, "x"]}, True),
        ({"a": [1.0, "x"]}, {"a": [1.0, "y"]}, True),
        ({"a": 1, "b": None}, {"a": 1}, True),
        ({"a": [1]}, {"a": [1, 2]}, True),
        ({"a": None}, {"a": 0.0}, True),
    ],
)
def test_the_comparison_catches_a_moved_value(committed: Any, today: Any, moved: bool) -> None:
    assert (_moved(committed, today) is not None) is moved

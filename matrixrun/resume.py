"""Where a run's measurements go: a new run directory, or an earlier one to resume.

Resuming is safe because results.jsonl is append-only and a resumed run replays the same
verify policy over the same measurements; what must hold is that the spec is the one the run
started with (no measurement mixed with cells of another spec) and that a relaunch never
reuses an earlier instance's name (instance names carry fresh-server σ in the analysis).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from matrixrun.errors import InputError, MatrixError
from matrixrun.measurement import Measurement
from matrixrun.results import RunDir


def new_run_dir(spec_path: Path, out: str | Path | None, rehearse: bool) -> RunDir:
    """`--out`, else runs/<stem>[.rehearsal]/<time>; refuses a directory that holds a run."""
    stem = spec_path.stem + (".rehearsal" if rehearse else "")
    rd = RunDir(Path(out) if out else Path("runs") / stem / time.strftime("%Y%m%d-%H%M%S"))
    if rd.exists():
        raise MatrixError(
            f"{rd.path} already holds a run; use --resume {rd.path} to "
            "continue it or --out for a new directory"
        )
    return rd


def resumed_run_dir(resume: str | Path, spec_path: Path, spec_text: str) -> RunDir:
    """The run directory to continue; refuses one that is not a run or whose spec differs."""
    rd = RunDir(resume)
    if not rd.exists():
        raise MatrixError(
            f"--resume {resume}: not a run directory (no plan.json); give the "
            "directory a previous run printed"
        )
    old = rd.path / "spec.yaml"
    if old.exists() and old.read_text() != spec_text:
        raise InputError(
            f"{spec_path} differs from the spec this run started with ({old}); resume with "
            f"that file (`--resume {rd.path}` and spec {old}) or start a new run, so no "
            "measurement is mixed with cells of another spec"
        )
    return rd


def launch_counts(
    events: Iterable[dict[str, object]], measurements: Iterable[Measurement]
) -> dict[str, int]:
    """Launches so far per group, from the audit log's launch events and the instance names
    (`group#n`) of the measurements: the next launch of a group is number count + 1. Pure."""
    launched = [
        (str(e.get("group")), str(e.get("instance"))) for e in events if e.get("event") == "launch"
    ]
    launched += [(m.group_id, m.instance) for m in measurements]
    counts: dict[str, int] = {}
    for group_id, instance in launched:
        tail = instance.rsplit("#", 1)[-1]
        number = int(tail) if tail.isdigit() else 0
        counts[group_id] = max(counts.get(group_id, 0), number)
    return counts

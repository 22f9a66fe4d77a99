"""Where a run's measurements go: a new run directory, or an earlier one to resume.

Resuming is safe because results.jsonl is append-only and a resumed run replays the same
verify policy over the same measurements; what must hold is that the spec is the one the run
started with (no measurement mixed with cells of another spec; a raised verify limit is the
one change allowed, `run.amend`: it only lets the policy ask for more), that a relaunch never
reuses an earlier instance's name (instance names carry fresh-server σ in the analysis), that
no server of the killed run is still holding the machine (`stop_left_servers`), and that a
stage-2 round the kill interrupted is finished rather than counted as done
(`unfinished_round`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import cast, get_args

from matrixrun.core.errors import InputError, MatrixError
from matrixrun.core.measurement import Measurement, Reason
from matrixrun.core.redact import redact_logs
from matrixrun.engines.procs import stop_leftovers
from matrixrun.plan import Plan
from matrixrun.run.amend import Amendment, amendment
from matrixrun.rundir.results import RunDir
from matrixrun.spec import SpecFile
from matrixrun.verify import Unfinished


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


def require_run_dir(resume: str | Path) -> RunDir:
    """The run directory `--resume` names, refused in one sentence (bad input, exit 2, like
    any other argument that names nothing) when it is not one."""
    rd = RunDir(resume)
    if not rd.exists():
        what = "not a run directory (no plan.json)" if rd.path.is_dir() else "no such directory"
        raise InputError(
            f"--resume {resume}: {what}; give the run directory a previous run printed"
        )
    return rd


def resumed_run_dir(resume: str | Path, source: SpecFile) -> tuple[RunDir, Amendment | None]:
    """The run directory to continue, and what the spec file raises in its verify limits
    (None: the spec it started with); refuses one that is not a run or whose spec differs in
    anything else (`run.amend`)."""
    rd = require_run_dir(resume)
    return rd, amendment(rd, source.path, source.text)


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


REASONS = frozenset(get_args(Reason))


def unfinished_round(
    events: Iterable[dict[str, object]],
    measurements: Iterable[Measurement],
    torn_group: str | None = None,
) -> Unfinished | None:
    """Where stage 2 stood, from the measurer's journal in the audit log (`round_begin` with the
    round's groups in order, `round_group_done` per group) and the measurements tagged with
    their round (`extra.round`); the reruns noted for the round (`verify` events, each with the
    attempt it was to be) whose attempt was never measured are the `pending` work — counted by
    attempt, not by cell, since bisection measures a cell twice in one round and a torn second
    run leaves the first. A run that fell behind on a busy host (`slowed`, with its round) owes
    the round its next attempt, with the same reason: the measurer measures it again at once,
    and a torn record of that second run is the round's, not a new choice of the policy's in
    the round after (which would label it so, and might choose other work first). None when
    no round ever began
    (stage 2 starts at round 1). `torn_group` is the group of a torn record just cut: its
    round is not done, whatever the journal says, so the cut run is measured again. Pure."""
    begun: tuple[int, tuple[str, ...]] | None = None
    finished: set[str] = set()
    noted: list[tuple[str, Reason, object]] = []
    for e in events:
        kind = e.get("event")
        if kind == "round_begin":
            groups = e.get("groups")
            round_no = e.get("round")
            if isinstance(round_no, int) and isinstance(groups, list):
                begun = (round_no, tuple(str(g) for g in groups))
                finished, noted = set(), []
        elif begun is None or e.get("round") != begun[0]:
            continue
        elif kind == "round_group_done":
            finished.add(str(e.get("group")))
        elif kind == "verify" and e.get("stage") == 2 and e.get("reason") in REASONS:
            noted.append((str(e.get("cell")), cast(Reason, e.get("reason")), e.get("attempt")))
        elif kind == "slowed" and e.get("reason") in REASONS:
            attempt = e.get("attempt")
            if isinstance(attempt, int):
                noted.append((str(e.get("cell")), cast(Reason, e.get("reason")), attempt + 1))
    if begun is None:
        return None
    round_no, groups = begun
    if torn_group is not None:
        finished.discard(torn_group)
    ms = list(measurements)
    rerun = frozenset(m.cell_id for m in ms if m.extra.get("round") == round_no)
    measured = {(m.cell_id, m.attempt) for m in ms}
    owed = tuple(g for g in groups if g not in finished)
    pending = tuple((c, r) for c, r, attempt in noted if (c, attempt) not in measured)
    pending = pending if owed else ()
    return Unfinished(round_no, owed, rerun, pending)


def stop_left_servers(rd: RunDir) -> list[str]:
    """Stop the servers an interrupted run into `rd` left running (its pid files), each
    recorded in the audit log; one sentence per pid file that needed attention."""
    notes: list[str] = []
    for left in stop_leftovers(rd.path / "pids"):
        rd.event(
            "leftover_server",
            instance=left.instance,
            pid=left.pid,
            stopped=left.stopped,
            why=left.why,
        )
        if left.stopped:
            notes.append(
                f"stopped server {left.instance} (pid {left.pid}) that an interrupted run left "
                "running"
            )
        elif left.pid is None or "cannot be checked" in left.why:
            notes.append(f"server {left.instance}: {left.why}")
    redact_logs(rd.path / "logs")
    return notes


def mend_run_dir(
    rd: RunDir, plan: Plan, measurements: list[Measurement], *, stop_servers: bool = True
) -> tuple[list[str], Unfinished | None]:
    """Before measuring into a directory an earlier session wrote: stop the servers it left
    running (`stop_servers`: not on a Slurm controller, whose jobs own their servers and may
    still be running on this very host), cut a torn last record (its cell is measured again:
    the round it belonged to is reopened), and read where stage 2 stood. One sentence per
    repair, and the round left unfinished (None: none)."""
    notes = stop_left_servers(rd) if stop_servers else []
    torn = rd.mend()
    torn_group = None
    if torn is not None:
        groups = {c.cell_id: g.group_id for g in plan.groups for c in g.cells}
        torn_group = groups.get(torn.cell_id or "")
        rd.event("torn_tail", cell=torn.cell_id, bytes=torn.size)
        notes.append(torn.sentence(rd.results_file))
    return notes, unfinished_round(rd.events(), measurements, torn_group)


class EventJournal:
    """The verify journal as audit-log events (`round_begin`, `round_group_done`), written by
    the measurer and read back by `unfinished_round` above."""

    def __init__(self, rd: RunDir) -> None:
        self.rd = rd

    def round_begun(self, round_no: int, groups: list[str]) -> None:
        self.rd.event("round_begin", round=round_no, groups=groups)

    def group_done(self, round_no: int, group_id: str) -> None:
        self.rd.event("round_group_done", round=round_no, group=group_id)

"""Servers a killed run left behind: what a pid file records, and stopping exactly those.

A launched server runs in its own session (so Ctrl-C reaches the runner, which stops it in
order), which also means a runner killed with SIGKILL leaves it running: on a GPU node it keeps
holding the GPUs. `ServerProcess` therefore writes `pids/<instance>.pid` while a server lives
(removed when it stops), and a resumed run (or a new run into the same directory) stops what a
pid file still names — but only a process that is provably that server: a pid is reused once
its process exits, so the pid file also records the process's start time (in clock ticks since
boot, `/proc/<pid>/stat` field 22): a pid and its start time name one process for the life of
the machine, and exec (a launcher becoming python) keeps both, so no command line is needed
(and none is stored: it can carry an API key). A process whose start time differs is someone
else's and is never signalled; where `/proc` is missing nothing is signalled and the pid file
stays, reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class PidRecord:
    """What `pids/<instance>.pid` holds: enough to recognise the process later, no secrets."""

    pid: int
    start_ticks: int | None
    #: The machine the process runs on: a run directory on a shared file system (a Slurm
    #: run) holds pid files of other nodes, whose pids mean nothing here.
    host: str | None = None

    def to_text(self) -> str:
        return json.dumps(self.__dict__) + "\n"

    @staticmethod
    def from_text(text: str) -> PidRecord | None:
        """Parse a pid file; a bare pid (files of older runs) has no identity to check."""
        text = text.strip()
        if text.isdigit():
            return PidRecord(int(text), None)
        try:
            raw = json.loads(text)
            ticks = raw.get("start_ticks")
            host = raw.get("host")
            return PidRecord(
                int(raw["pid"]),
                int(ticks) if ticks is not None else None,
                str(host) if host is not None else None,
            )
        except (ValueError, KeyError, TypeError):
            return None


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks after boot; None if it is gone (or no /proc)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after it
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall: 2 fields before the split, 0-based 19
    except (IndexError, ValueError):
        return None


def record_for(pid: int) -> PidRecord:
    """The identity of a live process, taken right after it was started."""
    return PidRecord(pid, start_ticks(pid), socket.gethostname())


def _is_it(record: PidRecord) -> bool:
    """Whether `record.pid` is still the very process the record was written for."""
    if record.start_ticks is None:
        return False
    return start_ticks(record.pid) == record.start_ticks


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_recorded(record: PidRecord, grace_s: float = 10.0) -> bool:
    """Stop the process group of a recorded server if the process is still that server:
    SIGTERM, up to `grace_s`, then SIGKILL. True when something was stopped."""
    if not _is_it(record):
        return False
    pgid = record.pid  # start_new_session: the server leads its own group
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _is_it(record):
        _reap(record.pid)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)  # the leader if it ignored TERM, and its children
    _reap(record.pid)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status when the leftover is our own child (tests; a runner that
    resumes in the same process), so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


@dataclass(frozen=True)
class Leftover:
    """One pid file found at the start of a run, and what was done about it."""

    instance: str
    pid: int | None
    stopped: bool
    why: str


def stop_leftovers(pids_dir: Path) -> list[Leftover]:
    """Stop every server a pid file in `pids_dir` still names (see module doc) and remove
    the files of processes that are gone. A file whose process cannot be checked is kept and
    reported, so the user can look at it."""
    out: list[Leftover] = []
    if not pids_dir.is_dir():
        return out
    for path in sorted(pids_dir.glob("*.pid")):
        instance = path.stem
        try:
            record = PidRecord.from_text(path.read_text(errors="replace"))
        except OSError:
            record = None
        if record is None:
            out.append(Leftover(instance, None, False, f"{path} is not a pid file; left as is"))
            continue
        if record.host is not None and record.host != socket.gethostname():
            continue  # another node's server (a Slurm run): its own job deals with it
        if start_ticks(record.pid) is None and PROC.is_dir():
            path.unlink(missing_ok=True)
            out.append(Leftover(instance, record.pid, False, "exited before this run"))
            continue
        if record.start_ticks is None or not PROC.is_dir():
            out.append(
                Leftover(
                    instance,
                    record.pid,
                    False,
                    f"pid {record.pid} cannot be checked to be that server (no start time "
                    f"recorded, or no /proc); not signalled — stop it by hand if it is, then "
                    f"delete {path}",
                )
            )
            continue
        if not _is_it(record):
            path.unlink(missing_ok=True)
            out.append(Leftover(instance, record.pid, False, "pid now belongs to another process"))
            continue
        stopped = stop_recorded(record)
        path.unlink(missing_ok=True)
        out.append(
            Leftover(
                instance,
                record.pid,
                stopped,
                "left running by an interrupted run; stopped" if stopped else "exited",
            )
        )
    return out


def group_alive(pid: int) -> bool:
    """Whether any process of the group `pid` led is still running (tests, the soak)."""
    return _group_alive(pid)

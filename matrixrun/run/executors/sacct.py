"""What Slurm says about jobs: sacct when the cluster keeps accounting, squeue when it does
not. Read-only subprocess calls with fixed argv (no shell); the executor (`slurm.py`) decides
what the states mean for the run."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from matrixrun.core.errors import InputError


@dataclass(frozen=True)
class SlurmState:
    """What Slurm says about one job now."""

    state: str
    detail: str
    exit_code: str | None = None
    reason: str | None = None
    node: str | None = None
    start: str | None = None
    end: str | None = None
    elapsed: str | None = None


def _blank(value: str) -> str | None:
    return None if value in ("", "None", "Unknown", "(null)", "None assigned") else value


def slurm_tool(name: str) -> str:
    """The path of one of Slurm's client commands; one sentence when it is missing."""
    exe = shutil.which(name)
    if exe is None:
        raise InputError(
            f"{name} is not on PATH: --executor slurm needs the Slurm client commands "
            "(sbatch, sacct, squeue, scancel) and SLURM_CONF if the cluster needs it"
        )
    return exe


def query_states(job_ids: Sequence[str], timeout_s: float = 30.0) -> dict[str, SlurmState]:
    """Slurm's view of `job_ids`: sacct when accounting works, else squeue (jobs that left the
    queue are then missing from the answer). A job too new for sacct is missing too."""
    if not job_ids:
        return {}
    ids = ",".join(job_ids)
    fields = "JobID,State,ExitCode,Reason,NodeList,Start,End,Elapsed"
    done = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [slurm_tool("sacct"), "-X", "-n", "-P", "-j", ids, "-o", fields],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    out: dict[str, SlurmState] = {}
    if done.returncode == 0:
        for line in done.stdout.splitlines():
            parts = line.split("|")
            if len(parts) != 8:
                continue
            jid, state, code, reason, nodes, start, end, elapsed = parts
            out[jid] = SlurmState(
                state=state.split()[0] if state else "PENDING",
                detail=state,
                exit_code=_blank(code),
                reason=_blank(reason),
                node=_blank(nodes),
                start=_blank(start),
                end=_blank(end),
                elapsed=_blank(elapsed),
            )
        return out
    queue = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [slurm_tool("squeue"), "-h", "-j", ids, "-o", "%i|%T|%r|%N|%S"],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    for line in queue.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 5:
            out[parts[0]] = SlurmState(
                state=parts[1],
                detail=parts[1],
                reason=_blank(parts[2]),
                node=_blank(parts[3]),
                start=_blank(parts[4]),
            )
    return out

"""Whether a launched server died, and the one sentence that says so.

Split from the measurer so that one place knows how a death is told from a load failure: a
killed server drops its connections a moment before its process can be reaped, and a dying
SGLang sleeps 5 s "before crash diagnostics" before it tears its tree down
(`Engine.death_grace_s`), so failed requests get that long to show the process exited.
"""

from __future__ import annotations

import time

from matrixrun.engines.base import ServerHandle
from matrixrun.load.cell import CellRun


def died_message(server: ServerHandle, name: str, phase: str) -> str:
    """Which server died, its exit code, the phase it died in and its first error (not its
    teardown: `ServerHandle.death_cause`)."""
    cause = server.death_cause() or "(its log is empty)"
    return (
        f"server {name} died (exit code {server.exit_code()}) during {phase}; "
        f"its first error: {cause}"
    )


def exits(server: ServerHandle, grace_s: float) -> bool:
    """Whether `server` is seen exited within `grace_s` (requests to it just failed)."""
    deadline = time.monotonic() + grace_s
    while server.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def died(server: ServerHandle, run: CellRun, grace_s: float) -> bool:
    """Whether the server died under the cell: dead now, or requests failed and it exits
    within `grace_s` (else the cell would read as a load failure on a live server and the
    relaunch would wait for the next cell; the cost is up to that long after a cell whose
    requests failed on a server that is fine)."""
    if not server.alive():
        return True
    if run.error is None and not any(r.error for r in run.records):
        return False
    return exits(server, grace_s)

"""One measurement: a cell (one arm at one sweep point) measured once on one server instance.

This is the line format of `results.jsonl`, the single source every later stage reads: the
analysis, the verify policy, the report and `ingest` (which builds these from bench_serving
files). A rerun is a new Measurement with a higher `attempt`; nothing is ever overwritten.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from matrixrun.core.metrics import Metrics

#: Why a measurement was taken. `first` is stage 1; the rest are repeat-to-verify (VERDICTS.md §6),
#: except `bisection`: the first run of a cell the policy added at a crossover bracket's midpoint,
#: and `fixed`: a fixed design's run on its own launch (`verify.design: fixed`).
Reason = Literal[
    "first",
    "surprise",
    "undecided",
    "crossover",
    "fresh_server",
    "aa",
    "manual",
    "bisection",
    "fixed",
]


class Failure(StrEnum):
    """Why a measurement has no usable metrics: the kind, apart from the sentence in `error`,
    so later stages decide on data, not on English."""

    #: The server would not start, or stay up, for this cell (it never measured).
    LAUNCH = "launch"
    #: The server process died while the cell ran.
    SERVER_DIED = "server_died"
    #: The whole cell exceeded its outer bound (limits.cell_timeout plus the warmup's).
    CELL_TIMEOUT = "cell_timeout"
    #: The time cap came before any measured request finished.
    CAPPED_EMPTY = "capped_empty"
    #: The time cap cut some measured requests in flight or kept them from being sent: the
    #: ones that finished are the fast ones, so their metrics are not the cell's (not compared;
    #: the verify policy measures the cell again where it may).
    CAPPED = "capped"
    #: The load could not run at all (every warmup request failed, server unreachable).
    LOAD = "load"
    #: Requests were sent and every one failed.
    ALL_REQUESTS_FAILED = "all_requests_failed"


class Measurement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cell_id: str = Field(description="Stable id of (arm, sweep point): see plan.cell_id.")
    point_id: str = Field(description="Stable id of the sweep point, shared by all arms.")
    arm: str
    group_id: str = Field(description="Server group (one launch config) the cell belongs to.")
    slice: str = Field(
        "", description="Label of the model/hardware/server-axis combination; '' when only one."
    )
    point: dict[str, Any] = Field(description="Axis values, e.g. {'concurrency': 64}.")
    attempt: int = Field(1, ge=1, description="1 for the first run of this cell, then 2, 3, ...")
    instance: str = Field(description="Server instance (launch) that served it, e.g. 'g1#2'.")
    reason: Reason = "first"
    metrics: Metrics | None = None
    error: str | None = None
    failure: Failure | None = Field(None, description="The kind of failure `error` words.")
    client: str = "builtin"
    simulated: bool = False
    time_scale: float = Field(1.0, description="Simulator speed-up already converted back.")
    started_at: str | None = None
    finished_at: str | None = None
    requests_file: str | None = Field(None, description="Per-request records, relative path.")
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.metrics is not None and self.metrics.completed > 0


def failed_cells(measurements: Iterable[Measurement]) -> set[str]:
    """Cells measured at least once and never successfully: what `run --resume
    --retry-failed` measures again (a server that would not start, a crash, a harness bug
    fixed since)."""
    tried: set[str] = set()
    ok: set[str] = set()
    for m in measurements:
        tried.add(m.cell_id)
        if m.ok:
            ok.add(m.cell_id)
    return tried - ok


def retry_note(cells: int) -> str:
    """What `--retry-failed` found to do, for the CLI to print: the count, or that none of the
    run's cells had only failed attempts."""
    if not cells:
        return "--retry-failed: no cell of this run has only failed attempts; nothing to retry"
    noun = "cell whose every attempt" if cells == 1 else "cells whose every attempt"
    return f"--retry-failed: measuring again {cells} {noun} failed"


def superseded(measurements: Iterable[Measurement]) -> set[tuple[str, int]]:
    """(cell, attempt) of the failed measurements a later retry of the same cell
    (`extra.retry`, from `--retry-failed`) replaces in the counts: the user said their cause
    is gone, so their failed requests no longer count against the cell's failure rate nor the
    run's exit status. They stay in results.jsonl and in the report's failures."""
    ms = list(measurements)
    last: dict[str, int] = {}
    for m in ms:
        if m.extra.get("retry"):
            last[m.cell_id] = max(last.get(m.cell_id, 0), m.attempt)
    return {(m.cell_id, m.attempt) for m in ms if not m.ok and m.attempt < last.get(m.cell_id, 0)}


def still_failed(measurements: Iterable[Measurement]) -> int:
    """Failed measurements that no retry replaced: a run with any exits 1."""
    ms = list(measurements)
    gone = superseded(ms)
    return sum(1 for m in ms if not m.ok and (m.cell_id, m.attempt) not in gone)


def over_failure_rate(measurements: list[Measurement], limit: float) -> list[str]:
    """Cells (arm at a point, all their runs together, as the analysis pools them) whose
    share of failed requests is above `limit`: one sentence each, for the exit code. A
    cell with 20% malformed streams still has numbers, so without this it would pass."""
    totals: dict[str, list[Any]] = {}
    gone = superseded(measurements)
    for m in measurements:
        if m.metrics is None or (m.cell_id, m.attempt) in gone:
            continue
        t = totals.setdefault(m.cell_id, [0, 0, m])
        t[0] += m.metrics.failed
        t[1] += m.metrics.failed + m.metrics.completed
    out = []
    for cell_id, (failed, sent, m) in totals.items():
        if sent and failed / sent > limit:
            out.append(
                f"cell {cell_id} ({m.arm} at {m.point}): {failed} of {sent} requests failed "
                f"({100 * failed / sent:.1f}%, over verify.failure_rate {100 * limit:g}%)"
            )
    return out


def wall_seconds(m: Measurement) -> float:
    """How long a measurement took on the wall clock (0 when its times are not recorded): what
    a rerun of it is expected to cost."""
    if not (m.started_at and m.finished_at):
        return 0.0
    fmt = "%Y-%m-%dT%H:%M:%S.%f"
    start = datetime.strptime(m.started_at.rstrip("Z"), fmt)
    end = datetime.strptime(m.finished_at.rstrip("Z"), fmt)
    return max((end - start).total_seconds(), 0.0)

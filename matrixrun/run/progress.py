"""Progress for `matrixrun run`: a rich live display on a terminal (group, cell, attempt,
elapsed, ETA), one plain line per measurement otherwise (CI logs, pipes). Display only: it
never changes what is measured or recorded."""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from matrixrun.core.measurement import Measurement
from matrixrun.core.units import format_duration
from matrixrun.core.words import plural, reason


class Observer(Protocol):
    """Progress sink (the CLI's rich display, or nothing). Never affects what is measured.

    `start` gets the runs of the first pass and, where known, the most the verify policy can
    add (every cell to max_runs, bisection midpoints): the line says both, so a run past its
    first pass reads `12/16, at most 48`, never `23/10+`. `done`: the runs a resumed run
    already has, counted from the start (`5/10` after 4 done, never `1/10`)."""

    def start(self, total_runs: int, most: int | None = None, done: int = 0) -> None: ...

    def status(self, text: str) -> None: ...

    def measured(self, m: Measurement, note: str) -> None: ...

    def finish(self) -> None: ...


class NullObserver:
    def start(self, total_runs: int, most: int | None = None, done: int = 0) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def measured(self, m: Measurement, note: str) -> None:
        pass

    def finish(self) -> None:
        pass


def _summary(m: Measurement) -> str:
    where = ", ".join(f"{k}={v}" for k, v in m.point.items() if k == "concurrency")
    why = reason(m.reason)
    if m.metrics is None or m.error:
        return f"{m.arm} {where} attempt {m.attempt} ({why}): FAILED: {m.error}"
    tp = m.metrics.output_throughput
    failed = f", {plural(m.metrics.failed, 'failed request')}" if m.metrics.failed else ""
    return f"{m.arm} {where} attempt {m.attempt} ({why}) on {m.instance}: {tp:.2f} tok/s{failed}"


def progress_text(
    done: int, total: int, most: int | None, elapsed_s: float, before: int = 0
) -> str:
    """'5/8, at most 24, ETA 40s–3m': runs done of those planned (the first pass, or more once
    reruns pass it), the most the policy may run, and the time left at the mean pace so far
    (launches included): to the end of the first pass at the least, to `most` at the most.
    `before`: runs a resumed run already had, counted in `done` but not in the pace (they took
    none of `elapsed_s`)."""
    planned = max(total, done)
    head = f"{done}/{planned}"
    if most is not None and most > planned:
        head += f", at most {most}"
    if done <= before:
        return head
    per = elapsed_s / (done - before)
    lo = per * (planned - done)
    hi = per * (most - done) if most is not None and most > planned else lo
    if hi < 1:
        return head
    if format_duration(lo) == format_duration(hi):
        return f"{head}, ETA {format_duration(lo)}"
    if lo < 1:
        return f"{head}, ETA ≤ {format_duration(hi)}"
    return f"{head}, ETA {format_duration(lo)}–{format_duration(hi)}"


class PlainObserver:
    """Line-oriented progress for non-terminals."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.t0 = time.monotonic()
        self.done = self.before = 0
        self.total = 0
        self.most: int | None = None

    def start(self, total_runs: int, most: int | None = None, done: int = 0) -> None:
        self.total = total_runs
        self.most = most
        self.done = self.before = done
        self.t0 = time.monotonic()

    def status(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:7.1f}s] {text}", file=self.stream, flush=True)

    def measured(self, m: Measurement, note: str) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.t0
        where = progress_text(self.done, self.total, self.most, elapsed, self.before)
        print(f"[{elapsed:7.1f}s] {where}: {_summary(m)}", file=self.stream, flush=True)

    def finish(self) -> None:
        pass


class RichObserver:
    """Live display: a progress bar over first-pass runs (reruns extend it), the current
    group/cell/attempt, elapsed and ETA, and a log of finished measurements above it."""

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self.progress = Progress(
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[most]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            # last, so a narrow terminal truncates the description, not the clock
            TextColumn("[bold]{task.description}"),
            console=self.console,
            transient=False,
        )
        self.task = self.progress.add_task("starting", total=None, most="")

    def start(self, total_runs: int, most: int | None = None, done: int = 0) -> None:
        self.most = most
        text = f"at most {most}" if most is not None and most > total_runs else ""
        self.progress.update(self.task, total=max(total_runs, done), completed=done, most=text)
        self.progress.start()

    def status(self, text: str) -> None:
        self.progress.update(self.task, description=text)

    def measured(self, m: Measurement, note: str) -> None:
        task = self.progress.tasks[0]
        if task.total is not None and task.completed + 1 > task.total:
            self.progress.update(self.task, total=task.completed + 1)
        self.progress.advance(self.task)
        self.progress.console.print(
            f"[dim]{time.strftime('%H:%M:%S')}[/dim] {_summary(m)}", markup=True, highlight=False
        )

    def finish(self) -> None:
        self.progress.stop()


def observer_for(stream: TextIO | None = None) -> PlainObserver | RichObserver:
    """Progress on `stream`, sys.stderr as it is at the call (not at import: a CLI run
    in-process, as the tests do, writes to the stderr of its time)."""
    stream = stream if stream is not None else sys.stderr
    return RichObserver() if stream.isatty() else PlainObserver(stream)

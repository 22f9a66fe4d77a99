"""Progress for `matrixrun run`: a rich live display on a terminal (group, cell, attempt,
elapsed, ETA), one plain line per measurement otherwise (CI logs, pipes). Display only: it
never changes what is measured or recorded."""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO

from matrixrun.core.measurement import Measurement


class Observer(Protocol):
    """Progress sink (the CLI's rich display, or nothing). Never affects what is measured."""

    def start(self, total_runs: int) -> None: ...

    def status(self, text: str) -> None: ...

    def measured(self, m: Measurement, note: str) -> None: ...

    def finish(self) -> None: ...


class NullObserver:
    def start(self, total_runs: int) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def measured(self, m: Measurement, note: str) -> None:
        pass

    def finish(self) -> None:
        pass


def _summary(m: Measurement) -> str:
    where = ", ".join(f"{k}={v}" for k, v in m.point.items() if k == "concurrency")
    if m.metrics is None or m.error:
        return f"{m.arm} {where} attempt {m.attempt} ({m.reason}): FAILED: {m.error}"
    tp = m.metrics.output_throughput
    failed = f", {m.metrics.failed} failed requests" if m.metrics.failed else ""
    return (
        f"{m.arm} {where} attempt {m.attempt} ({m.reason}) on {m.instance}: {tp:.2f} tok/s{failed}"
    )


class PlainObserver:
    """Line-oriented progress for non-terminals."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.t0 = time.monotonic()
        self.done = 0
        self.total = 0

    def start(self, total_runs: int) -> None:
        self.total = total_runs
        self.t0 = time.monotonic()

    def status(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:7.1f}s] {text}", file=self.stream, flush=True)

    def measured(self, m: Measurement, note: str) -> None:
        self.done += 1
        print(
            f"[{time.monotonic() - self.t0:7.1f}s] {self.done}/{self.total}+ {_summary(m)}",
            file=self.stream,
            flush=True,
        )

    def finish(self) -> None:
        pass


class RichObserver:
    """Live display: a progress bar over first-pass runs (reruns extend it), the current
    group/cell/attempt, elapsed and ETA, and a log of finished measurements above it."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(stderr=True)
        self.progress = Progress(
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            # last, so a narrow terminal truncates the description, not the clock
            TextColumn("[bold]{task.description}"),
            console=self.console,
            transient=False,
        )
        self.task = self.progress.add_task("starting", total=None)

    def start(self, total_runs: int) -> None:
        self.progress.update(self.task, total=total_runs)
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


def observer_for(stream: TextIO = sys.stderr) -> PlainObserver | RichObserver:
    return RichObserver() if stream.isatty() else PlainObserver(stream)

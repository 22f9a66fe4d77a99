"""Ctrl-C during a run: counted the moment it arrives, acted on where acting loses nothing.

Why not Python's own handling: by default SIGINT raises KeyboardInterrupt wherever the main
thread happens to be, and inside a load `asyncio.Runner` cancels the load's task instead. Both
can drop the interrupt without a trace, and the run then carries on and exits 0:

- a KeyboardInterrupt raised inside a finalizer is printed as "Exception ignored in ..." and
  swallowed. Each load's `asyncio.run` drops its event loop after it has put the default
  handler back, so `BaseEventLoop.__del__` (Python code) runs under that handler: a Ctrl-C
  whose handler runs there is gone. Any other `__del__` or weakref callback is the same;
- `asyncio.Runner.run` (3.11 to 3.13) raises KeyboardInterrupt only from its
  `except CancelledError`: a load whose task returns normally after the cancellation (something
  awaited at its last step absorbs the CancelledError) returns its result, and the interrupt
  is gone. (A cancel that lands during the task's very last step is not lost on its own: the
  task still ends cancelled.)

So while a run measures (`handling`), this module owns SIGINT. The handler counts the
interrupt first, then acts by what the main thread is doing:

- a load is in flight (`load`): it is asked to stop (its task cancelled, bench_serving's
  process group sent SIGTERM) and the load raises KeyboardInterrupt; the cell in flight is not
  kept (as before). A second Ctrl-C while it stops raises at once;
- inside a `measurement` whose load has ended: nothing is raised until the measurement is on
  file; the end of the `measurement` raises it. So nothing measured is lost;
- inside `held` (a step that must not be cut in two: a server's start and its pid file, the
  failed records of a launch): the same, until `check`;
- anywhere else (launching, health-checking, flushing, between launches): KeyboardInterrupt
  at once, as Python would.

Raised or not, the count stays, and `check` at the measurer's safe points (each measurement's
end, each launch's start, before the analysis, the end of `handling`) raises KeyboardInterrupt
for an interrupt that a finalizer swallowed. The CLI turns it into exit 130 and its resume
sentence. Outside `handling` nothing here changes Python's behaviour (asyncio's own handler
applies, e.g. in `bench-client` or a Slurm job).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during `matrixrun run`, carrying the run directory it stopped in, so the one
    line the CLI prints names where everything measured so far is kept."""

    def __init__(self, run_dir: str) -> None:
        super().__init__(run_dir)
        self.run_dir = run_dir


class _State:
    #: the handler is installed (`handling`)
    active: bool = False
    #: Ctrl-Cs since `handling` began
    count: int = 0
    #: how to stop the load in flight (`load`), called from the handler
    stop: Callable[[], None] | None = None
    #: the load in flight was asked to stop: another Ctrl-C raises at once
    stopping: bool = False
    #: > 0: a Ctrl-C is counted, not raised (`held`, a measurement whose load ended)
    holds: int = 0
    #: inside `measurement`: the end of its load starts a hold
    measuring: bool = False


_state = _State()


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _state.count += 1
    if _state.stop is not None:
        if _state.stopping:  # it did not stop (a blocking call in the load): stop now
            raise KeyboardInterrupt
        _state.stopping = True
        _state.stop()
        return
    if _state.holds:
        return
    raise KeyboardInterrupt


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """SIGINT is this module's for the block (in the main thread; a nested block is part of
    the outer one). A Ctrl-C that was counted but never raised is raised as the block ends."""
    if _state.active or not _main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    _state.count, _state.stop, _state.stopping, _state.holds = 0, None, False, 0
    _state.measuring, _state.active = False, True
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        interrupted, _state.active = _state.count > 0, False
    if interrupted:
        raise KeyboardInterrupt


def requested() -> bool:
    """Whether a Ctrl-C came during the current `handling` block."""
    return _state.active and _state.count > 0


def check() -> None:
    """A safe point: raise KeyboardInterrupt if a Ctrl-C came (held, or swallowed where it
    was raised)."""
    if requested():
        raise KeyboardInterrupt


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A Ctrl-C during the block is counted, not raised; the caller's next `check` raises it."""
    _state.holds += 1
    try:
        yield
    finally:
        _state.holds -= 1


@contextlib.contextmanager
def measurement() -> Iterator[None]:
    """One measurement, from its start to its record: a Ctrl-C stops it at once until its
    `load` has ended, is held from then on, and is raised when the block ends (by then what
    was measured is on file)."""
    outer = _state.measuring, _state.holds
    _state.measuring = True
    try:
        yield
    finally:
        _state.measuring, _state.holds = outer
    check()


@contextlib.contextmanager
def load(stop: Callable[[], None]) -> Iterator[None]:
    """A load in flight, which `stop` ends. `stop` runs in the signal handler, so it only
    asks (cancels a task, signals a process); the load then raises KeyboardInterrupt itself
    (`run` does for a coroutine). A Ctrl-C counted before the load began stops it as it
    begins. Inside a `measurement`, the load's end starts the hold that keeps its result."""
    if not _state.active or not _main_thread():
        yield
        return
    _state.stop, _state.stopping = stop, False
    if _state.count:
        _state.stopping = True
        stop()
    try:
        yield
    finally:
        if _state.measuring:
            _state.holds += 1  # before the stop goes: no instant in which a Ctrl-C raises
        _state.stop, _state.stopping = None, False


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` as a `load`: while `handling`, a Ctrl-C cancels `main`'s task, as
    `asyncio.Runner` would, and a cancelled run raises KeyboardInterrupt (not CancelledError,
    which the CLI does not know). Outside `handling`, plain `asyncio.run`."""
    try:
        return asyncio.run(_stoppable(main))
    except asyncio.CancelledError:
        if requested():
            raise KeyboardInterrupt from None
        raise


async def _stoppable(main: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None

    def stop() -> None:  # what asyncio.Runner's own handler does on a first Ctrl-C
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)  # wake a loop blocked in select()

    with load(stop):
        return await main

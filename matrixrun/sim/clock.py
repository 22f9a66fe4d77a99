"""A precise absolute-deadline sleep for the engine loop.

Event-loop timers are too coarse for a time-dilated engine: uvloop rounds timers to whole
milliseconds (measured: tokens up to 0.5 ms early and 0.6 ms late), and the stdlib loop wakes
0.5-1 ms late on average. At `--time-scale 20` one wall millisecond is 20 modelled ones, so that
jitter would swamp the inter-token latencies being simulated. A helper thread waiting on a
condition variable (microsecond timeouts) and waking the loop with `call_soon_threadsafe` is
measured at ~0.1 ms late with ~0.05 ms jitter, costs one thread wake-up per engine iteration,
and keeps the loop itself free for I/O.
"""

from __future__ import annotations

import asyncio
import threading
import time

now = time.monotonic


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class DeadlineTimer:
    """Wakes one waiting coroutine at an absolute `time.monotonic()` deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._cv = threading.Condition()
        self._pending: tuple[float, asyncio.Future[None]] | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="sim-clock", daemon=True)
        self._thread.start()

    async def sleep_until(self, deadline: float) -> None:
        """Return at `deadline` (or at once, yielding to the loop, if it has passed)."""
        if deadline <= now():
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = self._loop.create_future()
        with self._cv:
            self._pending = (deadline, fut)
            self._cv.notify()
        await fut

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._pending is None and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
                assert self._pending is not None
                deadline, fut = self._pending
                delay = deadline - now()
                if delay > 0:
                    self._cv.wait(delay)  # a new deadline or close() may arrive meanwhile
                    continue
                self._pending = None
            try:
                self._loop.call_soon_threadsafe(_wake, fut)
            except RuntimeError:  # loop closed during shutdown
                return

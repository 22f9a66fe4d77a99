"""Spread one cell's requests over several client processes, so the client is not the limit.

One asyncio process reads every streamed event of a cell on one core. At concurrency 1024 and
20 ms between tokens that is ~50,000 events a second; a quiet core keeps up (issue 18: 97% of
the best case), but as soon as the engine's scheduler or tokenizer shares that core the loop
falls behind and its timestamps with it. Several processes on free cores each carry a part.

How a cell is split and put back together, so the metrics mean exactly what they mean with one
process:

* Request i (global index, same prompt and arrival offset as with one process) goes to process
  i % N; each process gets its share of the concurrency slots (they add up to the cell's) and
  of the warmup requests (at least one each, so every process warms its own path).
* Each process (a "spawn" child: never a fork of a possibly threaded runner) draws the prompts,
  runs its warmup, opens its connections and reports ready. When all are ready the parent
  picks one start instant on `time.perf_counter` (CLOCK_MONOTONIC, shared by every process of
  the host) a little ahead, and every process starts its clock and its requests at it; each
  record's `start` is relative to that common instant.
* The records are merged in index order and the metrics recomputed from all of them with the
  single-process definitions (`aggregate.py`). The self-check (`selfcheck.judge`) reads every
  process's lag probe against that process's own events; CPU is the sum over processes (per
  wall second) and, for the throughput flag, the busiest process's share.
* A process that fails makes the cell fail as one process would: an unreachable server is the
  same `LoadError`, bad input the same `InputError`; a crash or a killed process is a
  `LoadError` naming the process. Per-request failures stay data, as with one process.
  Every child is terminated and joined on the way out, whatever happened (no orphans).

`processes: auto` (the default) takes one process per `PER_PROCESS` slots of concurrency,
capped by the cores this process may run on minus one (the parent and whatever else shares
the host need one): 1 below 257, and 1 on a 2-core machine, where a second client process
would only compete with the first for the one other core.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from matrixrun.core.errors import LoadError, MatrixError
from matrixrun.load.client import (
    LoadConfig,
    LoadResult,
    Measured,
    Share,
    finish,
    loop_factory,
    measure_share,
    now,
)

#: Concurrency slots one process carries under `auto`: the issue's quiet single-process
#: measurement held 99.5% of the best case at 256 and slipped to 97% at 1024.
PER_PROCESS = 256
#: How far ahead of "all ready" the common start instant is: long enough for every process
#: to receive it before it passes.
START_MARGIN_S = 0.05
#: How often the parent looks at its children while it waits.
POLL_S = 0.01


def auto_processes(concurrency: int, cores: int) -> int:
    """`auto`'s choice: ceil(concurrency / PER_PROCESS), at most `cores` − 1, at least 1."""
    return max(1, min(math.ceil(concurrency / PER_PROCESS), cores - 1))


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask: a `taskset` or a cgroup counts)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def resolve_processes(config: LoadConfig, cores: Callable[[], int] = usable_cores) -> int:
    """How many processes a cell runs in: `auto`'s choice or the number asked, never more
    than there are requests or concurrency slots to give each one."""
    asked = config.processes
    n = auto_processes(config.concurrency, cores()) if asked == "auto" else asked
    return max(1, min(n, config.concurrency, config.num_prompts))


def shares(config: LoadConfig, n: int) -> list[Share]:
    """Process w's requests (i % n == w), concurrency slots and warmup requests."""
    conc, warm = config.concurrency, config.warmup_requests
    return [
        Share(
            list(range(w, config.num_prompts, n)),
            conc // n + (w < conc % n),
            0 if warm == 0 else max(1, warm // n + (w < warm % n)),
        )
        for w in range(n)
    ]


def _worker(config: LoadConfig, share: Share, conn: Connection) -> None:
    """A child process: measure `share`, send ("done", Measured) or an error message. Ctrl-C
    reaches the whole process group; the child leaves it to the parent, which stops it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    async def start_at() -> float:
        conn.send(("ready", None))
        t0: float = await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        delay = t0 - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        return t0

    message: tuple[str, Any]
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            message = ("done", runner.run(measure_share(config, share, start_at)))
    except MatrixError as e:  # one sentence already (unreachable server, bad input)
        message = ("matrix_error", e)
    except BaseException as e:  # reported to the parent, which raises it as a LoadError
        message = ("error", f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
    try:
        conn.send(message)
    except OSError:  # the parent is gone: nobody to tell
        pass
    finally:
        conn.close()


def _receive(conn: Connection) -> tuple[str, Any] | None:
    """The child's next message, or None when there is none (yet, or ever: a closed pipe)."""
    try:
        if conn.poll():
            message: tuple[str, Any] = conn.recv()
            return message
    except (EOFError, OSError):
        pass
    return None


async def _collect(procs: list[Any], conns: list[Connection], want: str) -> list[Any]:
    """Wait until every child has sent `want`; its payloads in child order. A child that
    reports an error or exits without a word ends the wait with a `LoadError`."""
    got: dict[int, Any] = {}
    n = len(procs)
    while len(got) < n:
        for w, (proc, conn) in enumerate(zip(procs, conns, strict=True)):
            if w in got:
                continue
            message = _receive(conn)
            if message is not None:
                kind, payload = message
                if kind == want:
                    got[w] = payload
                elif kind == "matrix_error":
                    raise payload
                else:
                    raise LoadError(f"client process {w + 1} of {n} failed: {payload}")
            elif not proc.is_alive() and _receive(conn) is None:
                raise LoadError(
                    f"client process {w + 1} of {n} exited (code {proc.exitcode}) before it "
                    f"was {'ready' if want == 'ready' else 'done'}; nothing of the cell is kept"
                )
        if len(got) < n:
            await asyncio.sleep(POLL_S)
    return [got[w] for w in range(n)]


async def run_processes(config: LoadConfig, n: int) -> LoadResult:
    """Measure one cell over `n` child processes and merge them (see the module docstring)."""
    ctx = mp.get_context("spawn")
    procs: list[Any] = []
    conns: list[Connection] = []
    try:
        for w, share in enumerate(shares(config, n)):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=_worker, args=(config, share, theirs), name=f"matrixrun-client-{w + 1}"
            )
            # terminated when the parent exits; a parent killed hard leaves a child to finish
            # its share and exit on its own (it only ever talks to the parent)
            proc.daemon = True
            proc.start()
            theirs.close()
            procs.append(proc)
            conns.append(mine)
        await _collect(procs, conns, "ready")
        t0 = time.perf_counter() + START_MARGIN_S
        for conn in conns:
            conn.send(t0)
        parts: list[Measured] = await _collect(procs, conns, "done")
    finally:
        _stop(procs, conns)
    wall = max(m.wall_s for m in parts)
    cpu = sum(m.cpu_s for m in parts) / wall if wall > 0 else None
    cpu_max = max((m.cpu_s / m.wall_s for m in parts if m.wall_s > 0), default=None)
    return finish(config, parts, cpu, cpu_max)


def _stop(procs: list[Any], conns: list[Connection]) -> None:
    """Terminate what still runs and reap every child (SIGKILL after 5 s of SIGTERM)."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(5)
        if proc.is_alive():  # pragma: no cover - a child that ignores SIGTERM
            proc.kill()
            proc.join()
    for conn in conns:
        conn.close()


async def run_load(config: LoadConfig) -> LoadResult:
    """Measure one cell: warmup, then `num_prompts` requests; see the module docstring. With
    `processes` above 1 (or "auto" choosing more), `multi.py` spreads it over processes."""
    n = resolve_processes(config)
    if n > 1:
        return await run_processes(config, n)
    m = await measure_share(config, Share.whole(config), now)
    wall = m.wall_s
    return finish(config, [m], m.cpu_s / wall if wall > 0 else None, None)


def run_load_sync(config: LoadConfig) -> LoadResult:
    """`run_load` on a fresh event loop (`loop_factory`)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(run_load(config))

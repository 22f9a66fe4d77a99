"""Measure one cell: a workload stated in modelled time, run against one server by the
built-in client or by `sglang.bench_serving`, and converted back to modelled time.

This is where every way a cell can fail becomes its one-sentence error (a cell timeout, a
`LoadError` from either client, every request failing), so the runner records a `CellRun` and
never catches a load exception itself. The time scale is the engine's (`Engine.time_scale`):
timeouts, the duration and the request rate go to the server's time on the way in, metrics
come back to modelled time on the way out; per-request records stay in the server's time
(results.py says how to read them). A server that died under the cell is the runner's to
notice: this module only knows the load.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from matrixrun.errors import LoadError
from matrixrun.load.client import LoadConfig, run_load
from matrixrun.load.records import RequestRecord
from matrixrun.metrics import Metrics
from matrixrun.timescale import TimeScale

T = TypeVar("T")


@dataclass(frozen=True)
class BenchServing:
    """Measure with `python -m sglang.bench_serving` instead of the built-in client."""

    out_dir: Path
    launch: list[str] | None = None
    tokenizer: str | None = None


@dataclass(frozen=True)
class CellRun:
    """What measuring one cell gave: metrics in modelled time (None when nothing was
    measured), the per-request records (server time), the error sentence when the cell did not
    measure, and bench_serving's argv when it ran (unredacted: the caller redacts it)."""

    metrics: Metrics | None
    records: list[RequestRecord]
    error: str | None = None
    argv: list[str] | None = None


def in_server_time(config: LoadConfig, scale: TimeScale) -> LoadConfig:
    """`config` (modelled time) as the client must run it against a server on `scale`."""
    if scale.factor == 1:
        return config
    return config.model_copy(
        update={
            "request_rate": scale.server_rate(config.request_rate),
            "request_timeout_s": scale.server_seconds(config.request_timeout_s),
            "duration_s": (
                scale.server_seconds(config.duration_s) if config.duration_s is not None else None
            ),
        }
    )


def measure_cell(
    config: LoadConfig,
    scale: TimeScale,
    cell_timeout_s: float,
    bench_serving: BenchServing | None = None,
) -> CellRun:
    """Run one cell's load (`config` and `cell_timeout_s` in modelled time); never raises for
    a cell that could not be measured: that is a `CellRun` with an error."""
    server_config = in_server_time(config, scale)
    limit_s = scale.server_seconds(cell_timeout_s)
    argv: list[str] | None = None
    try:
        if bench_serving is not None:
            from matrixrun.load.bench_serving_client import run_bench_serving

            metrics, records, argv = run_bench_serving(
                server_config,
                bench_serving.out_dir,
                bench_serving.launch,
                limit_s,
                tokenizer=bench_serving.tokenizer,
            )
        else:
            result = asyncio.run(_bounded(run_load(server_config), limit_s))
            metrics, records = result.metrics, result.records
    except TimeoutError:
        return CellRun(
            None, [], f"cell timed out after {cell_timeout_s:.0f}s (limits.cell_timeout)"
        )
    except LoadError as exc:
        return CellRun(None, [], str(exc))
    error = None
    if metrics.completed == 0:
        first = next((r.error for r in records if r.error), "no request completed")
        error = f"every request failed: {first}"
    return CellRun(scale.modelled(metrics), records, error, argv)


async def _bounded(work: Coroutine[Any, Any, T], seconds: float) -> T:
    """`work` within a time limit. (asyncio.timeout, not wait_for: on Python 3.11 wait_for can
    swallow the cancellation that Ctrl-C sends, and the run would not stop.)"""
    async with asyncio.timeout(seconds):
        return await work

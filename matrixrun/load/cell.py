"""Measure one cell: a workload stated in modelled time, run against one server by the
built-in client or by `sglang.bench_serving`, and converted back to modelled time.

This is where every way a cell can fail becomes its one-sentence error (a cell timeout, a
`LoadError` from either client, every request failing), so the runner records a `CellRun` and
never catches a load exception itself. The time scale is the engine's (`Engine.time_scale`):
timeouts, the duration and the request rate go to the server's time on the way in, metrics
come back to modelled time on the way out; per-request records stay in the server's time
(`load/records.py` says how to read them). A server that died under the cell is the runner's
to notice: this module only knows the load.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from matrixrun.core import interrupt
from matrixrun.core.errors import LoadError
from matrixrun.core.measurement import Failure
from matrixrun.core.metrics import Metrics
from matrixrun.core.timescale import TimeScale
from matrixrun.load.bench_serving_client import PROMPT_LENGTHS, run_bench_serving
from matrixrun.load.client import NEVER_SENT, LoadConfig, LoadResult
from matrixrun.load.idle import IDLE_MIN_S, idle_gaps, threshold
from matrixrun.load.multi import run_load
from matrixrun.load.records import RequestRecord

T = TypeVar("T")


@dataclass(frozen=True)
class BenchServing:
    """Measure with `python -m sglang.benchmark.serving` instead of the built-in client."""

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
    failure: Failure | None = None
    argv: list[str] | None = None
    #: Facts about the measurement for `Measurement.extra`: the client's CPU share and
    #: self-check, a time cap that cut requests (`capped`: then `error` says the run is not
    #: compared), completed requests shorter than asked, the server's silences (`idle_gaps`),
    #: a trace replayed on its own timestamps (`scheduled_arrivals`).
    extra: dict[str, Any] = field(default_factory=dict)


def in_server_time(config: LoadConfig, scale: TimeScale) -> LoadConfig:
    """`config` (modelled time) as the client must run it against a server on `scale`."""
    if scale.factor == 1:
        return config
    # a trace's schedule is modelled time too: its offsets shrink with the scale
    dataset = config.dataset.model_copy(
        update={"time_scale": scale.server_seconds(config.dataset.time_scale)}
    )
    return config.model_copy(
        update={
            "dataset": dataset,
            "request_rate": scale.server_rate(config.request_rate),
            "request_timeout_s": scale.server_seconds(config.request_timeout_s),
            "duration_s": _server_seconds(scale, config.duration_s),
            "time_cap_s": _server_seconds(scale, config.time_cap_s),
        }
    )


def _server_seconds(scale: TimeScale, modelled_s: float | None) -> float | None:
    return scale.server_seconds(modelled_s) if modelled_s is not None else None


def measure_cell(
    config: LoadConfig,
    scale: TimeScale,
    cell_timeout_s: float,
    bench_serving: BenchServing | None = None,
) -> CellRun:
    """Run one cell's load (`config` and `cell_timeout_s` in modelled time); never raises for
    a cell that could not be measured: that is a `CellRun` with an error."""
    server_config = in_server_time(config, scale)
    argv: list[str] | None = None
    extra: dict[str, Any] = {}
    try:
        if bench_serving is not None:
            metrics, records, argv = run_bench_serving(
                server_config,
                bench_serving.out_dir,
                bench_serving.launch,
                scale.server_seconds(cell_timeout_s),
                tokenizer=bench_serving.tokenizer,
            )
            extra["prompt_lengths"] = PROMPT_LENGTHS[config.api]
        else:
            # the client caps the measured requests and the warmup at config.time_cap_s
            # itself; this outer bound covers both (a warmup that copies the cell,
            # `warmup_requests: cell`, its share of another cell) and a request's timeout
            copy = min(config.warmup_requests / config.num_prompts, 1.0) * cell_timeout_s
            bound = scale.server_seconds(cell_timeout_s + copy + config.request_timeout_s) + 30.0
            # stopped by a Ctrl-C while the runner handles SIGINT (core/interrupt.py)
            result = interrupt.run(_bounded(run_load(server_config), bound))
            metrics, records = result.metrics, result.records
            extra = _client_extras(result, config.output_len, cell_timeout_s, scale)
            if config.dataset.kind == "trace":
                # its timestamps set the load, the concurrency only caps it: the report must
                # not read a trace's few requests in flight as a load that fell short
                extra["scheduled_arrivals"] = True
    except TimeoutError:
        why = f"cell timed out after {cell_timeout_s:.0f}s (limits.cell_timeout)"
        return CellRun(None, [], why, Failure.CELL_TIMEOUT)
    except LoadError as exc:
        return CellRun(None, [], str(exc), Failure.LOAD)
    error, failure = None, None
    if metrics.completed == 0 and "capped" in extra:
        error = (
            f"no request finished within limits.cell_timeout ({cell_timeout_s:.0f}s); raise it "
            "or lower the load"
        )
        failure = Failure.CAPPED_EMPTY
    elif metrics.completed == 0:
        first = next((r.error for r in records if r.error), "no request completed")
        error, failure = f"every request failed: {first}", Failure.ALL_REQUESTS_FAILED
    elif "capped" in extra:
        error, failure = capped_error(extra), Failure.CAPPED
    return CellRun(scale.modelled(metrics), records, error, failure, argv, extra)


def capped_error(extra: dict[str, Any]) -> str:
    """The error of a measurement the time cap cut short: what it cut, why its numbers are
    not used (the requests that finished are the fast ones, their span is not the cell's
    workload) and, where the records show it, that the server had gone quiet."""
    c = extra["capped"]
    done, cut, unsent = int(c["completed"]), int(c["cut_requests"]), int(c["never_sent"])
    parts = [f"{cut} request{'' if cut == 1 else 's'} in flight cut"] if cut else []
    parts += [f"{unsent} never sent"] if unsent else []
    total = int(c.get("total", done + cut + unsent))
    text = (
        f"the cell's time cap (limits.cell_timeout, {float(c['after_s']):g} s) came first: "
        f"{' and '.join(parts)}, {done} of {total} requests finished; a throughput over the "
        "finished ones is not the cell's, so this run is not compared"
    )
    gaps = extra.get("idle_gaps") or []
    if gaps:
        g = max(gaps, key=lambda g: float(g["for_s"]))
        text += "; " + idle_words(float(g["for_s"]), int(g["outstanding"]))
    return text


def idle_words(for_s: float, outstanding: int) -> str:
    """One idle gap in words (the measurement's error and the report say it alike)."""
    noun = "request was" if outstanding == 1 else "requests were"
    return f"the server sent nothing for {for_s:.1f} s while {outstanding} {noun} outstanding"


def _idle_extras(records: list[RequestRecord], scale: TimeScale) -> list[dict[str, Any]]:
    """The longest `MAX_GAPS` idle gaps (`load/idle.py`), in time order and modelled time."""
    found = idle_gaps(records, threshold(records, scale.server_seconds(IDLE_MIN_S)))
    longest = sorted(sorted(found, key=lambda g: -g.length)[:MAX_GAPS], key=lambda g: g.at)
    return [
        {
            "at_s": round(g.at * scale.factor, 3),
            "for_s": round(g.length * scale.factor, 3),
            "outstanding": g.outstanding,
        }
        for g in longest
    ]


#: Idle gaps kept per measurement: a server that stalls again and again is said by a few.
MAX_GAPS = 3


def _client_extras(
    result: LoadResult, output_len: int, cap_s: float, scale: TimeScale
) -> dict[str, Any]:
    """What the built-in client saw besides the metrics: its CPU share and self-check, a time
    cap (`cap_s`, modelled) that cut requests, completed requests that ended short of
    `output_len`, the commonest request errors, the server's silences (`idle_gaps`)."""
    extra: dict[str, Any] = {}
    if result.output_lens and len(set(result.output_lens)) > 1:
        extra["output_lens"] = [min(result.output_lens), max(result.output_lens)]
    if result.warmup_failed:
        extra["warmup_failed"] = result.warmup_failed  # tolerated; the report can say so
    if result.warmup_capped:
        extra["warmup_capped"] = result.warmup_capped  # the copy of a capped cell, cut too
    if result.client_cpu is not None:
        extra["client_cpu"] = round(result.client_cpu, 3)
    if result.check is not None:
        extra["client_check"] = result.check.as_dict()
    extra["client_processes"] = result.processes
    errors = Counter(r.error for r in result.records if r.error)
    if errors:  # by reason, so the report can say what failed without the records file
        extra["request_errors"] = dict(errors.most_common(5))
    if result.capped:
        unsent = sum(1 for r in result.records if r.error.startswith(NEVER_SENT))
        extra["capped"] = {
            "after_s": cap_s,
            "cut_requests": result.capped - unsent,  # in flight when the cap came
            "never_sent": unsent,
            "completed": len([r for r in result.records if r.ok]),
            "total": len(result.records),
        }
    gaps = _idle_extras(result.records, scale)
    if gaps:
        extra["idle_gaps"] = gaps
    short = result.short_outputs(output_len)
    if short:
        extra["short_outputs"] = short
    return extra


async def _bounded(work: Coroutine[Any, Any, T], seconds: float) -> T:
    """`work` within a time limit. (asyncio.timeout, not wait_for: on Python 3.11 wait_for can
    swallow the cancellation that Ctrl-C sends, and the run would not stop.)"""
    async with asyncio.timeout(seconds):
        return await work

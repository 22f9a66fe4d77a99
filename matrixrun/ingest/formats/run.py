"""What every format reader returns: one `Run` per benchmark run found in a file.

A run carries a `BenchServingRecord`, the shape `matrixrun.ingest.records` already maps to
measurements, so the arm / point / repeat logic exists once; the format readers only translate
their tool's field names and definitions into bench_serving's. What a record cannot say travels
beside it: which format and tool wrote it, which server launch it came from when the file tells
(a `vllm bench sweep` serve combination), and the definitions of its metrics, so a comparison
never silently mixes a metric measured two different ways."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from matrixrun.core.errors import InputError
from matrixrun.core.metrics import METRIC_NAMES, Metrics
from matrixrun.load.bench_serving import BenchServingRecord

__all__ = [
    "FORMATS", "Format", "Run", "count", "family", "finite", "make_metrics", "require_number",
]  # fmt: skip

Format = Literal[
    "bench_serving", "vllm", "vllm_sweep", "vllm_table", "guidellm", "aiperf", "genai_bench",
    "inference_perf", "llmperf",
]  # fmt: skip
FORMATS: tuple[Format, ...] = (
    "bench_serving", "vllm", "vllm_sweep", "vllm_table", "guidellm", "aiperf", "genai_bench",
    "inference_perf", "llmperf",
)  # fmt: skip


def family(metric: str) -> str:
    """The definition a metric's statistics share: mean/median/pNN_tpot_ms -> 'tpot'."""
    for name in ("ttft", "tpot", "itl", "e2e_latency"):
        if metric.endswith(f"_{name}_ms"):
            return name
    return metric


@dataclass(frozen=True)
class Run:
    """One benchmark run of some tool, as a bench_serving record plus what it cannot hold."""

    record: BenchServingRecord
    format: Format
    #: The tool and version as the file records it, e.g. "vllm bench serve 0.33.0".
    tool: str
    #: Server launch the run came from when the format records it, else None (see ingest).
    server: str | None = None
    #: Metric family ('ttft', 'tpot', 'itl', 'e2e_latency', 'output_throughput', ...) -> how
    #: this tool defines it, for the families whose definition differs from bench_serving's.
    definitions: dict[str, str] = field(default_factory=dict)
    #: Metric names filled by a labelled conversion -> what was computed.
    derived: dict[str, str] = field(default_factory=dict)
    #: What the run measured against, where the file records it: "model", "gpu",
    #: "dataset", "client version" -> value. Arms must agree on these (see checks.py).
    identity: dict[str, str] = field(default_factory=dict)
    #: Why the file shows speculative decoding (e.g. "accept_length 2.9"), else None: its
    #: streamed chunks carry several tokens, so per-chunk ITL is not per-token ITL.
    spec_decode: str | None = None
    #: What the file does not record and was therefore set to a stated default (e.g. a
    #: table that lists completed requests only: failures "not recorded"), one line each.
    notes: tuple[str, ...] = ()
    #: Why the file records no failure count, where it does not (its `failed` is then 0 for
    #: want of a number): the report says so before the verdict, never "0 failed" alone.
    failures_unrecorded: str | None = None
    #: Server-side numbers the file holds beside the client's (inference-perf's Prometheus
    #: scrape): shown in the summary and ingest.json, never put into the record compared.
    server_side: dict[str, float] = field(default_factory=dict)


def finite(value: Any) -> float | None:
    """A finite number as float, else None (NaN, inf, strings, booleans, missing)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def require_number(data: dict[str, Any], key: str, where: str, todo: str) -> float:
    """`data[key]` as a finite float, or an InputError naming the file and field."""
    if key not in data:
        raise InputError(f"{where}: missing {key!r}; {todo}")
    value = finite(data[key])
    if value is None:
        raise InputError(
            f"{where}: {key!r} is {data[key]!r}, not a finite number; the run probably "
            "completed no request: rerun it, or leave the file out"
        )
    return value


#: How far from a whole number a count written as a float may be and still be that number:
#: tools sum token counts as floats (guidellm wrote 1748.9999999999998 for 1749 tokens).
COUNT_TOLERANCE = 1e-6


def count(value: float, key: str, where: str) -> int:
    """A token or request count: a non-negative whole number, allowing the rounding error of
    a float sum (within `COUNT_TOLERANCE` of a whole number, relative to its size)."""
    nearest = round(value)
    if value < 0 or abs(value - nearest) > COUNT_TOLERANCE * max(1.0, abs(value)):
        raise InputError(f"{where}: {key!r} is {value!r}, not a count; fix or leave out the file")
    return int(nearest)


def make_metrics(values: dict[str, Any], where: str) -> Metrics:
    """Metrics from bench_serving-named values; latencies absent or not finite become None.

    Latency statistics are dropped when nothing completed: tools write 0 for the mean of an
    empty list, which is not a measurement."""
    data = dict(values)
    for name in METRIC_NAMES:
        if name.endswith("_ms") or name == "concurrency":
            data[name] = finite(data.get(name)) if data.get("completed", 0) > 0 else None
    try:
        return Metrics.model_validate(data)
    except ValueError as err:  # pydantic's ValidationError is a ValueError
        raise InputError(f"{where}: {err}; fix or leave out the file") from None


def totals_over(
    duration: float, completed: int, failed: int, total_in: int, total_out: int
) -> dict[str, Any]:
    """The counts and bench_serving's four throughputs as totals over `duration` (how
    bench_serving defines them; the tools' own rates use other windows, so they are
    recomputed)."""
    return {
        "duration": duration,
        "completed": completed,
        "failed": failed,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": completed / duration,
        "input_throughput": total_in / duration,
        "output_throughput": total_out / duration,
        "total_throughput": (total_in + total_out) / duration,
    }

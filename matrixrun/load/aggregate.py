"""Records → `Metrics`, with `sglang.bench_serving`'s definitions (its `calculate_metrics`).

Pure: no clocks, files or network. Definitions, checked against bench_serving's source:

* Only successful requests enter latencies, token totals and throughputs; `failed` counts the
  rest (bench_serving drops them silently; we keep the count).
* `duration`: benchmark start → last request finished (successful or not). bench_serving
  stops its clock after gathering all requests (and, for sglang backends, one
  `/get_server_info` call), so ours is the same span minus that call.
* `ttft_ms`: request sent → first chunk carrying tokens.
* `e2e_latency_ms`: request sent → end of stream (`data: [DONE]`).
* `tpot_ms` per request: (e2e − ttft) / (output_tokens − 1), only for output_tokens > 1.
* `itl_ms`: for every chunk after the first, the gap since the previous token-carrying chunk;
  a chunk carrying k tokens contributes k values of gap/k (bench_serving's native-API rule;
  the first chunk's extra tokens contribute none).
* `total_cached_tokens`: the prompt tokens the server's prefix cache held, over the requests
  whose server reported it (SGLang's `cached_tokens`); None when none did.
* throughputs: completed / duration, input tokens / duration, output tokens / duration,
  (input + output) / duration.
* `concurrency`: sum of successful e2e latencies / duration.
* Statistics: numpy's mean, median, population std (ddof=0) and linear-interpolation
  percentiles (`np.percentile` default), over all values pooled across requests (ITL values
  are pooled, not averaged per request). None where there is no value (bench_serving reports
  0 there, which reads as a real measurement).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from matrixrun.core.metrics import Metrics
from matrixrun.load.records import RequestRecord


def itl_values(record: RequestRecord) -> list[float]:
    """The inter-token latencies one request contributes, in seconds."""
    times, tokens = record.chunk_times, record.chunk_tokens
    out: list[float] = []
    for j in range(1, len(times)):
        k = tokens[j]
        if k <= 0:
            continue
        out.extend([(times[j] - times[j - 1]) / k] * k)
    return out


def tpot(record: RequestRecord) -> float | None:
    """Time per output token after the first, in seconds; None for 1-token outputs."""
    if record.ttft is None or record.output_tokens <= 1:
        return None
    return (record.e2e - record.ttft) / (record.output_tokens - 1)


def duration_of(records: Sequence[RequestRecord]) -> float:
    """Benchmark start → the last request's end."""
    return max((r.end for r in records), default=0.0)


def summary(values: Sequence[float], prefix: str, scale: float = 1000.0) -> dict[str, float]:
    """mean/median/std/p90/p95/p99 of `values` × `scale`, keyed `{stat}_{prefix}`."""
    if not values:
        return {}
    arr = np.asarray(values, dtype=np.float64)
    p90, p95, p99 = np.percentile(arr, [90, 95, 99])
    return {
        f"mean_{prefix}": float(np.mean(arr)) * scale,
        f"median_{prefix}": float(np.median(arr)) * scale,
        f"std_{prefix}": float(np.std(arr)) * scale,
        f"p90_{prefix}": float(p90) * scale,
        f"p95_{prefix}": float(p95) * scale,
        f"p99_{prefix}": float(p99) * scale,
    }


def compute_metrics(records: Sequence[RequestRecord], duration: float | None = None) -> Metrics:
    """Aggregate metrics of one measurement. `duration` defaults to `duration_of(records)`."""
    dur = duration_of(records) if duration is None else duration
    ok = [r for r in records if r.ok]
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    e2es = [r.e2e for r in ok]
    tpots = [t for t in (tpot(r) for r in ok) if t is not None]
    itls: list[float] = []
    for r in ok:
        itls.extend(itl_values(r))
    total_in = sum(r.prompt_tokens for r in ok)
    reported = [r.cached_tokens for r in ok if r.cached_tokens is not None]
    total_out = sum(r.output_tokens for r in ok)

    def per_s(x: float) -> float:
        return x / dur if dur > 0 else 0.0

    return Metrics(
        duration=dur,
        completed=len(ok),
        failed=len(records) - len(ok),
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        total_cached_tokens=sum(reported) if reported else None,
        request_throughput=per_s(len(ok)),
        input_throughput=per_s(total_in),
        output_throughput=per_s(total_out),
        total_throughput=per_s(total_in + total_out),
        concurrency=per_s(sum(e2es)) if ok else None,
        **summary(ttfts, "ttft_ms"),
        **summary(tpots, "tpot_ms"),
        **summary(itls, "itl_ms"),
        **summary(e2es, "e2e_latency_ms"),
    )

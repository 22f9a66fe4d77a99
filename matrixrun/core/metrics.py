"""The measurement vocabulary: one cell's aggregate metrics, named exactly as `sglang.bench_serving`
names them, so numbers from our client, from bench_serving files and from published tables line up.

Also which way is "better" for each metric (the analysis signs log ratios with it) and the
conversion of a time-dilated simulator measurement back to modelled time.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

STATS = ("mean", "median", "std", "p90", "p95", "p99")
LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms")
THROUGHPUTS = ("request_throughput", "input_throughput", "output_throughput", "total_throughput")

#: Every metric name a spec may name as primary or secondary.
METRIC_NAMES: tuple[str, ...] = (
    *THROUGHPUTS,
    *(f"{stat}_{lat}" for lat in LATENCIES for stat in STATS),
    "concurrency",
)

MetricName = Literal[
    "request_throughput", "input_throughput", "output_throughput", "total_throughput",
    "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p90_ttft_ms", "p95_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p90_tpot_ms", "p95_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "std_itl_ms", "p90_itl_ms", "p95_itl_ms", "p99_itl_ms",
    "mean_e2e_latency_ms", "median_e2e_latency_ms", "std_e2e_latency_ms", "p90_e2e_latency_ms",
    "p95_e2e_latency_ms", "p99_e2e_latency_ms",
    "concurrency",
]  # fmt: skip


def higher_is_better(metric: str) -> bool:
    """Throughputs improve upwards; latencies (and their spreads) improve downwards."""
    return metric.endswith("_throughput")


def unit(metric: str) -> str:
    """The unit printed beside a metric's value."""
    if metric == "output_throughput" or metric in ("input_throughput", "total_throughput"):
        return "tok/s"
    if metric == "request_throughput":
        return "req/s"
    if metric.endswith("_ms"):
        return "ms"
    return ""


class Metrics(BaseModel):
    """Aggregate metrics of one measurement (one cell, one arm, one attempt).

    Field names and definitions are bench_serving's: TPOT = (e2e - ttft) / (output_tokens - 1)
    per request; ITL = gaps between streamed chunks (a chunk of k tokens contributes k gaps of
    gap/k); output_throughput = total output tokens / benchmark duration; concurrency = sum of
    e2e latencies / duration. Latency statistics are over successful requests only; `failed`
    counts the others. None where undefined (e.g. no request completed).
    """

    model_config = ConfigDict(extra="forbid")

    duration: float
    completed: int
    failed: int = 0
    total_input_tokens: int
    total_output_tokens: int
    #: Prompt tokens found in the server's prefix cache (SGLang's `cached_tokens`, summed);
    #: None where the server does not report it, and then left out of the JSON.
    total_cached_tokens: int | None = None
    request_throughput: float
    input_throughput: float
    output_throughput: float
    total_throughput: float
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    std_ttft_ms: float | None = None
    p90_ttft_ms: float | None = None
    p95_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    std_tpot_ms: float | None = None
    p90_tpot_ms: float | None = None
    p95_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    std_itl_ms: float | None = None
    p90_itl_ms: float | None = None
    p95_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2e_latency_ms: float | None = None
    median_e2e_latency_ms: float | None = None
    std_e2e_latency_ms: float | None = None
    p90_e2e_latency_ms: float | None = None
    p95_e2e_latency_ms: float | None = None
    p99_e2e_latency_ms: float | None = None
    concurrency: float | None = None

    @model_serializer(mode="wrap")
    def _without_unknown_cache(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave `total_cached_tokens` out when unknown: results.jsonl lines of servers that
        do not report it stay as they were."""
        data: dict[str, Any] = handler(self)
        if data.get("total_cached_tokens", 0) is None:
            del data["total_cached_tokens"]
        return data

    @property
    def cache_hit_rate(self) -> float | None:
        """The share of prompt tokens found cached (None when unknown)."""
        if self.total_cached_tokens is None or not self.total_input_tokens:
            return None
        return self.total_cached_tokens / self.total_input_tokens

    @property
    def failure_rate(self) -> float:
        total = self.completed + self.failed
        return self.failed / total if total else 1.0

    def get(self, name: str) -> float | None:
        value = getattr(self, name)
        return None if value is None else float(value)

    def undilated(self, time_scale: float) -> Metrics:
        """Convert a measurement taken against a simulator running `time_scale` times faster
        back into modelled time: durations and latencies grow by the factor, rates shrink by it.
        Counts and the (dimensionless) concurrency are unchanged."""
        if time_scale == 1:
            return self
        data = self.model_dump()
        for key, value in data.items():
            if value is None:
                continue
            if key == "duration" or key.endswith("_ms"):
                data[key] = value * time_scale
            elif key.endswith("_throughput"):
                data[key] = value / time_scale
        return Metrics.model_validate(data)

"""guidellm's JSON report (`guidellm run --output kind=json,path=FILE`): one run per benchmark.

Facts from guidellm 0.8.1 (its `schemas/base/request_stats.py` and
`benchmark/schemas/metrics.py`) and reports it wrote against the simulator. A report holds
`metadata.guidellm_version`, `config.metadata.labels` (from `--label key=value`) and
`benchmarks`, one per profile step; each has `config.strategy` (`type_`, `streams` /
`max_concurrency` for a concurrent profile, `rate` for constant/poisson), `duration` (first
request start to last request end, warm-up and cool-down excluded) and `metrics`, each metric
a distribution per request status (`successful`, `errored`, `incomplete`, `total`) with
`mean`, `median`, `std_dev`, `count`, `total_sum` and `percentiles` (`p90`, `p95`, `p99`, ...).

What differs from bench_serving, and so how it is mapped:
- `time_per_output_token_ms` is (last token − request start) / output tokens: it includes the
  first token. Not mapped: it is not bench_serving's TPOT and cannot be turned into it.
- `inter_token_latency_ms` is (last token − first token) / (output tokens − 1) per request,
  which is bench_serving's TPOT, but its statistics weight each request by its output tokens
  − 1. With every successful request the same output length the weights are equal and the
  statistics are bench_serving's per-request TPOT statistics: then mapped to `*_tpot_ms`,
  otherwise refused (left out, and said so).
- there are no per-chunk gaps, so no ITL.
- `requests_per_second` and `*_tokens_per_second` are distributions of rates over time, not
  totals over the duration: the throughputs are computed as bench_serving defines them,
  successful totals / `duration`.
- `request_latency` is in seconds: × 1000 for `*_e2e_latency_ms`.
- `duration` is the benchmark's measurement window (`scheduler_metrics.measure_end_time −
  measure_start_time`). In guidellm 0.5 that window can be the nominal one (the run's
  `--max-seconds`) and outlast the requests by minutes; a throughput over it is not a total
  over the time the requests ran. Where the requests' own span (`request_start_time` to
  `request_end_time`, clipped to the window) differs from the window, the span is used and
  the summary says so.
- reports from before guidellm 0.4 (benchmarks with `run_stats`, no `guidellm_version`, the
  strategy under `args`, the model under `worker.backend_model`) hold the same metrics; their
  `duration` is `end_time − start_time`, the first request's start to the last request's end
  (guidellm 0.3's `GenerativeBenchmark.from_stats`), so it is read as written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run, count, finite, make_metrics, totals_over
from matrixrun.ingest.formats.vllm import load_json
from matrixrun.load.bench_serving import BenchServingRecord

__all__ = ["DEFINITIONS", "is_guidellm", "read_file"]

_HINT = "is this a report written by `guidellm run --output kind=json,...`?"
_STATS = {"mean": "mean", "median": "median", "std": "std_dev"}
_PERCENTILES = ("p90", "p95", "p99")
DEFINITIONS = {
    "tpot": "guidellm's inter_token_latency_ms weights each request by its output tokens − 1; "
    "mapped to TPOT only where every request has the same output length",
    "itl": "guidellm records no per-chunk gaps: no ITL",
}
DERIVED = {
    "request_throughput": "successful requests / duration",
    "input_throughput": "prompt_token_count.successful.total_sum / duration",
    "output_throughput": "output_token_count.successful.total_sum / duration",
    "total_throughput": "(prompt + output tokens of successful requests) / duration",
    "mean_tpot_ms": "inter_token_latency_ms (equal output lengths: per-request statistics)",
    "concurrency": "mean_e2e_latency_ms × completed / duration (bench_serving's definition)",
}


def is_guidellm(data: Any) -> bool:
    """A guidellm report: `benchmarks` with its metadata (0.5 on), its `config` (0.8), or
    benchmarks of its own type (`generative_benchmark`, every version)."""
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        return False
    first = data["benchmarks"][0] if data["benchmarks"] else None
    metadata = data.get("metadata")
    return (
        (isinstance(metadata, dict) and "guidellm_version" in metadata)
        or "config" in data
        or (isinstance(first, dict) and first.get("type_") == "generative_benchmark")
    )


def _dist(metrics: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    entry = metrics.get(name)
    if not isinstance(entry, dict) or not isinstance(entry.get("successful"), dict):
        raise InputError(f"{where}: no 'metrics.{name}.successful' distribution; {_HINT}")
    successful: dict[str, Any] = entry["successful"]
    return successful


def _stats(dist: dict[str, Any], scale: float = 1.0) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for ours, theirs in _STATS.items():
        v = finite(dist.get(theirs))
        out[ours] = None if v is None else v * scale
    percentiles = dist.get("percentiles") or {}
    for p in _PERCENTILES:
        v = finite(percentiles.get(p))
        out[p] = None if v is None else v * scale
    return out


#: How far the requests' span may differ from guidellm's window before it replaces it.
SPAN_TOLERANCE = 0.005


def _duration(bench: dict[str, Any], where: str) -> tuple[float, str | None]:
    """The time the measured requests ran: guidellm's `duration`, or the requests' span
    where its window outlasts them (then also a sentence saying so)."""
    duration = finite(bench.get("duration"))
    if duration is None or duration <= 0:
        raise InputError(
            f"{where}: 'duration' is {bench.get('duration')!r}; the benchmark measured nothing: "
            "rerun it, or leave the file out"
        )
    sm = bench.get("scheduler_metrics") or {}
    times = [finite(sm.get(k)) for k in _WINDOW]
    if any(t is None for t in times):
        return duration, None
    measure_start, measure_end, first, last = (float(t) for t in times if t is not None)
    span = min(measure_end, last) - max(measure_start, first)
    if span <= 0 or abs(span - duration) <= SPAN_TOLERANCE * duration:
        return duration, None
    return span, (
        f"the requests' span, min(measure_end_time, request_end_time) − max(measure_start_time, "
        f"request_start_time) = {span:.3f} s: guidellm's duration ({duration:.3f} s) is its "
        "measurement window, which the requests did not fill"
    )


_WINDOW = ("measure_start_time", "measure_end_time", "request_start_time", "request_end_time")


def _dataset(report: dict[str, Any], bench: Any) -> str | None:
    """The data a benchmark ran on, as the report gives it (`--data`): `config.spec.data`
    (0.8), `args.data` (0.5), the benchmark's `request_loader.data` (before 0.4)."""
    loader = bench.get("request_loader") if isinstance(bench, dict) else None
    given = (
        ((report.get("config") or {}).get("spec") or {}).get("data")
        or (report.get("args") or {}).get("data")
        or (loader or {}).get("data")
    )
    if given in (None, "", []):
        return None
    return given if isinstance(given, str) else json.dumps(given, sort_keys=True)


@dataclass(frozen=True)
class _Counts:
    """What one benchmark counted: its duration (and how it was found), requests, tokens."""

    duration: float
    duration_note: str | None
    completed: int
    failed: int
    incomplete: int
    total_in: int
    total_out: int


def _counts(bench: dict[str, Any], metrics: dict[str, Any], where: str) -> _Counts:
    duration, span_note = _duration(bench, where)
    # request_totals: in the metrics (0.5 on), beside them (before 0.4)
    totals = metrics.get("request_totals") or bench.get("request_totals")
    if not isinstance(totals, dict):
        raise InputError(f"{where}: no 'request_totals' in it or its metrics; {_HINT}")
    completed = count(finite(totals.get("successful")) or 0.0, "request_totals.successful", where)
    failed = count(finite(totals.get("errored")) or 0.0, "request_totals.errored", where)
    prompt = _dist(metrics, "prompt_token_count", where)
    output = _dist(metrics, "output_token_count", where)
    return _Counts(
        duration=duration,
        duration_note=span_note,
        completed=completed,
        failed=failed,
        incomplete=int(finite(totals.get("incomplete")) or 0.0),
        total_in=count(finite(prompt.get("total_sum")) or 0.0, "prompt_token_count", where),
        total_out=count(finite(output.get("total_sum")) or 0.0, "output_token_count", where),
    )


def _metrics(
    metrics: dict[str, Any], counts: _Counts, where: str
) -> tuple[dict[str, float | None], dict[str, str], dict[str, str]]:
    """bench_serving's metrics from one benchmark: throughputs from the totals over its
    duration, TTFT and request latency as they are, TPOT only where every request has the
    same output length (guidellm's inter-token latency is token-weighted). Returns the values,
    how each computed one was derived, and why a metric was left out."""
    c = counts
    values = totals_over(c.duration, c.completed, c.failed, c.total_in, c.total_out)
    for stat, v in _stats(_dist(metrics, "time_to_first_token_ms", where)).items():
        values[f"{stat}_ttft_ms"] = v
    for stat, v in _stats(_dist(metrics, "request_latency", where), scale=1000.0).items():
        values[f"{stat}_e2e_latency_ms"] = v
    derived = {k: v for k, v in DERIVED.items() if not k.endswith("_tpot_ms")}
    if c.duration_note is not None:
        derived["duration"] = c.duration_note
    output = _dist(metrics, "output_token_count", where)
    left_out: dict[str, str] = {}
    if finite(output.get("min")) == finite(output.get("max")):
        for stat, v in _stats(_dist(metrics, "inter_token_latency_ms", where)).items():
            values[f"{stat}_tpot_ms"] = v
        derived["*_tpot_ms"] = DERIVED["mean_tpot_ms"]
    else:
        left_out["tpot"] = (
            "output lengths differ between requests, so guidellm's token-weighted "
            "inter_token_latency_ms is not bench_serving's per-request TPOT: left out"
        )
    mean_e2e = values.get("mean_e2e_latency_ms")
    if mean_e2e is not None:
        values["concurrency"] = mean_e2e / 1000 * c.completed / c.duration
    return values, derived, left_out


def _record(
    bench: dict[str, Any],
    counts: _Counts,
    values: dict[str, float | None],
    *,
    source: str,
    index: int,
    tag: str | None,
) -> BenchServingRecord:
    """The bench_serving-shaped record: the strategy that was asked (synchronous,
    concurrent streams or a rate) beside what was measured."""
    # the strategy: `config.strategy` (0.5 on), `args.strategy` (before 0.4)
    strategy = (bench.get("config") or bench.get("args") or {}).get("strategy") or {}
    kind = strategy.get("type_")
    streams = strategy.get("streams", strategy.get("max_concurrency"))
    max_concurrency = 1 if kind == "synchronous" else (
        int(streams) if isinstance(streams, int) and kind == "concurrent" else None
    )  # fmt: skip
    rate = finite(strategy.get("rate"))
    completed = counts.completed
    return BenchServingRecord(
        source=source,
        line=index + 1,
        tag=tag,
        backend=str(kind) if kind else None,
        request_rate=rate if rate is not None else math.inf,
        max_concurrency=max_concurrency,
        server_info={},
        metrics=make_metrics(values, f"{source}: benchmarks[{index}]"),
        fields={
            "strategy": kind,
            "incomplete": counts.incomplete,
            "mean_input_len": counts.total_in / completed if completed else None,
            "mean_output_len": counts.total_out / completed if completed else None,
        },
    )


def _identity(bench: dict[str, Any], tool: str, dataset: str | None) -> dict[str, str]:
    """What runs must agree on to be compared: guidellm's version, the dataset, the model."""
    recorded = tool.removeprefix("guidellm ")[:1].isdigit()  # "guidellm 0.8.1", not "... before"
    identity = {"client version": tool} if recorded else {}
    if dataset is not None:
        identity["dataset"] = dataset
    model = ((bench.get("config") or {}).get("backend") or {}).get("model") or (
        bench.get("worker") or {}
    ).get("backend_model")
    if isinstance(model, str) and model:
        identity["model"] = model
    return identity


def _benchmark(
    bench: Any, *, source: str, index: int, tag: str | None, tool: str, dataset: str | None
) -> Run:
    where = f"{source}: benchmarks[{index}]"
    if not isinstance(bench, dict) or not isinstance(bench.get("metrics"), dict):
        raise InputError(f"{where}: no 'metrics' object; {_HINT}")
    counts = _counts(bench, bench["metrics"], where)
    values, derived, left_out = _metrics(bench["metrics"], counts, where)
    return Run(
        record=_record(bench, counts, values, source=source, index=index, tag=tag),
        format="guidellm",
        tool=tool,
        definitions={**DEFINITIONS, **left_out},
        derived=derived,
        identity=_identity(bench, tool, dataset),
    )


def read_file(path: str | Path) -> list[Run]:
    """Every benchmark of a guidellm JSON report, in the report's order."""
    p = Path(path)
    data = load_json(p, _HINT)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"{p}: no 'benchmarks' list; {_HINT}")
    version = (data.get("metadata") or {}).get("guidellm_version")
    benches = data["benchmarks"]
    if version:
        tool = f"guidellm {version}"
    elif any(isinstance(b, dict) and "run_stats" in b for b in benches):
        tool = "guidellm before 0.4 (version not recorded; its layout has run_stats)"
    else:
        tool = "guidellm (version not recorded)"
    labels = ((data.get("config") or {}).get("metadata") or {}).get("labels") or {}
    arm = labels.get("arm") if isinstance(labels, dict) else None
    tag = str(arm) if arm not in (None, "") else None
    if not benches:
        raise InputError(f"{p}: the report holds no benchmark; rerun guidellm")
    return [
        _benchmark(b, source=str(p), index=i, tag=tag, tool=tool, dataset=_dataset(data, b))
        for i, b in enumerate(benches)
    ]

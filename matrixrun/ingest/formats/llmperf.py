"""ray-project/llmperf's `token_benchmark_ray.py` results: the `*_summary.json` (one run) and
its `*_individual_responses.json` (that run's requests).

Facts from llmperf at 1eac866 (2023-12, `token_benchmark_ray.py: metrics_summary`,
`ray_clients/openai_chat_completions_client.py`) and the files of the wild corpus
(ray-project/llmperf-leaderboard, summary schema `"version": "2023-08-31"`). The summary's
statistics are over requests without an `error_code`, in **seconds**: `results_<m>_quantiles_
p25 … p99` (pandas' linear quantiles, numpy's too), `_mean`, `_min`, `_max`, `_stddev`
(pandas: divided by n − 1). `results_mean_output_throughput_token_per_s` is the successful
requests' output tokens over `end_time − start_time`, the whole test from before the first
request to after the last response (bench_serving's duration), and
`results_num_completed_requests_per_min` is the completed requests over the same window × 60,
so the duration is computed back from it.

Mapped: TTFT (`ttft_s`) and e2e (`end_to_end_latency_s`) × 1000, median = p50, std converted
from n − 1 to bench_serving's n (× √((n − 1)/n), n the completed requests). Left out:
llmperf's `inter_token_latency_s` is the sum of the gaps *including the TTFT* divided by the
output tokens, i.e. e2e / output tokens, not TPOT. With the per-request file, TPOT is computed
as bench_serving defines it, (e2e − TTFT) / (output tokens − 1) per successful request.
A per-request file has no timestamps, so it is read together with its summary (the same
name in a sibling `summary/` folder, or `<name>_summary.json` beside it), never alone.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run, count, finite, make_metrics, require_number
from matrixrun.ingest.formats.vllm import load_json
from matrixrun.ingest.records import arm_name
from matrixrun.load.bench_serving import BenchServingRecord

__all__ = ["is_individual", "is_summary", "read_file"]

_HINT = "is this llmperf's *_summary.json?"
_LATENCIES = {"ttft": "ttft_s", "e2e_latency": "end_to_end_latency_s"}
_PCTS = {"median": "p50", "p90": "p90", "p95": "p95", "p99": "p99"}
DEFINITIONS = {
    "tpot": "llmperf's inter_token_latency_s is the sum of the gaps including the TTFT over "
    "the output tokens (e2e / output tokens), not bench_serving's TPOT; pass the run's "
    "individual_responses file to have TPOT computed from its requests",
    "itl": "llmperf keeps no gaps between streamed tokens: absent",
}
DERIVED = {
    "duration": "results_num_completed_requests × 60 / results_num_completed_requests_per_min",
    "total_input_tokens": "results_number_input_tokens_mean × completed",
    "total_output_tokens": "results_number_output_tokens_mean × completed",
    "request_throughput": "completed / duration",
    "input_throughput": "total_input_tokens / duration",
    "total_throughput": "input + output throughput",
    "std_ttft_ms, std_e2e_latency_ms": "llmperf's stddev (n − 1) × √((n − 1)/n)",
    "concurrency": "mean e2e latency × completed / duration",
}
TPOT = "(end_to_end_latency_s − ttft_s) / (number_output_tokens − 1) per successful request"


def is_summary(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and "results_num_completed_requests" in data
        and "results_ttft_s_mean" in data
    )


def is_individual(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(r, dict) and "ttft_s" in r and "end_to_end_latency_s" in r for r in data)
    )


def _summary_of(path: Path) -> Path | None:
    """The summary of a per-request file: `<x>_individual_responses.json` → `<x>_summary.json`
    beside it, else the same name in a sibling `summary/` folder."""
    stem = path.name.removesuffix("_individual_responses.json")
    for cand in (
        path.with_name(stem + "_summary.json"),
        path.parent.parent / "summary" / path.name,
    ):
        if cand != path and cand.is_file():
            return cand
    return None


def _individual_of(path: Path) -> Path | None:
    stem = path.name.removesuffix("_summary.json")
    for cand in (
        path.with_name(stem + "_individual_responses.json"),
        path.parent.parent / "individual" / path.name,
    ):
        if cand != path and cand.is_file():
            return cand
    return None


def _values(data: dict[str, Any], where: str) -> dict[str, Any]:
    completed = count(
        require_number(data, "results_num_completed_requests", where, _HINT),
        "results_num_completed_requests", where,
    )  # fmt: skip
    errors = require_number(data, "results_number_errors", where, _HINT)
    failed = count(errors, "results_number_errors", where)
    if completed == 0:
        raise InputError(
            f"{where}: every request failed (results_num_completed_requests 0, "
            f"results_number_errors {failed}, results_error_code_frequency "
            f"{data.get('results_error_code_frequency')}): nothing to compare; leave it out"
        )
    per_min = require_number(data, "results_num_completed_requests_per_min", where, _HINT)
    duration = completed * 60 / per_min
    mean_in = require_number(data, "results_number_input_tokens_mean", where, _HINT)
    mean_out = require_number(data, "results_number_output_tokens_mean", where, _HINT)
    total_in = count(mean_in * completed, "results_number_input_tokens_mean × completed", where)
    total_out = count(mean_out * completed, "results_number_output_tokens_mean × completed", where)
    out_tps = require_number(data, "results_mean_output_throughput_token_per_s", where, _HINT)
    values: dict[str, Any] = {
        "duration": duration,
        "completed": completed,
        "failed": failed,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": completed / duration,
        "input_throughput": total_in / duration,
        "output_throughput": out_tps,
        "total_throughput": total_in / duration + out_tps,
    }
    shrink = math.sqrt((completed - 1) / completed) if completed > 1 else 0.0
    for ours, theirs in _LATENCIES.items():
        mean = finite(data.get(f"results_{theirs}_mean"))
        values[f"mean_{ours}_ms"] = mean * 1000 if mean is not None else None
        std = finite(data.get(f"results_{theirs}_stddev"))
        values[f"std_{ours}_ms"] = std * shrink * 1000 if std is not None else None
        for stat, q in _PCTS.items():
            v = finite(data.get(f"results_{theirs}_quantiles_{q}"))
            values[f"{stat}_{ours}_ms"] = v * 1000 if v is not None else None
    if values["mean_e2e_latency_ms"] is not None:
        values["concurrency"] = values["mean_e2e_latency_ms"] / 1000 * completed / duration
    return values


def _tpot(path: Path, completed: int) -> dict[str, float]:
    """TPOT statistics from a per-request file, bench_serving's definition, over the
    successful requests with more than one output token; the file must hold the summary's
    completed requests (else it is another run's)."""
    rows = load_json(path, "is this llmperf's *_individual_responses.json?")
    if not is_individual(rows):
        raise InputError(f"{path}: not a list of llmperf requests (ttft_s, end_to_end_latency_s)")
    ok = [r for r in rows if r.get("error_code") is None]
    if len(ok) != completed:
        raise InputError(
            f"{path}: {len(ok)} requests without an error_code, but its summary says "
            f"{completed} completed: the two files are not one run; pass the matching pair"
        )
    tpots = [
        (r["end_to_end_latency_s"] - r["ttft_s"]) / (r["number_output_tokens"] - 1) * 1000
        for r in ok
        if (finite(r.get("number_output_tokens")) or 0) > 1
        and finite(r.get("ttft_s")) is not None
        and finite(r.get("end_to_end_latency_s")) is not None
    ]
    if not tpots:
        return {}
    a = np.asarray(tpots)
    return {
        "mean_tpot_ms": float(a.mean()),
        "median_tpot_ms": float(np.median(a)),
        "std_tpot_ms": float(a.std()),
        "p90_tpot_ms": float(np.percentile(a, 90)),
        "p95_tpot_ms": float(np.percentile(a, 95)),
        "p99_tpot_ms": float(np.percentile(a, 99)),
    }


def read_file(path: str | Path) -> list[Run]:
    """The run of a summary (with TPOT from its per-request file when that is beside it), or
    of a per-request file through its summary."""
    p = Path(path)
    data = load_json(p, _HINT)
    summary, individual = p, _individual_of(p)
    if is_individual(data):
        found = _summary_of(p)
        if found is None:
            raise InputError(
                f"{p}: llmperf's per-request file records no timestamps, so no duration or "
                "throughput; put its summary beside it (<name>_summary.json, or summary/"
                f"{p.name}) and pass either file"
            )
        summary, individual = found, p
        data = load_json(summary, _HINT)
    if not is_summary(data):
        raise InputError(
            f"{summary}: no results_num_completed_requests or results_ttft_s_mean; {_HINT}"
        )
    where = str(summary)
    values = _values(data, where)
    derived = dict(DERIVED)
    definitions = dict(DEFINITIONS)
    if individual is not None:
        values.update(_tpot(individual, values["completed"]))
        derived["tpot (all statistics)"] = f"{TPOT}, from {individual}"
        definitions.pop("tpot")
    record = BenchServingRecord(
        source=where,
        line=1,
        tag=arm_name(summary.name.removesuffix(".json")).removesuffix("_summary"),
        backend=str(data.get("framework") or "") or None,
        dataset_name=None,
        request_rate=math.inf,
        max_concurrency=int(c) if (c := finite(data.get("num_concurrent_requests"))) else None,
        random_input_len=int(v) if (v := finite(data.get("mean_input_tokens"))) else None,
        random_output_len=int(v) if (v := finite(data.get("mean_output_tokens"))) else None,
        random_range_ratio=None,
        server_info={},
        metrics=make_metrics(values, where),
        fields={
            "run_of": where,
            "mean_input_len": values["total_input_tokens"] / values["completed"],
            "mean_output_len": values["total_output_tokens"] / values["completed"],
            **({"individual": str(individual)} if individual else {}),
        },
    )
    model = data.get("model")
    version = data.get("version")
    return [
        Run(
            record=record,
            format="llmperf",
            tool=f"llmperf token_benchmark_ray.py (summary schema {version})",
            definitions=definitions,
            derived=derived,
            identity={
                **({"model": model} if isinstance(model, str) and model else {}),
                **({"client version": f"llmperf summary {version}"} if version else {}),
            },
        )
    ]

"""aiperf's summary export (`profile_export_aiperf.json` in its artifact directory): one run.

Facts from aiperf 0.13.0 (`metrics/types/*.py`) and exports it wrote against the simulator.
Every metric is `{"unit", "avg", "p1" ... "p99", "min", "max", "std", "count", "sum"}`
(aggregates have `avg` only); `input_config` holds what was asked: the profiling phase's
`type` (`concurrency`, `request_rate`) with `concurrency` or `rate`, and the synthetic
dataset's `isl`/`osl` means. With `--concurrency 1,4` aiperf writes one `concurrency_N/`
folder per step under the artifact directory.

What differs from bench_serving, and so how it is mapped:
- `inter_token_latency` is (request latency − TTFT) / (output tokens − 1) per request:
  bench_serving's TPOT. `inter_chunk_latency` is the gap between streamed chunks (vLLM's ITL,
  not bench_serving's per-token split).
- `request_throughput` and the token throughputs divide by aiperf's observation window, which
  need not be `benchmark_duration`: computed instead as bench_serving does, totals over
  `benchmark_duration` (first request to last response).
- TTFT, request latency and inter_token_latency statistics include failed requests (aiperf's
  PERCENTILE_INCLUDES_FAILED_REQUESTS); bench_serving's are over successful requests only.
  With no failure they are the same; with failures they are left out.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run, count, finite, make_metrics, totals_over
from matrixrun.ingest.formats.vllm import load_json
from matrixrun.load.bench_serving import BenchServingRecord

__all__ = ["DEFINITIONS", "EXPORT", "arm_of", "is_aiperf", "read_file"]

EXPORT = "profile_export_aiperf.json"
_HINT = f"is this aiperf's {EXPORT}?"
_STEP = re.compile(r"(concurrency|request_rate)_[0-9.]+")
#: ours -> (aiperf metric, expected unit)
_LATENCIES = {
    "ttft": ("time_to_first_token", "ms"),
    "tpot": ("inter_token_latency", "ms"),
    "itl": ("inter_chunk_latency", "ms"),
    "e2e_latency": ("request_latency", "ms"),
}
_STATS = {"mean": "avg", "median": "p50", "std": "std", "p90": "p90", "p95": "p95", "p99": "p99"}
DEFINITIONS = {
    "itl": "aiperf's inter_chunk_latency is one gap per streamed chunk; bench_serving splits "
    "a chunk of k tokens into k gaps of gap/k (the two agree only when every chunk holds "
    "one token)",
}
DERIVED = {
    "request_throughput": "request_count / benchmark_duration",
    "input_throughput": "total_isl / benchmark_duration",
    "output_throughput": "total_osl / benchmark_duration",
    "total_throughput": "(total_isl + total_osl) / benchmark_duration",
    "concurrency": "mean request_latency × completed / benchmark_duration",
}


def is_aiperf(data: Any) -> bool:
    return isinstance(data, dict) and "aiperf_version" in data and "benchmark_duration" in data


def arm_of(path: Path) -> str:
    """The artifact directory's name: the folder holding the export, above aiperf's own
    `concurrency_N` / `request_rate_N` step folders."""
    folder = path.parent
    while _STEP.fullmatch(folder.name) and folder.parent != folder:
        folder = folder.parent
    return folder.name or path.stem


def _scalar(data: dict[str, Any], key: str, unit: str, where: str) -> float:
    entry = data.get(key)
    value = finite(entry.get("avg")) if isinstance(entry, dict) else None
    if value is None or not isinstance(entry, dict):
        raise InputError(f"{where}: no number in {key!r}.avg; {_HINT}")
    if entry.get("unit") != unit:
        raise InputError(
            f"{where}: {key!r} is in {entry.get('unit')!r}, not {unit!r} as aiperf 0.13 writes "
            "it; the export may come from an aiperf version ingest does not read yet"
        )
    return value


def _profiling_phase(config: dict[str, Any]) -> dict[str, Any]:
    phases = config.get("phases") or []
    for phase in phases:
        if isinstance(phase, dict) and phase.get("kind") == "profiling":
            return phase
    return {}


def read_file(path: str | Path) -> list[Run]:
    """The one run of an aiperf summary export."""
    p = Path(path)
    where = str(p)
    data = load_json(p, _HINT)
    if not is_aiperf(data):
        raise InputError(f"{where}: no 'aiperf_version' and 'benchmark_duration'; {_HINT}")
    duration = _scalar(data, "benchmark_duration", "sec", where)
    if duration <= 0:
        raise InputError(f"{where}: 'benchmark_duration' is {duration!r}; rerun aiperf")
    completed = count(_scalar(data, "request_count", "requests", where), "request_count", where)
    errors = data.get("error_request_count")
    failed_value = finite(errors.get("avg")) if isinstance(errors, dict) else None
    failed = count(failed_value or 0.0, "error_request_count", where)
    total_in = count(_scalar(data, "total_isl", "tokens", where), "total_isl", where)
    total_out = count(_scalar(data, "total_osl", "tokens", where), "total_osl", where)
    values = totals_over(duration, completed, failed, total_in, total_out)
    notes: dict[str, str] = {}
    for ours, (theirs, unit) in _LATENCIES.items():
        entry = data.get(theirs)
        if not isinstance(entry, dict):
            continue
        if entry.get("unit") != unit:
            raise InputError(
                f"{where}: {theirs!r} is in {entry.get('unit')!r}, not {unit!r} as aiperf 0.13 "
                "writes it; the export may come from an aiperf version ingest does not read yet"
            )
        if failed and ours != "itl":
            notes[ours] = f"aiperf's {theirs} statistics include failed requests: left out"
            continue
        for stat, key in _STATS.items():
            values[f"{stat}_{ours}_ms"] = finite(entry.get(key))
    derived = dict(DERIVED)
    mean_e2e = values.get("mean_e2e_latency_ms")
    if mean_e2e is not None:
        values["concurrency"] = mean_e2e / 1000 * completed / duration
    else:
        derived.pop("concurrency")
    config = data.get("input_config") or {}
    phase = _profiling_phase(config)
    kind = phase.get("type")
    concurrency = phase.get("concurrency")
    rate = finite(phase.get("rate"))
    datasets = config.get("datasets") or [{}]
    prompts = (datasets[0] or {}).get("prompts") or {}

    def mean_len(key: str) -> int | None:
        v = finite((prompts.get(key) or {}).get("mean"))
        return int(v) if v is not None and v.is_integer() else None

    version = data.get("aiperf_version")
    record = BenchServingRecord(
        source=where,
        line=1,
        tag=arm_of(p),
        backend=str((config.get("endpoint") or {}).get("type") or "") or None,
        dataset_name=str(datasets[0].get("type")) if datasets[0].get("type") else None,
        request_rate=rate if rate is not None else math.inf,
        max_concurrency=int(concurrency) if isinstance(concurrency, int) else None,
        random_input_len=mean_len("isl"),
        random_output_len=mean_len("osl"),
        server_info={},
        metrics=make_metrics(values, where),
        fields={"phase": kind, "benchmark_id": data.get("benchmark_id")},
    )
    definitions = dict(DEFINITIONS)
    definitions.update(notes)
    tool = f"aiperf {version}" if version else "aiperf (version not recorded)"
    return [
        Run(record=record, format="aiperf", tool=tool, definitions=definitions, derived=derived)
    ]


def exports(path: Path) -> list[Path]:
    """The summary exports under an artifact directory (aggregates are not runs)."""
    return sorted(p for p in path.rglob(EXPORT) if "aggregate" not in p.parent.name)

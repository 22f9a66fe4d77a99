"""aiperf's summary export (`profile_export_aiperf.json` in its artifact directory): one run.

Facts from aiperf 0.13.0 (`metrics/types/*.py`) and exports it wrote against the simulator.
Every metric is `{"unit", "avg", "p1" ... "p99", "min", "max", "std", "count", "sum"}`
(aggregates have `avg` only); `input_config` holds what was asked: the profiling phase's
`type` (`concurrency`, `request_rate`) with `concurrency` or `rate`, and the synthetic
dataset's `isl`/`osl` means. With `--concurrency 1,4` aiperf writes one `concurrency_N/`
folder per step under the artifact directory.

Older exports (aiperf 0.8 to 0.12) differ: a phase is named (`name: "profiling"`) instead of
having a `kind`, metrics carry no `sum`/`count`, and `total_isl`/`total_osl` are missing
for some datasets; then the totals are `input_sequence_length.avg × request_count` (the
average is that sum over the same requests), computed and said so. A step folder is any
folder below the artifact directory whose name is its run's own concurrency or rate
(`concurrency_8`, `c8`, `rate-2.5`): it is a sweep point, never an arm.

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
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run, count, finite, make_metrics, totals_over
from matrixrun.ingest.formats.vllm import load_json
from matrixrun.ingest.records import arm_name
from matrixrun.load.bench_serving import BenchServingRecord

__all__ = ["DEFINITIONS", "EXPORT", "arm_of", "artifact_dir", "is_aiperf", "name_arms", "read_file"]

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
    """An aiperf export: metrics at the top beside `aiperf_version` (0.8 on), or under
    `records` with no version (the early layout, as aiperf 0.1 wrote it)."""
    if not isinstance(data, dict):
        return False
    if "aiperf_version" in data and "benchmark_duration" in data:
        return True
    records = data.get("records")
    return isinstance(records, dict) and "benchmark_duration" in records


#: Early names of metrics that later layouts spell out.
_EARLY_NAMES = {"ttft": "time_to_first_token", "ttst": "time_to_second_token"}
EARLY_TOOL = "aiperf (version not recorded; an early layout with its metrics under 'records')"


def _normalised(data: dict[str, Any]) -> dict[str, Any]:
    """An early export (`records`, `input_config.loadgen`, `endpoint.model_names`) in the
    later layout, so one reader maps both: metrics at the top under their later names, the
    load as a profiling phase, the model as a models item."""
    records = data.get("records")
    if not isinstance(records, dict):
        return data
    out: dict[str, Any] = {str(_EARLY_NAMES.get(k, k)): v for k, v in records.items()}
    config = data.get("input_config") or {}
    loadgen = config.get("loadgen") or {}
    endpoint = config.get("endpoint") or {}
    phase: dict[str, Any] = {"name": "profiling"}
    if loadgen.get("concurrency") is not None:
        phase.update(type="concurrency", concurrency=loadgen["concurrency"])
    if loadgen.get("request_rate") is not None:
        phase.update(type="request_rate", rate=loadgen["request_rate"])
    prompt = (config.get("input") or {}).get("prompt") or {}
    lengths = {
        ours: {"mean": (prompt.get(theirs) or {}).get("mean")}
        for ours, theirs in (("isl", "input_tokens"), ("osl", "output_tokens"))
    }
    out["input_config"] = {
        "models": {"items": [{"name": n} for n in endpoint.get("model_names") or []]},
        "endpoint": {"type": endpoint.get("type")},
        "phases": [phase],
        "datasets": [{"prompts": lengths}],
    }
    return out


_NUMBERED = re.compile(r"[A-Za-z_-]*?(\d+(?:\.\d+)?)")


def _is_step(name: str, values: tuple[float | None, ...]) -> bool:
    """A sweep-step folder: aiperf's own `concurrency_N` / `request_rate_N`, or a name that
    is a prefix and the run's own concurrency or rate (`c16`, `conc_16`, `rate-2.5`)."""
    if _STEP.fullmatch(name):
        return True
    match = _NUMBERED.fullmatch(name)
    return match is not None and float(match.group(1)) in [v for v in values if v is not None]


def artifact_dir(path: Path, values: tuple[float | None, ...] = ()) -> Path:
    """The artifact directory of an export: the folder holding it, above any step folders
    (whose names are the run's concurrency or rate, `values`)."""
    folder = path.parent
    while _is_step(folder.name, values) and folder.parent != folder:
        folder = folder.parent
    return folder


def arm_of(path: Path, values: tuple[float | None, ...] = ()) -> str:
    """The artifact directory's name (see `artifact_dir`)."""
    return arm_name(artifact_dir(path, values).name or path.stem)


def _named(run: Run) -> Path:
    """A run's artifact directory as its arm's place: `x.run2` (a later run of `x`, as the
    report's settle command names it) stands where `x` does."""
    here = Path(str(run.record.fields["artifact_dir"]))
    return here.with_name(arm_name(here.name)) if here.name else here


def name_arms(runs: list[Run]) -> list[Run]:
    """Exports from different artifact directories that share a name (`5090/agent` and
    `h200/agent`) are different arms: name each by its path below their common folder, so
    runs of two setups never become repeats of one."""
    dirs: dict[str, set[Path]] = {}
    for r in runs:
        if r.format == "aiperf" and r.record.tag is not None:
            dirs.setdefault(r.record.tag, set()).add(_named(r))
    out = []
    for r in runs:
        tag = r.record.tag
        if r.format == "aiperf" and tag is not None and len(dirs[tag]) > 1:
            group = sorted(dirs[tag])
            common = Path(os.path.commonpath([str(d) for d in group]))
            here = _named(r)
            name = here.relative_to(common).as_posix() if here != common else here.name
            r = replace(r, record=r.record.model_copy(update={"tag": name}))
        out.append(r)
    return out


def _scalar(data: dict[str, Any], key: str, unit: str, where: str) -> float:
    entry = data.get(key)
    value = finite(entry.get("avg")) if isinstance(entry, dict) else None
    if value is None or not isinstance(entry, dict):
        raise InputError(f"{where}: no number in {key!r}.avg; {_HINT}")
    if entry.get("unit") != unit:
        raise InputError(_unit_error(data, where, key, entry.get("unit"), unit))
    return value


def _unit_error(data: dict[str, Any], where: str, key: str, found: Any, unit: str) -> str:
    version = data.get("aiperf_version") or "of unrecorded version"
    return (
        f"{where}: {key!r} is in {found!r}, not {unit!r} as aiperf 0.1 to 0.13 write it; this "
        f"export (aiperf {version}) is of a layout ingest does not read yet: export the run "
        "with aiperf 0.13, or leave the file out"
    )


def _profiling_phase(config: dict[str, Any]) -> dict[str, Any]:
    """The measured phase: `kind: profiling` (0.13), or `name: profiling` (earlier)."""
    phases = config.get("phases") or []
    for phase in phases:
        if isinstance(phase, dict) and "profiling" in (phase.get("kind"), phase.get("name")):
            return phase
    return {}


def _total(
    data: dict[str, Any], key: str, per_request: str, completed: int, where: str
) -> tuple[int, str | None]:
    """A token total: `total_isl`/`total_osl` where written, else the per-request average
    times the request count (how the average was made); the second value says so."""
    if isinstance(data.get(key), dict):
        return count(_scalar(data, key, "tokens", where), key, where), None
    if not isinstance(data.get(per_request), dict):
        raise InputError(
            f"{where}: neither {key!r} nor {per_request!r}; {_HINT} (aiperf 0.8 and later "
            "write one of them)"
        )
    avg = _scalar(data, per_request, "tokens", where)
    how = f"{per_request}.avg × request_count (this aiperf version wrote no {key})"
    return count(avg * completed, f"{per_request}.avg × request_count", where), how


@dataclass(frozen=True)
class _Counts:
    """What the profiling phase counted: its duration, requests and tokens."""

    duration: float
    completed: int
    failed: int
    total_in: int
    total_out: int
    #: total_input_tokens / total_output_tokens -> how it was computed, where it was
    derived: dict[str, str]


def _counts(data: dict[str, Any], where: str) -> _Counts:
    duration = _scalar(data, "benchmark_duration", "sec", where)
    if duration <= 0:
        raise InputError(f"{where}: 'benchmark_duration' is {duration!r}; rerun aiperf")
    completed = count(_scalar(data, "request_count", "requests", where), "request_count", where)
    errors = data.get("error_request_count")
    failed_value = finite(errors.get("avg")) if isinstance(errors, dict) else None
    failed = count(failed_value or 0.0, "error_request_count", where)
    total_in, in_how = _total(data, "total_isl", "input_sequence_length", completed, where)
    total_out, out_how = _total(data, "total_osl", "output_sequence_length", completed, where)
    derived = {
        name: how
        for name, how in (("total_input_tokens", in_how), ("total_output_tokens", out_how))
        if how is not None
    }
    return _Counts(duration, completed, failed, total_in, total_out, derived)


def _metrics(
    data: dict[str, Any], counts: _Counts, where: str
) -> tuple[dict[str, float | None], dict[str, str], dict[str, str]]:
    """bench_serving's metrics from the export: throughputs from the totals over
    benchmark_duration, the latency statistics where their definitions agree. Returns the
    values, how each computed one was derived, and why a metric was left out."""
    c = counts
    values = totals_over(c.duration, c.completed, c.failed, c.total_in, c.total_out)
    left_out: dict[str, str] = {}
    for ours, (theirs, unit) in _LATENCIES.items():
        entry = data.get(theirs)
        if not isinstance(entry, dict):
            continue
        if entry.get("unit") != unit:
            raise InputError(_unit_error(data, where, theirs, entry.get("unit"), unit))
        if c.failed and ours != "itl":
            left_out[ours] = f"aiperf's {theirs} statistics include failed requests: left out"
            continue
        for stat, key in _STATS.items():
            values[f"{stat}_{ours}_ms"] = finite(entry.get(key))
    derived = {**DERIVED, **c.derived}
    mean_e2e = values.get("mean_e2e_latency_ms")
    if mean_e2e is not None:
        values["concurrency"] = mean_e2e / 1000 * c.completed / c.duration
    else:
        derived.pop("concurrency")
    return values, derived, left_out


def _record(
    p: Path, data: dict[str, Any], values: dict[str, float | None], counts: _Counts
) -> BenchServingRecord:
    """The bench_serving-shaped record: what was asked (input_config: the profiling phase's
    concurrency or rate, the dataset and its length means) beside what was measured."""
    where = str(p)
    config = data.get("input_config") or {}
    phase = _profiling_phase(config)
    concurrency = phase.get("concurrency")
    rate = finite(phase.get("rate"))
    datasets = config.get("datasets") or [{}]
    prompts = (datasets[0] or {}).get("prompts") or {}

    def mean_len(key: str) -> int | None:
        v = finite((prompts.get(key) or {}).get("mean"))
        return int(v) if v is not None and v.is_integer() else None

    steps = (finite(concurrency), rate)
    completed = counts.completed
    return BenchServingRecord(
        source=where,
        line=1,
        tag=arm_of(p, steps),
        backend=str((config.get("endpoint") or {}).get("type") or "") or None,
        dataset_name=str(datasets[0].get("type")) if datasets[0].get("type") else None,
        request_rate=rate if rate is not None else math.inf,
        max_concurrency=int(concurrency) if isinstance(concurrency, int) else None,
        random_input_len=mean_len("isl"),
        random_output_len=mean_len("osl"),
        server_info={},
        metrics=make_metrics(values, where),
        fields={
            "phase": phase.get("type"),
            "artifact_dir": str(artifact_dir(p, steps)),
            "mean_input_len": counts.total_in / completed if completed else None,
            "mean_output_len": counts.total_out / completed if completed else None,
        },
    )


def _identity(data: dict[str, Any]) -> dict[str, str]:
    """What runs must agree on to be compared: the aiperf version and the model."""
    version = data.get("aiperf_version")
    models = ((data.get("input_config") or {}).get("models") or {}).get("items") or []
    model = models[0].get("name") if models and isinstance(models[0], dict) else None
    identity = {"client version": f"aiperf {version}"} if version else {}
    if isinstance(model, str) and model:
        identity["model"] = model
    return identity


def read_file(path: str | Path) -> list[Run]:
    """The one run of an aiperf summary export."""
    p = Path(path)
    where = str(p)
    data = load_json(p, _HINT)
    if not is_aiperf(data):
        raise InputError(f"{where}: no 'aiperf_version' and 'benchmark_duration'; {_HINT}")
    early = "aiperf_version" not in data
    data = _normalised(data)
    counts = _counts(data, where)
    values, derived, left_out = _metrics(data, counts, where)
    version = data.get("aiperf_version")
    tool = (
        f"aiperf {version}"
        if version
        else (EARLY_TOOL if early else "aiperf (version not recorded)")
    )
    run = Run(
        record=_record(p, data, values, counts),
        format="aiperf",
        tool=tool,
        definitions={**DEFINITIONS, **left_out},
        derived=derived,
        identity=_identity(data),
    )
    return [run]


def exports(path: Path) -> list[Path]:
    """The summary exports under an artifact directory (aggregates are not runs)."""
    return sorted(p for p in path.rglob(EXPORT) if "aggregate" not in p.parent.name)

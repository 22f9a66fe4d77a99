"""`vllm bench serve --save-result` JSON: one object per file, one run per object.

Facts from vLLM's `benchmarks/serve.py` (0.33) and files it wrote against the simulator: the
aggregate metrics are under bench_serving's names (`duration`, `completed`, `failed`,
`total_input_tokens`, `output_throughput`, `mean_ttft_ms`, ...); end-to-end latency is `e2el`
(`mean_e2el_ms`), written only when `--percentile-metrics` names it; percentiles are those of
`--metric-percentiles` (default 99 only); `request_rate` is the string "inf" when unlimited;
`label` is `--label` or null. There is no input throughput, no concurrency statistic, no
dataset name or lengths and no vLLM version. TPOT is bench_serving's, (e2e − TTFT) / (output
tokens − 1) per request; ITL is one gap per streamed chunk, whatever the chunk holds.
`docs/ingest.md` has the field-by-field table.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.core.metrics import Metrics
from matrixrun.ingest.formats import vllm_legacy
from matrixrun.ingest.formats.run import Run, count, finite, make_metrics, require_number
from matrixrun.ingest.records import arm_name
from matrixrun.load.bench_serving import BenchServingRecord

__all__ = ["DEFINITIONS", "is_vllm", "parse_result", "read_file"]

TOOL = "vllm bench serve"
_HINT = "is this a file written by `vllm bench serve --save-result`?"
_FAMILIES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e_latency"}
_STATS = ("mean", "median", "std", "p90", "p95", "p99")
#: Per-request lists (with --save-detailed) and fields kept only as context.
_SKIP = {"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times",
         "generated_texts", "errors"}  # fmt: skip
#: Metric families vLLM defines differently from bench_serving (see the module docstring).
DEFINITIONS = {
    "itl": "vLLM counts one inter-token gap per streamed chunk; bench_serving splits a chunk "
    "of k tokens into k gaps of gap/k (the two agree only when every chunk holds one token)",
}
#: The client version a file's layout shows (is it the v0.8 layout?), for the identity check.
LAYOUTS = {
    True: "benchmark_serving.py, v0.8 layout",
    False: "vllm bench serve layout (version not recorded)",
}
UNRECORDED = "the file has neither a 'failed' count nor the per-request 'errors' list"
DERIVED = {
    "input_throughput": "total_input_tokens / duration (vLLM writes no input throughput)",
    "concurrency": "mean_e2el_ms × completed / duration, i.e. bench_serving's sum of "
    "end-to-end latencies over the duration (only where e2el was written)",
}


#: Keys of the run's setup that vLLM's --save-result writes and sglang.bench_serving never
#: does (its lines have neither, checked against 0.5.23's `benchmark/serving.py`).
MARKERS = frozenset(("model_id", "tokenizer_id", "request_goodput:", "request_goodput"))


def is_vllm(data: Any) -> bool:
    """A `--save-result` object: vLLM's throughput names, none of bench_serving's; or,
    with a throughput renamed or missing, vLLM's own setup keys beside a `duration` (read
    as vLLM's, so the missing field is named, never guessed as another client's line)."""
    if not isinstance(data, dict) or "input_throughput" in data:
        return False
    if "total_token_throughput" in data and "output_throughput" in data:
        return True
    return "duration" in data and not MARKERS.isdisjoint(data)


def _int_or_none(value: Any) -> int | None:
    number = finite(value)
    return int(number) if number is not None and number.is_integer() else None


def parse_result(data: Any, *, source: str, format: str = "vllm") -> Run:
    """One `--save-result` object → Run (a sweep's reader then sets its arm and launch)."""
    where = source
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object, found {type(data).__name__}; {_HINT}")
    values, unrecorded = _counts(data, where)
    derived = {"input_throughput": DERIVED["input_throughput"]}
    mean_e2e = values.get("mean_e2e_latency_ms")
    if mean_e2e is not None:
        values["concurrency"] = mean_e2e / 1000 * values["completed"] / values["duration"]
        derived["concurrency"] = DERIVED["concurrency"]
    record = _record(data, values, make_metrics(values, where), source)
    identity = {}
    model = data.get("model_id")
    if isinstance(model, str) and model:
        identity["model"] = model
    old = "request_goodput:" in data
    # vLLM writes no version, but its layout tells the v0.8 script from later clients: files
    # of the two are refused as one comparison unless --allow-difference client-version
    identity["client version"] = LAYOUTS[old]
    return Run(
        record=record,
        format="vllm_sweep" if format == "vllm_sweep" else "vllm",
        tool=vllm_legacy.OLD_TOOL if old else TOOL + " (vLLM version not recorded in the file)",
        definitions=dict(DEFINITIONS),
        derived=derived,
        identity=identity,
        spec_decode=_spec_decode(data),
        failures_unrecorded=unrecorded,
    )


def _counts(data: dict[str, Any], where: str) -> tuple[dict[str, Any], str | None]:
    """The file's counts, throughputs and latency families as bench_serving names them, and
    the caveat when it records no failures (said before the verdict, never a quiet "0
    failed"). A file that completed nothing is refused here."""
    todo = _HINT
    duration = require_number(data, "duration", where, todo)
    if duration <= 0:
        raise InputError(f"{where}: 'duration' is {duration!r}; fix or leave out the file")
    values: dict[str, Any] = {"duration": duration}
    for key in ("completed", "total_input_tokens", "total_output_tokens"):
        values[key] = count(require_number(data, key, where, todo), key, where)
    failed = finite(data.get("failed"))
    from_errors = vllm_legacy.failed_from_errors(data, where)
    unrecorded = None
    if failed is not None:
        values["failed"] = count(failed, "failed", where)
    elif from_errors is not None:
        values["failed"] = from_errors
    else:
        values["failed"] = 0
        unrecorded = UNRECORDED
    if values["completed"] == 0:
        _refuse_nothing_completed(values["failed"], data, where)
    values["request_throughput"] = require_number(data, "request_throughput", where, todo)
    values["output_throughput"] = require_number(data, "output_throughput", where, todo)
    values["total_throughput"] = require_number(data, "total_token_throughput", where, todo)
    values["input_throughput"] = values["total_input_tokens"] / duration
    for theirs, ours in _FAMILIES.items():
        for stat in _STATS:
            values[f"{stat}_{ours}_ms"] = finite(data.get(f"{stat}_{theirs}_ms"))
    return values, unrecorded


def _record(
    data: dict[str, Any], values: dict[str, Any], metrics: Metrics, source: str
) -> BenchServingRecord:
    """The file as one bench_serving line: what was asked, and the fields no metric holds."""
    rate = data.get("request_rate")
    request_rate: float | str | None = vllm_legacy.rate_of(rate)
    if request_rate is None and isinstance(rate, str):
        request_rate = rate
    label = data.get("label")
    known = {"label", "backend", "request_rate", "max_concurrency", *_SKIP, *values,
             "total_token_throughput"}  # fmt: skip
    known |= {f"{s}_{f}_ms" for f in _FAMILIES for s in _STATS}
    fields = {k: v for k, v in data.items() if k not in known and not isinstance(v, list)}
    if values["completed"]:
        fields["mean_input_len"] = values["total_input_tokens"] / values["completed"]
        fields["mean_output_len"] = values["total_output_tokens"] / values["completed"]
    return BenchServingRecord(
        source=source,
        line=1,
        tag=str(label) if label not in (None, "") else None,
        backend=str(data.get("backend") or data.get("endpoint_type") or "") or None,
        dataset_name=data["dataset_name"] if isinstance(data.get("dataset_name"), str) else None,
        request_rate=request_rate,
        max_concurrency=_int_or_none(data.get("max_concurrency")),
        random_input_len=_int_or_none(data.get("random_input_len")),
        random_output_len=_int_or_none(data.get("random_output_len")),
        random_range_ratio=finite(data.get("random_range_ratio")),
        server_info={},
        metrics=metrics,
        fields=fields,
    )


def _refuse_nothing_completed(failed: int, data: dict[str, Any], where: str) -> None:
    """A file with no completed request is no measurement: refused in its own words, as the
    v0.8 layout (`vllm_legacy.failed_from_errors`), vLLM's nightly table, inference-perf and
    llmperf refuse theirs. It was kept as a failed measurement, which ingest's comparison
    then counted against its arm: a verdict from a run that measured nothing of the server."""
    errors = data.get("errors")
    listed = errors if isinstance(errors, list) else []
    said = next((e.strip() for e in listed if isinstance(e, str) and e.strip()), None)
    first = f", the first error: {said[:120]!r}" if said else ""
    what = "every request failed" if failed else "no request completed"
    raise InputError(
        f"{where}: {what} (completed 0, failed {failed}{first}): there is no measurement to "
        "compare; fix the server or the client and rerun, or leave the file out"
    )


def _spec_decode(data: dict[str, Any]) -> str | None:
    """Whether the run was served with speculative decoding: vLLM writes `spec_decode_*`
    statistics (acceptance rate and length, drafted and accepted tokens) only then."""
    for key in ("spec_decode_acceptance_length", "spec_decode_acceptance_rate"):
        value = finite(data.get(key))
        if value is not None:
            return f"{key} {value:.3g}"
    keys = sorted(k for k, v in data.items() if k.startswith("spec_decode") and v is not None)
    return f"{keys[0]} written" if keys else None


def load_json(path: Path, hint: str = _HINT) -> Any:
    """A whole file as JSON, or an InputError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: cannot read it ({err.strerror}); check the path") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; {hint}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(
            f"{path}: not valid JSON ({err.msg} at line {err.lineno}); {hint}"
        ) from None


def read_file(path: str | Path) -> list[Run]:
    """The one run of a `--save-result` file."""
    p = Path(path)
    data = load_json(p)
    if isinstance(data, dict) and "input_throughput" in data:
        raise InputError(
            f"{p}: has 'input_throughput', so it looks like sglang.bench_serving output, not "
            "vLLM's; pass --format bench_serving, or leave --format out to detect it"
        )
    run = parse_result(data, source=str(p))
    side = vllm_legacy.sidecar(p)
    record = run.record
    if record.tag is None:
        # Unlabelled: the file name, less a trailing segment naming the run's own point.
        rate = record.request_rate if isinstance(record.request_rate, float) else None
        tag = vllm_legacy.arm_stem(arm_name(p.stem), rate, record.max_concurrency)
        record = record.model_copy(
            update={"tag": tag, "fields": {**record.fields, "arm_from": "file name"}}
        )
    if side.get("dataset") and record.dataset_name is None:
        record = record.model_copy(update={"dataset_name": side["dataset"]})
    return [replace(run, record=record, identity={**run.identity, **side})]

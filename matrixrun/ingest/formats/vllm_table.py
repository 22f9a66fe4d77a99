"""vLLM's nightly-benchmark table (`benchmark_results.json`): a list of rows with display-name
keys, one row per `benchmark_serving.py --save-result` run.

Facts from vLLM's `.buildkite/nightly-benchmarks/scripts/convert-results-json-to-markdown.py`
(its `serving_column_mapping`) and two tables in the wild corpus (surajssd/llm-k8s, v0.8.3):
each row copies fields of one result file under display names: `test_name` → "Test name",
`gpu_type` → "GPU", `completed` → "# of req.", `request_throughput` → "Tput (req/s)",
`output_throughput` → "Output Tput (tok/s)", `total_token_throughput` → "Total Tput (tok/s)",
`{mean,median,p99}_{ttft,tpot,itl}_ms` → "Mean TTFT (ms)", "Median TPOT (ms)", "P99 ITL (ms)"
(the corpus's rows equal its result files' fields to the last digit). The runner names each
test `<setup>_qps_<rate>`, so the name gives the arm and the request rate.

What the table lacks is computed where bench_serving's definitions allow it and said so:
`duration` = completed / request throughput (vLLM's request throughput is completed /
duration), the output tokens = output throughput × duration and the input tokens = (total −
output throughput) × duration. It has no failure count (absent rows of failed requests are
not counted: `failed` is recorded as 0, and the summary and the report say it was not
recorded), no model, no std, p90 or p95 and no e2e latency.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run, count, finite, make_metrics
from matrixrun.ingest.formats.vllm import DEFINITIONS, load_json
from matrixrun.load.bench_serving import BenchServingRecord

__all__ = ["is_vllm_table", "read_file"]

TOOL = (
    "vllm nightly-benchmark table (convert-results-json-to-markdown.py; vLLM version not "
    "recorded in the file)"
)
_HINT = "is this vLLM's nightly benchmark_results.json?"
UNRECORDED = "the table lists completed requests only ('# of req.'), not failed ones"
_NAME = re.compile(r"^(?P<arm>.+?)_qps_(?P<rate>inf|[0-9]+(?:\.[0-9]+)?)$")
_COLUMNS = {
    "request_throughput": "Tput (req/s)",
    "output_throughput": "Output Tput (tok/s)",
    "total_throughput": "Total Tput (tok/s)",
}
_STATS = {"mean": "Mean", "median": "Median", "p99": "P99"}
_FAMILIES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL"}
DERIVED = {
    "duration": "'# of req.' / 'Tput (req/s)' (the table records no duration)",
    "total_output_tokens": "'Output Tput (tok/s)' × duration",
    "total_input_tokens": "('Total Tput (tok/s)' − 'Output Tput (tok/s)') × duration",
    "input_throughput": "total_input_tokens / duration",
}


def is_vllm_table(data: Any) -> bool:
    """A list of rows with the nightly table's serving columns."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(r, dict) and "Test name" in r and "Tput (req/s)" in r for r in data)
    )


def _number(row: dict[str, Any], key: str, where: str) -> float:
    value = finite(row.get(key))
    if value is None:
        raise InputError(f"{where}: {key!r} is {row.get(key)!r}, not a number; {_HINT}")
    return value


def _row(row: dict[str, Any], where: str, source: str, line: int) -> Run:
    """One row → Run: the arm and the rate from its test name, the counts computed."""
    name = str(row.get("Test name"))
    match = _NAME.fullmatch(name)
    if match is None:
        raise InputError(
            f"{where}: test name {name!r} does not end in _qps_<rate> as the nightly runner "
            "names its tests, so its request rate is unknown; ingest the result files "
            "instead (benchmark_serving.py --save-result)"
        )
    completed = count(_number(row, "# of req.", where), "# of req.", where)
    if completed == 0:
        raise InputError(f"{where}: '# of req.' is 0: no request completed; leave it out")
    rps = _number(row, "Tput (req/s)", where)
    duration = completed / rps
    out_tps = _number(row, "Output Tput (tok/s)", where)
    total_tps = _number(row, "Total Tput (tok/s)", where)
    total_out = count(out_tps * duration, "Output Tput (tok/s) × duration", where)
    total_in = count((total_tps - out_tps) * duration, "input tokens", where)
    values: dict[str, Any] = {
        "duration": duration,
        "completed": completed,
        "failed": 0,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": rps,
        "output_throughput": out_tps,
        "total_throughput": total_tps,
        "input_throughput": total_in / duration,
    }
    for fam, shown in _FAMILIES.items():
        for stat, word in _STATS.items():
            values[f"{stat}_{fam}_ms"] = finite(row.get(f"{word} {shown} (ms)"))
    text = match.group("rate")
    rate = math.inf if text == "inf" else float(text)
    record = BenchServingRecord(
        source=source,
        line=line,
        tag=match.group("arm"),
        backend=None,
        dataset_name=None,
        request_rate=rate,
        max_concurrency=None,
        random_input_len=None,
        random_output_len=None,
        random_range_ratio=None,
        server_info={},
        metrics=make_metrics(values, where),
        fields={
            "test_name": name,
            "mean_input_len": total_in / completed,
            "mean_output_len": total_out / completed,
        },
    )
    gpu = row.get("GPU")
    identity = {"gpu": gpu.strip()} if isinstance(gpu, str) and gpu.strip() else {}
    return Run(
        record=record,
        format="vllm_table",
        tool=TOOL,
        definitions=dict(DEFINITIONS),
        derived=dict(DERIVED),
        identity=identity,
        failures_unrecorded=UNRECORDED,
    )


def read_file(path: str | Path) -> list[Run]:
    """Every row of a nightly table, in the order written."""
    p = Path(path)
    data = load_json(p, _HINT)
    if not is_vllm_table(data):
        raise InputError(f"{p}: not a list of rows with 'Test name' and 'Tput (req/s)'; {_HINT}")
    return [_row(row, f"{p} row {i + 1} ({row.get('Test name')})", str(p), i + 1)
            for i, row in enumerate(data)]  # fmt: skip

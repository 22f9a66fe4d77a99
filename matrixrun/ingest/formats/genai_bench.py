"""genai-bench's run files (`<experiment>/<scenario>_<task>_num_concurrency_N_time_Ts.json`):
recognised, and refused, because their throughputs are not bench_serving's.

Facts from genai-bench 0.0.5 (`metrics/aggregated_metrics_collector.py`,
`metrics/request_metrics_collector.py`, `cli/utils.py`) and files it wrote against the
simulator. A run file holds `aggregated_metrics` (`num_concurrency`, `run_duration`,
`mean_output_throughput_tokens_per_s`, `requests_per_second`, `num_completed_requests`,
`num_error_requests`, and `stats.{ttft,tpot,e2e_latency,...}` with `mean`, `stddev`, `p25`
... `p99` over successful requests), `individual_request_metrics` and `_time_unit`.

Its latencies would map: TTFT; `tpot` = (e2e − TTFT) / (output tokens − 1) per request, which
is bench_serving's TPOT; e2e latency. Its throughputs do not: every one is a total divided by
`run_duration`, which is the run's wall time from the start of its load generator to its stop,
and the run is stopped by a loop that checks once a second (`manage_run_time` sleeps 1 s per
turn). So `run_duration` is the time to the first whole second after the last response, plus
start-up: 2.006 s for a run whose requests took ~1.4 s in the golden files. A throughput over
that window is not bench_serving's (tokens over first request to last response), and between
two arms it hides any difference that does not cross a whole second. matrixrun's verdict
compares a throughput first, and a run without a usable one cannot be measured against one
that has it, so ingest refuses these files and says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import finite
from matrixrun.ingest.formats.vllm import load_json

__all__ = ["is_experiment_metadata", "is_genai_bench", "is_genai_bench_dir", "refuse"]


def is_genai_bench(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("aggregated_metrics"), dict)
        and "individual_request_metrics" in data
    )


def is_experiment_metadata(data: Any) -> bool:
    """An experiment folder's `experiment_metadata.json` (the command, `benchmark_version`,
    the model and traffic scenarios), given on its own instead of the folder."""
    return isinstance(data, dict) and "benchmark_version" in data and "traffic_scenario" in data


def _version(path: Path) -> str:
    """genai-bench's version as the experiment recorded it (`benchmark_version`)."""
    meta = (path if path.is_dir() else path.parent) / "experiment_metadata.json"
    if not meta.is_file():
        return "genai-bench (version not recorded)"
    try:
        data = load_json(meta, "is this a genai-bench experiment_metadata.json?")
    except InputError:
        return "genai-bench (version not recorded)"
    version = data.get("benchmark_version") if isinstance(data, dict) else None
    return f"genai-bench {version}" if version else "genai-bench (version not recorded)"


def is_genai_bench_dir(path: Path) -> bool:
    meta = path / "experiment_metadata.json"
    return path.is_dir() and meta.is_file() and "benchmark_version" in meta.read_text()


def _run_files(folder: Path) -> list[Path]:
    """The run files of an experiment folder, by content (`aggregated_metrics`)."""
    found = []
    for f in sorted(folder.glob("*.json")):
        if f.name == "experiment_metadata.json":
            continue
        try:
            data = load_json(f, "is this a genai-bench run file?")
        except InputError:
            continue
        if is_genai_bench(data):
            found.append(f)
    return found


def refuse(path: str | Path) -> InputError:
    """The one-sentence refusal for a genai-bench file or experiment folder."""
    p = Path(path)
    duration = ""
    folder = p if p.is_dir() else p.parent
    files = [p] if p.is_file() and p.name != "experiment_metadata.json" else _run_files(folder)
    if not files:
        return InputError(
            f"{p}: {_version(p)} experiment metadata with no result file in its folder "
            f"{folder.name}/ (no JSON there holds aggregated_metrics): the run recorded no "
            "measurement; rerun it, or leave the folder out"
        )
    if files:
        data = load_json(files[0], "is this a genai-bench run file?")
        agg = data.get("aggregated_metrics") if isinstance(data, dict) else None
        value = finite(agg.get("run_duration")) if isinstance(agg, dict) else None
        if value is not None:
            duration = f" ({value:.3f} s in {files[0].name})"
    return InputError(
        f"{p}: {_version(p)} output; its throughputs divide by run_duration{duration}, the "
        "run's wall time from starting its load to stopping it (genai-bench 0.0.5 stops on a "
        "once-a-second check, up to a second after the last response), and the file records "
        "no request timestamps to check that window against the requests' own span, so they "
        "are not bench_serving's throughputs; ingest cannot compare arms on them: rerun the "
        "comparison with vllm bench serve, aiperf, guidellm or sglang.bench_serving "
        "(docs/ingest.md explains the mapping)"
    )

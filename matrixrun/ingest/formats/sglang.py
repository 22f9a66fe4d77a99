"""sglang.bench_serving's own lines as ingest reads them (`load/bench_serving.py` parses
them): which parsed JSON is such a line, and a line as a `Run` with what its version computed,
the model it ran against and whether the server decoded speculatively."""

from __future__ import annotations

from typing import Any

from matrixrun.ingest.formats import vllm
from matrixrun.ingest.formats.run import Run
from matrixrun.load import bench_serving

__all__ = ["is_line", "run_of"]


#: Fields every sglang.bench_serving line has, from the late-2024 versions on.
_BENCH_SERVING_CORE = frozenset(
    ("backend", "duration", "completed", "total_input_tokens", "total_output_tokens",
     "output_throughput")
)  # fmt: skip


def is_line(data: dict[str, Any]) -> bool:
    """An sglang.bench_serving line: its own throughput names (`input_throughput`, or the
    retokenized count every version writes), or, for the oldest lines that have neither,
    its core fields without vLLM's `total_token_throughput` or setup keys (`model_id`, ...)."""
    if "input_throughput" in data or "total_output_tokens_retokenized" in data:
        return True
    return (
        data.keys() >= _BENCH_SERVING_CORE
        and "total_token_throughput" not in data
        and vllm.MARKERS.isdisjoint(data)
    )


def _bench_serving_tool(record: bench_serving.BenchServingRecord) -> str:
    version = record.server_info.get("version")
    server = f" against {version}" if version else ""
    name = "sglang multi-turn replay" if "total_turns" in record.fields else "sglang.bench_serving"
    return f"{name}{server}"


_BENCH_SERVING_DERIVED = {
    "request_throughput": "completed / duration (this bench_serving version wrote no "
    "request_throughput)",
    "input_throughput": "total_input_tokens / duration (this bench_serving version wrote no "
    "input_throughput)",
    "total_throughput": "input_throughput + output_throughput (this bench_serving version "
    "wrote no total_throughput)",
}


def run_of(record: bench_serving.BenchServingRecord) -> Run:
    """A bench_serving line as a Run: what was computed, the model it ran against and
    whether the server decoded speculatively (a positive `accept_length`, or a
    speculative algorithm in `server_info`)."""
    identity: dict[str, str] = {}
    info = record.server_info
    model = info.get("model_path") or record.fields.get("model_id") or record.fields.get("model")
    if isinstance(model, str) and model:
        identity["model"] = model
    spec: str | None = None
    accept = record.fields.get("accept_length")
    if isinstance(accept, int | float) and not isinstance(accept, bool) and accept > 0:
        spec = f"accept_length {accept:.3g}"
    elif info.get("speculative_algorithm"):
        spec = f"speculative_algorithm {info['speculative_algorithm']}"
    return Run(
        record=record,
        format="bench_serving",
        tool=_bench_serving_tool(record),
        derived={m: _BENCH_SERVING_DERIVED[m] for m in record.computed},
        identity=identity,
        spec_decode=spec,
    )

"""Load clients: the built-in streaming client that measures any SGLang-native or
OpenAI-compatible server (`run_load`), and the `bench-client` command that runs it alone.

Modules: `prompts` (seeded token-id prompts and arrivals), `apis` (request bodies and stream
parsing), `transport` (HTTP), `client` (the async runner), `multi` (one cell over several
client processes), `selfcheck` (is the client itself the bottleneck?), `records` (per-request
records and their JSONL form), `aggregate` (records → `Metrics`, bench_serving's definitions),
`command`.
"""

from __future__ import annotations

from matrixrun.load.aggregate import compute_metrics
from matrixrun.load.client import LoadConfig, LoadResult
from matrixrun.load.multi import run_load, run_load_sync
from matrixrun.load.records import RequestRecord, read_jsonl, write_jsonl

__all__ = [
    "LoadConfig",
    "LoadResult",
    "RequestRecord",
    "compute_metrics",
    "read_jsonl",
    "run_load",
    "run_load_sync",
    "write_jsonl",
]

"""Per-request records: what the client saw of each measured request, as plain data.

One `RequestRecord` per measured request (warmup requests are not recorded). The client builds
them from plain lists after the stream ends (nothing is validated per chunk); `aggregate.py` turns a
list of them into `Metrics`; the run directory keeps them as JSONL under `requests/` so a report
can recompute any percentile later without re-running.

Times are seconds. `start` is relative to the benchmark start (the moment the first measured
request became due); every other time is relative to the request's own start, which is when
it was sent (after waiting for a concurrency slot, as in bench_serving).

JSONL line (compact keys, times rounded to the microsecond)::

    {"i":0,"start":0.0,"ttft":0.0512,"e2e":1.3131,"t":[0.0512,0.0713,...],"n":[1,1,...],
     "in":128,"out":64,"err":""}

`c` (present only when the server reported it) is the prompt tokens its prefix cache held.
`t`/`n` are the arrival time and token count of every chunk that carried tokens (a chunk of
k tokens arrives once, with n=k); `t[0] == ttft`. `err` is "" for a successful request and one
line of text otherwise; a failed request keeps what arrived before the failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_ROUND = 6  # microseconds: far below any latency we report, keeps lines short


class RequestRecord(BaseModel):
    """One measured request. `ok` is derived: a request succeeded iff `error` is empty."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    index: int = Field(alias="i")
    start: float
    ttft: float | None = None
    e2e: float
    chunk_times: list[float] = Field(default_factory=list, alias="t")
    chunk_tokens: list[int] = Field(default_factory=list, alias="n")
    prompt_tokens: int = Field(alias="in")
    output_tokens: int = Field(0, alias="out")
    error: str = Field("", alias="err")
    #: Prompt tokens the server found in its prefix cache (None: it did not say).
    cached_tokens: int | None = Field(None, alias="c")

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def end(self) -> float:
        """When the request finished (or failed), relative to the benchmark start."""
        return self.start + self.e2e


def _line(record: RequestRecord) -> str:
    data: dict[str, Any] = {
        "i": record.index,
        "start": round(record.start, _ROUND),
        "ttft": None if record.ttft is None else round(record.ttft, _ROUND),
        "e2e": round(record.e2e, _ROUND),
        "t": [round(t, _ROUND) for t in record.chunk_times],
        "n": record.chunk_tokens,
        "in": record.prompt_tokens,
        "out": record.output_tokens,
        "err": record.error,
    }
    if record.cached_tokens is not None:  # only where the server reports it
        data["c"] = record.cached_tokens
    return json.dumps(data, separators=(",", ":"))


def dumps_jsonl(records: Iterable[RequestRecord]) -> str:
    """Records as JSONL text, one compact line each."""
    return "".join(_line(r) + "\n" for r in records)


def loads_jsonl(text: str) -> list[RequestRecord]:
    """Parse JSONL text written by `dumps_jsonl` (blank lines ignored)."""
    return list(_parse(text.splitlines()))


def _parse(lines: Iterable[str]) -> Iterator[RequestRecord]:
    for line in lines:
        if line.strip():
            yield RequestRecord.model_validate_json(line)


def write_jsonl(path: Path, records: Iterable[RequestRecord]) -> None:
    """Write records to `path` (replacing it), flushed before returning."""
    with path.open("w", encoding="utf-8") as f:
        f.write(dumps_jsonl(records))
        f.flush()


def read_jsonl(path: Path) -> list[RequestRecord]:
    """Read records written by `write_jsonl`."""
    with path.open(encoding="utf-8") as f:
        return list(_parse(f))

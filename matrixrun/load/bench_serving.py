"""Parse `python -m sglang.bench_serving --output-file` JSONL into `BenchServingRecord`s.

bench_serving appends one JSON object per run: its arguments (tag, backend, dataset, request
rate, max concurrency, random lengths), `server_info` as the server reported it, the aggregate
metrics under the names our `Metrics` uses, and with `--output-details` per-request lists
(`input_lens`, `output_lens`, `ttfts`, `itls`, `generated_texts`, `errors`). It is not strict
JSON: `"request_rate": Infinity` is normal, and NaN appears where a statistic is undefined;
Python's json reads both. bench_serving writes no count of failed requests: `completed` counts
successes only, so `failed` is the number of non-empty `errors` when the per-request lists are
there, and 0 otherwise (a file without details cannot show failures).

Older bench_serving versions (late 2024) wrote fewer fields: no `request_throughput` or
`input_throughput` (and no TPOT statistics or p99s). Those throughputs are, by bench_serving's
own definition, `completed / duration` and `total_input_tokens / duration`, so they are
computed from the counts and the duration the line does hold; the record lists what was
computed (`computed`) so the summary can say so.

Used by `matrixrun.ingest.records` (files → measurements) and by the bench_serving client adapter.
A bad line raises `InputError("FILE:LINE: what is wrong, what to do")`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from matrixrun.core.errors import InputError
from matrixrun.core.metrics import METRIC_NAMES, Metrics

__all__ = ["BenchServingRecord", "RequestDetails", "parse_line", "parse_lines", "read_file"]

#: Per-request lists written by `--output-details`.
DETAIL_FIELDS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")
_REQUIRED = ("duration", "completed", "total_input_tokens", "total_output_tokens")
_RATES = ("request_throughput", "input_throughput", "output_throughput")
#: Throughputs older versions did not write, and the count each divides by the duration
#: (bench_serving's definition). Every version writes output_throughput.
_RATE_OF = {"request_throughput": "completed", "input_throughput": "total_input_tokens"}
_HINT = "is this a line written by `python -m sglang.bench_serving --output-file`?"


class RequestDetails(BaseModel):
    """Per-request lists from `--output-details`, index-aligned (times in seconds)."""

    model_config = ConfigDict(extra="forbid")

    input_lens: list[int] = Field(default_factory=list)
    output_lens: list[int] = Field(default_factory=list)
    ttfts: list[float] = Field(default_factory=list)
    itls: list[list[float]] = Field(default_factory=list)
    generated_texts: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class BenchServingRecord(BaseModel):
    """One bench_serving run (one line of its output file)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="File the line came from.")
    line: int = Field(description="1-based line number in that file.")
    tag: str | None = None
    backend: str | None = None
    dataset_name: str | None = None
    request_rate: float | str | None = Field(
        None, description="Requests/s; inf for 'as fast as possible'; a string such as 'trace'."
    )
    max_concurrency: int | None = None
    random_input_len: int | None = None
    random_output_len: int | None = None
    random_range_ratio: float | None = None
    server_info: dict[str, Any] = Field(default_factory=dict)
    metrics: Metrics
    details: RequestDetails | None = None
    computed: list[str] = Field(
        default_factory=list,
        description="Metrics the line did not hold, computed from its counts and duration.",
    )
    fields: dict[str, Any] = Field(
        default_factory=dict, description="Every other top-level key of the line, as written."
    )

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def field(self, path: str) -> Any:
        """A value by name: a record attribute, a top-level key of the line, or a dotted path
        into a mapping (`server_info.moe_runner_backend`). None when absent."""
        head, _, rest = path.partition(".")
        if head in BenchServingRecord.model_fields and head not in ("metrics", "fields"):
            value: Any = getattr(self, head)
        elif head in Metrics.model_fields:
            value = getattr(self.metrics, head)
        else:
            value = self.fields.get(head)
        for key in rest.split(".") if rest else ():
            if isinstance(value, dict):
                value = value.get(key)
            elif isinstance(value, list) and value and isinstance(value[0], dict):
                value = value[0].get(key)  # server_info.internal_states is a one-item list
            else:
                return None
        return value


def _bad(where: str, what: str, todo: str = _HINT) -> InputError:
    return InputError(f"{where}: {what}; {todo}")


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _optional_int(data: dict[str, Any], key: str, where: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(where, f"{key!r} should be an integer, not {value!r}", "fix or remove the line")
    return value


def _metrics(
    data: dict[str, Any], details: RequestDetails | None, where: str, computed: list[str]
) -> Metrics:
    """The line's metrics; throughputs an older version did not write are computed from the
    counts and the duration (their names are appended to `computed`)."""
    present = [k for k in _RATES if k in data or k not in _RATE_OF]
    for key in _REQUIRED + tuple(present):
        if key not in data:
            raise _bad(where, f"missing {key!r}")
        if _finite(data[key]) is None:
            raise _bad(
                where,
                f"{key!r} is {data[key]!r}, not a finite number",
                "the run probably completed no request: rerun it, or remove the line",
            )
    values: dict[str, Any] = {key: data[key] for key in _REQUIRED + tuple(present)}
    for key in ("duration", *present):
        values[key] = float(values[key])
    for key in ("completed", "total_input_tokens", "total_output_tokens"):
        v = values[key]
        if isinstance(v, float) and v.is_integer():
            values[key] = v = int(v)
        if not isinstance(v, int) or v < 0:
            raise _bad(where, f"{key!r} is {v!r}, not a count", "fix or remove the line")
    if values["duration"] <= 0:
        raise _bad(where, f"'duration' is {values['duration']!r}", "fix or remove the line")
    for rate, count_key in _RATE_OF.items():
        if rate not in values:
            values[rate] = values[count_key] / values["duration"]
            computed.append(rate)
    total = _finite(data.get("total_throughput"))
    # Older bench_serving versions write no total_throughput: it is input + output by definition.
    if total is None:
        total = values["input_throughput"] + values["output_throughput"]
        computed.append("total_throughput")
    values["total_throughput"] = total
    for name in METRIC_NAMES:
        if name.endswith("_ms") or name == "concurrency":
            # NaN / Infinity mean "undefined" (e.g. TPOT with one output token): None.
            values[name] = _finite(data.get(name))
    # Newer writers count failures themselves (the multi-turn replay's `errors` holds only the
    # first few distinct messages, so a written count wins over counting that list).
    written = data.get("failed")
    if isinstance(written, int) and not isinstance(written, bool) and written >= 0:
        values["failed"] = written
    elif details:
        values["failed"] = sum(1 for e in details.errors if e)
    else:
        values["failed"] = 0
    try:
        return Metrics.model_validate(values)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise _bad(where, f"{loc!r}: {first['msg']}") from None


def parse_line(text: str, *, source: str = "<string>", line: int = 1) -> BenchServingRecord:
    """One bench_serving output line → record. Raises InputError('FILE:LINE: ...')."""
    where = f"{source}:{line}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise _bad(
            where,
            f"not valid JSON ({err.msg} at column {err.colno})",
            "each line must be one JSON object as written by `sglang.bench_serving "
            "--output-file`; fix or remove the line",
        ) from None
    if not isinstance(data, dict):
        raise _bad(where, f"expected a JSON object, found {type(data).__name__}")

    details: RequestDetails | None = None
    if any(k in data for k in DETAIL_FIELDS):
        try:
            details = RequestDetails.model_validate(
                {k: data[k] for k in DETAIL_FIELDS if data.get(k) is not None}
            )
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise _bad(where, f"per-request list {loc!r}: {first['msg']}") from None

    rate = data.get("request_rate")
    if isinstance(rate, bool) or (rate is not None and not isinstance(rate, int | float | str)):
        raise _bad(where, f"'request_rate' is {rate!r}", "fix or remove the line")
    server_info = data.get("server_info") or {}
    if not isinstance(server_info, dict):
        raise _bad(where, f"'server_info' should be an object, not {type(server_info).__name__}")
    ratio = data.get("random_range_ratio")
    computed: list[str] = []
    metrics = _metrics(data, details, where, computed)
    known = {
        "tag",
        "backend",
        "dataset_name",
        "request_rate",
        "max_concurrency",
        "random_input_len",
        "random_output_len",
        "random_range_ratio",
        "server_info",
        *DETAIL_FIELDS,
        *Metrics.model_fields,
    }
    return BenchServingRecord(
        source=source,
        line=line,
        tag=_text(data.get("tag")),
        backend=_text(data.get("backend")),
        dataset_name=_text(data.get("dataset_name")),
        request_rate=float(rate) if isinstance(rate, int | float) else rate,
        max_concurrency=_optional_int(data, "max_concurrency", where),
        random_input_len=_optional_int(data, "random_input_len", where),
        random_output_len=_optional_int(data, "random_output_len", where),
        random_range_ratio=_finite(ratio),
        server_info=server_info,
        metrics=metrics,
        details=details,
        computed=computed,
        fields={k: v for k, v in data.items() if k not in known},
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def parse_lines(lines: Iterable[str], source: str = "<string>") -> list[BenchServingRecord]:
    """Every non-blank line, numbered from 1 as an editor shows them."""
    return [
        parse_line(text, source=source, line=number)
        for number, text in enumerate(lines, start=1)
        if text.strip()
    ]


def read_file(path: str | Path) -> list[BenchServingRecord]:
    """All records of one bench_serving output file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"{p}: cannot read it ({err.strerror}); check the path") from None
    except UnicodeDecodeError:
        raise InputError(f"{p}: not UTF-8 text; pass a bench_serving JSONL file") from None
    records = parse_lines(text.splitlines(), source=str(p))
    if not records:
        raise InputError(f"{p}: no results in it; pass a bench_serving --output-file JSONL file")
    return records

"""The bench_serving output parser, on real files written by SGLang 0.5.23's client
(tests/golden/bench_serving/, see its README) and on bad lines."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from matrixrun.core.errors import InputError
from matrixrun.load.bench_serving import parse_line, parse_lines, read_file

GOLDEN = Path(__file__).parent / "golden" / "bench_serving"


def golden_line(name: str = "fast_prefill", index: int = 0) -> dict[str, Any]:
    lines = (GOLDEN / f"{name}.jsonl").read_text().splitlines()
    data: dict[str, Any] = json.loads(lines[index])
    return data


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data)  # writes Infinity / NaN like bench_serving does


@pytest.mark.parametrize(
    ("name", "concurrencies", "itl_ms"),
    [("fast_prefill", [1, 8, 64], 20.0), ("fast_decode", [1, 8, 64], 15.0), ("steady", [4], 20.0)],
)
def test_golden_files_parse(name: str, concurrencies: list[int], itl_ms: float) -> None:
    records = read_file(GOLDEN / f"{name}.jsonl")
    assert [r.max_concurrency for r in records] == concurrencies
    for i, r in enumerate(records, start=1):
        assert r.where == f"{GOLDEN / name}.jsonl:{i}"
        assert r.tag == name and r.backend == "sglang" and r.dataset_name == "random"
        assert r.request_rate == math.inf  # `Infinity` in the file
        assert (r.random_input_len, r.random_output_len, r.random_range_ratio) == (128, 64, 1.0)
        assert r.server_info["version"] == "fastserver-0.1"
        assert r.field("server_info.fastserver_stats.itl_ms") == itl_ms
        m = r.metrics
        assert m.failed == 0 and m.completed > 0
        assert m.mean_tpot_ms == pytest.approx(itl_ms, rel=0.01)  # the server's fixed timing
        assert m.output_throughput == pytest.approx(m.total_output_tokens / m.duration)
        assert m.p90_ttft_ms is not None and m.p95_itl_ms is not None
        assert "total_output_tokens_retokenized" in r.fields


def test_golden_first_line_exact_values() -> None:
    (r, *_) = read_file(GOLDEN / "fast_prefill.jsonl")
    assert r.metrics.output_throughput == 48.75980737968726
    assert r.metrics.total_throughput == 144.75567815844656
    assert r.metrics.completed == 8 and r.metrics.total_output_tokens == 512
    assert r.metrics.concurrency == pytest.approx(0.99943, abs=1e-5)
    assert r.details is None


def test_golden_output_details() -> None:
    (r,) = read_file(GOLDEN / "steady.jsonl")
    assert r.details is not None
    d = r.details
    assert len(d.ttfts) == len(d.itls) == len(d.errors) == r.metrics.completed == 16
    assert d.output_lens == [64] * 16
    assert all(len(gaps) == 63 for gaps in d.itls)
    assert 0.04 < d.ttfts[0] < 0.07  # seconds, as bench_serving writes them
    assert r.metrics.failed == 0


def test_failed_requests_counted_from_errors() -> None:
    data = golden_line("steady")
    data["errors"] = ["", "ReadTimeout", "", "HTTP 500"] + [""] * 12
    r = parse_line(dump(data))
    assert r.metrics.failed == 2
    assert r.metrics.failure_rate == pytest.approx(2 / 18)


def test_nan_and_infinite_statistics_become_none() -> None:
    data = golden_line()
    data["mean_tpot_ms"] = math.nan
    data["p99_itl_ms"] = -math.inf
    data["p90_ttft_ms"] = None
    r = parse_line(dump(data))
    assert r.metrics.mean_tpot_ms is None and r.metrics.p99_itl_ms is None
    assert r.metrics.p90_ttft_ms is None
    assert r.metrics.median_tpot_ms is not None


def test_older_files_without_total_throughput_or_percentiles() -> None:
    data = golden_line()
    for key in ("total_throughput", "p90_ttft_ms", "p95_ttft_ms", "std_itl_ms", "server_info"):
        del data[key]
    r = parse_line(dump(data))
    m = r.metrics
    assert m.total_throughput == pytest.approx(m.input_throughput + m.output_throughput)
    assert m.p90_ttft_ms is None and r.server_info == {}


def test_trace_request_rate_is_kept_as_text() -> None:
    data = golden_line()
    data["request_rate"] = "trace"
    assert parse_line(dump(data)).request_rate == "trace"


def _without(key: str) -> str:
    data = golden_line()
    del data[key]
    return dump(data)


def _with(key: str, value: Any) -> str:
    data = golden_line()
    data[key] = value
    return dump(data)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"tag": "a", ', "f.jsonl:2: not valid JSON"),
        ("[1, 2]", "f.jsonl:2: expected a JSON object, found list"),
        (_without("output_throughput"), "f.jsonl:2: missing 'output_throughput'"),
        (_without("duration"), "f.jsonl:2: missing 'duration'"),
        (_with("output_throughput", math.nan), "'output_throughput' is nan, not a finite number"),
        (_with("completed", "eight"), "'completed' is 'eight', not a finite number"),
        (_with("max_concurrency", "many"), "'max_concurrency' should be an integer"),
        (_with("server_info", [1]), "'server_info' should be an object"),
        (_with("ttfts", "fast"), "f.jsonl:2: per-request list 'ttfts'"),
        (_with("completed", -3), "f.jsonl:2: 'completed'"),
    ],
)
def test_bad_lines_say_file_line_what_and_what_to_do(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_lines([dump(golden_line()), text], source="f.jsonl")
    assert message in str(err.value)
    assert str(err.value).startswith("f.jsonl:2: ")
    assert ";" in str(err.value)  # ... followed by what to do


def test_blank_lines_are_skipped_but_keep_their_numbers() -> None:
    with pytest.raises(InputError, match=r"^f\.jsonl:3: not valid JSON"):
        parse_lines([dump(golden_line()), "   ", "oops"], source="f.jsonl")
    records = parse_lines(["", dump(golden_line())], source="f.jsonl")
    assert [r.line for r in records] == [2]


def test_read_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read it"):
        read_file(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="no results in it"):
        read_file(empty)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        read_file(binary)

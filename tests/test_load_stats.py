"""Metric definitions (matrixrun.load.aggregate) against hand-computed values and against a real
bench_serving run's per-request data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from matrixrun.load.aggregate import compute_metrics, itl_values, tpot
from matrixrun.load.records import RequestRecord, dumps_jsonl, loads_jsonl, read_jsonl, write_jsonl

GOLDEN = Path("/work/shared/golden/bench_serving/steady.jsonl")


def rec(
    index: int,
    start: float,
    times: list[float],
    tokens: list[int],
    e2e: float,
    prompt: int = 10,
    error: str = "",
) -> RequestRecord:
    return RequestRecord(
        index=index,
        start=start,
        ttft=times[0] if times else None,
        e2e=e2e,
        chunk_times=times,
        chunk_tokens=tokens,
        prompt_tokens=prompt,
        output_tokens=sum(tokens),
        error=error,
    )


def test_itl_splits_a_k_token_chunk_into_k_equal_gaps() -> None:
    r = rec(0, 0.0, [0.1, 0.2, 0.5], [2, 1, 3], e2e=0.5)
    # the first chunk's second token contributes nothing; 0.1 gap → [0.1]; 0.3 gap / 3 → 3 × 0.1
    assert itl_values(r) == pytest.approx([0.1, 0.1, 0.1, 0.1])


def test_tpot_is_decode_time_over_tokens_after_the_first() -> None:
    r = rec(0, 0.0, [0.1, 0.2, 0.5], [2, 1, 3], e2e=0.6)
    assert tpot(r) == pytest.approx((0.6 - 0.1) / (6 - 1))
    assert tpot(rec(0, 0.0, [0.1], [1], e2e=0.1)) is None


def test_hand_computed_aggregate() -> None:
    records = [
        rec(0, 0.0, [0.10, 0.12, 0.14], [1, 1, 1], e2e=0.15, prompt=10),
        rec(1, 0.5, [0.20, 0.30], [1, 2], e2e=0.31, prompt=20),
        rec(2, 1.0, [0.05], [1], e2e=0.05, prompt=30),  # 1 token: no TPOT, no ITL
        rec(3, 0.2, [0.1], [1], e2e=2.5, prompt=40, error="HTTP 500: boom"),  # ends last
    ]
    m = compute_metrics(records)
    assert m.duration == pytest.approx(2.7)  # start → last end, the failed one included
    assert (m.completed, m.failed) == (3, 1)
    assert m.total_input_tokens == 60
    assert m.total_output_tokens == 3 + 3 + 1
    assert m.request_throughput == pytest.approx(3 / 2.7)
    assert m.input_throughput == pytest.approx(60 / 2.7)
    assert m.output_throughput == pytest.approx(7 / 2.7)
    assert m.total_throughput == pytest.approx(67 / 2.7)
    assert m.concurrency == pytest.approx((0.15 + 0.31 + 0.05) / 2.7)

    ttfts = [100.0, 200.0, 50.0]
    assert m.mean_ttft_ms == pytest.approx(np.mean(ttfts))
    assert m.median_ttft_ms == pytest.approx(100.0)
    mean = 350 / 3
    population_var = sum((t - mean) ** 2 for t in ttfts) / 3  # ddof=0, as np.std
    assert m.std_ttft_ms == pytest.approx(math.sqrt(population_var))
    # linear interpolation: rank 0.9 * 2 = 1.8 between 100 and 200
    assert m.p90_ttft_ms == pytest.approx(180.0)
    assert m.p99_ttft_ms == pytest.approx(198.0)

    tpots = [(0.15 - 0.10) / 2 * 1e3, (0.31 - 0.20) / 2 * 1e3]
    assert m.mean_tpot_ms == pytest.approx(np.mean(tpots))
    itls = [20.0, 20.0, 50.0, 50.0]  # second request: 0.1 gap over a 2-token chunk
    assert m.mean_itl_ms == pytest.approx(35.0)
    assert m.median_itl_ms == pytest.approx(35.0)
    assert m.p95_itl_ms == pytest.approx(np.percentile(itls, 95))
    assert m.mean_e2e_latency_ms == pytest.approx(np.mean([150.0, 310.0, 50.0]))


def test_nothing_completed_gives_counts_and_no_latencies() -> None:
    m = compute_metrics([rec(0, 0.0, [], [], e2e=1.0, error="timed out after 1 s")])
    assert (m.completed, m.failed, m.total_output_tokens) == (0, 1, 0)
    assert m.output_throughput == 0.0
    assert m.mean_ttft_ms is None and m.p99_itl_ms is None and m.concurrency is None


def golden_records() -> tuple[dict[str, object], list[RequestRecord]]:
    run = json.loads(GOLDEN.read_text().splitlines()[0])
    records = []
    columns = (run["ttfts"], run["itls"], run["output_lens"], run["input_lens"], run["errors"])
    for i, (ttft, itls, out, inp, err) in enumerate(zip(*columns, strict=True)):
        times = [ttft]
        for gap in itls:  # one token per chunk in this run
            times.append(times[-1] + gap)
        records.append(
            RequestRecord(
                index=i,
                start=0.0,
                ttft=ttft,
                e2e=times[-1],  # bench_serving's latency is at [DONE], just after this
                chunk_times=times,
                chunk_tokens=[1] * len(times),
                prompt_tokens=inp,
                output_tokens=out,
                error=err,
            )
        )
    return run, records


def test_reproduces_a_real_bench_serving_run() -> None:
    run, records = golden_records()
    m = compute_metrics(records).model_dump()
    for key in ("completed", "total_input_tokens", "total_output_tokens"):
        assert m[key] == run[key], key
    for stat in ("mean", "median", "std", "p90", "p95", "p99"):
        for lat in ("ttft_ms", "itl_ms"):  # exact: same values, same numpy functions
            assert m[f"{stat}_{lat}"] == pytest.approx(run[f"{stat}_{lat}"], rel=1e-9), stat + lat
        # e2e and TPOT need the [DONE] arrival, which the file lacks: 50 µs tolerance
        for lat in ("e2e_latency_ms", "tpot_ms"):
            assert m[f"{stat}_{lat}"] == pytest.approx(run[f"{stat}_{lat}"], abs=0.05), stat + lat
    # with bench_serving's duration, the rates follow exactly
    m2 = compute_metrics(records, duration=float(run["duration"]))  # type: ignore[arg-type]
    assert m2.output_throughput == pytest.approx(run["output_throughput"])
    assert m2.request_throughput == pytest.approx(run["request_throughput"])
    assert m2.total_throughput == pytest.approx(run["total_throughput"])
    assert m2.concurrency == pytest.approx(run["concurrency"], rel=1e-4)


def test_records_round_trip_through_jsonl(tmp_path: Path) -> None:
    _, records = golden_records()
    records.append(rec(99, 1.5, [], [], e2e=3.0, error="timed out after 3 s (0 tokens received)"))
    text = dumps_jsonl(records)
    assert len(text.splitlines()) == len(records)
    first = json.loads(text.splitlines()[0])
    assert set(first) == {"i", "start", "ttft", "e2e", "t", "n", "in", "out", "err"}
    back = loads_jsonl(text)
    assert [r.index for r in back] == [r.index for r in records]
    assert back[-1].error.startswith("timed out") and back[-1].ttft is None
    # rounding to the microsecond changes no reported metric beyond it
    a, b = compute_metrics(records), compute_metrics(back)
    assert b.mean_itl_ms == pytest.approx(a.mean_itl_ms, abs=1e-3)
    path = tmp_path / "requests.jsonl"
    write_jsonl(path, records)
    assert read_jsonl(path) == back

"""The client's self-check: coalesced events, loop lag and CPU turned into affected metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_load_client import ITL, TTFT, config, fixed_server  # the fixed-timing server

from matrixrun.load.client import run_load, run_load_sync
from matrixrun.load.command import client_warning
from matrixrun.load.records import RequestRecord
from matrixrun.load.selfcheck import ITL_PERCENTILES, LagSamples, coalesced, judge
from matrixrun.load.selfcheck import TTFT as TTFT_METRICS


def record(times: list[float], ttft: float = 0.05, ok: bool = True) -> RequestRecord:
    return RequestRecord(
        index=0, start=0.0, ttft=ttft, e2e=times[-1] if times else 0.0, chunk_times=times,
        chunk_tokens=[1] * len(times), prompt_tokens=8, output_tokens=len(times),
        error="" if ok else "boom",
    )  # fmt: skip


def flat(lag: float, n: int, every: float = 0.005) -> list[LagSamples]:
    """One process's probe: `n` wake-ups `every` apart, each `lag` late."""
    return [LagSamples([(k + 1) * every for k in range(n)], [lag] * n)]


def steady(n: int = 20, itl: float = 0.02) -> list[float]:
    return [0.05 + i * itl for i in range(n)]


def test_a_client_that_kept_up_flags_nothing() -> None:
    check = judge([record(steady()) for _ in range(8)], flat(0.0002, 100), cpu=0.2)
    assert not check.client_bound and check.affected == {}


def test_events_read_together_flag_the_itl_percentiles_not_ttft() -> None:
    times = steady()
    for i in range(2, 20, 2):  # every other event arrived in the same read as the one before
        times[i] = times[i - 1]
    check = judge([record(times)], flat(0.0002, 100), cpu=0.3)
    assert check.coalesced_share == pytest.approx(9 / 19)
    assert set(ITL_PERCENTILES) <= set(check.affected)
    assert not set(TTFT_METRICS) & set(check.affected)


def test_loop_lag_bounds_itl_and_ttft_but_hardly_tpot() -> None:
    check = judge([record(steady(itl=0.02), ttft=0.02)], flat(0.004, 100), cpu=0.5)
    assert check.affected["median_itl_ms"] == pytest.approx(2 * 0.004 / 0.02)
    assert check.affected["mean_ttft_ms"] == pytest.approx(0.004 / 0.02)  # p90 lag / median
    # first-to-last over 19 gaps: 4 ms / 19 against 20 ms is 1%, under the 10% limit
    assert "mean_tpot_ms" not in check.affected
    assert "output_throughput" not in check.affected


def test_a_saturated_core_makes_throughput_a_lower_bound() -> None:
    check = judge([record(steady())], flat(0.0001, 10), cpu=0.97)
    assert check.affected["output_throughput"] == 1.0


def test_failed_requests_do_not_count_toward_coalescing() -> None:
    assert coalesced([record([0.1, 0.1, 0.1], ok=False), record([0.1, 0.2])]) == (0, 1)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with fixed_server("--ttft-ms", str(TTFT), "--itl-ms", str(ITL)) as url:
        yield url


def test_a_quiet_client_is_not_flagged_end_to_end(server: str) -> None:
    res = run_load_sync(config(server, num_prompts=16, output_len=20))
    assert res.check is not None and res.metrics.completed == 16
    # the robust statistics; a p99 may flag when other work shares this machine's 2 cores
    robust = {"median_itl_ms", "mean_tpot_ms", "mean_ttft_ms", "output_throughput"}
    assert not robust & set(res.check.affected), res.check.as_dict()


def test_a_starved_loop_is_flagged_end_to_end(server: str) -> None:
    async def starved() -> Any:
        async def hog() -> None:  # another job on the client's loop: 15 ms busy every 20 ms
            while True:
                time.sleep(0.015)
                await asyncio.sleep(0.005)

        task = asyncio.create_task(hog())
        try:
            return await run_load(config(server, num_prompts=16, output_len=20))
        finally:
            task.cancel()

    res = asyncio.run(starved())
    assert res.check is not None and res.check.client_bound
    assert res.check.lag_p99_ms > 5
    assert res.check.affected["median_itl_ms"] > 0.3  # lags of ~15 ms against a 10 ms ITL
    warning = client_warning({"client_check": res.check.as_dict()})
    assert warning is not None and "fell behind" in warning

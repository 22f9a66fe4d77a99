"""The load client against real servers over real HTTP: `tests/fixedserver.py` (timing known
exactly) in a subprocess, and once against the simulator.

Tolerances hold on a loaded machine without being loose on a quiet one: each bound is the
schedule's own slack plus `lateness_ms`, the lateness both ends measured in that test (the
fixed server's worst event against its schedule and worst read of a request, the client's worst
loop lag from its self-check). Load widens them by what it did, so a metric computed wrong
still fails and a busy host alone does not.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from matrixrun.cli.options import add_bench_client
from matrixrun.core.errors import InputError, LoadError
from matrixrun.load import LoadConfig, run_load_sync
from matrixrun.load import command as bench_client
from matrixrun.load.client import CUT, DUE_AFTER, WAITED
from matrixrun.load.prompts import arrival_offsets, make_prompts, make_warmup_prompts

pytestmark = pytest.mark.timeout(60)

SERVER = Path(__file__).resolve().parent / "fixedserver.py"
TTFT, ITL = 40.0, 10.0  # ms, the fixed server's default timing in these tests


@contextmanager
def fixed_server(*args: str) -> Iterator[str]:
    cmd = [sys.executable, str(SERVER), "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == "READY", ready
        yield f"http://127.0.0.1:{ready[1]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/stats") as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with fixed_server("--ttft-ms", str(TTFT), "--itl-ms", str(ITL)) as url:
        yield url


def config(url: str, **kw: Any) -> LoadConfig:
    base: dict[str, Any] = dict(
        base_url=url, num_prompts=8, input_len=32, output_len=20, concurrency=4,
        warmup_requests=0, request_timeout_s=20,
    )  # fmt: skip
    return LoadConfig(**(base | kw))


def lateness_ms(res: Any, url: str) -> float:
    """How late anything in `res`'s cell could have been, as measured (ms): the server's worst
    event against its schedule plus its worst read of a request (cumulative over the server's
    life, so never less than this cell's), plus the client's worst loop lag (its self-check).
    About 1-3 ms on a quiet host; whatever a loaded one made it."""
    server = stats(url)
    client = res.check.lag_max_ms if res.check is not None else 0.0
    return float(server["late_worst_ms"] + server["arrival_lag_max_ms"] + client)


def check_timing(m: Any, output_len: int, waves: int, late: float) -> None:
    """The metrics of `waves` waves of `output_len`-token requests against the fixed schedule,
    each bound widened by `late` (ms, `lateness_ms`): nothing can arrive early, and a token is
    at most `late` behind its due time. Mean ITL/TPOT span (tokens - 1) gaps between two
    timestamps, so their error is at most 2·late/(tokens - 1); a median gap is off by at most
    `late` (or collapses under coalescing, which the client's self-check would flag)."""
    assert TTFT - 1 <= m.mean_ttft_ms <= TTFT + 30 + late
    spread = 2 * late / (output_len - 1)
    assert m.mean_itl_ms == pytest.approx(ITL, abs=1.5 + spread)
    assert m.median_itl_ms == pytest.approx(ITL, abs=3 + late)
    assert m.mean_tpot_ms == pytest.approx(ITL, abs=1.5 + spread)
    e2e = TTFT + (output_len - 1) * ITL
    assert e2e - 1 <= m.mean_e2e_latency_ms <= e2e + 40 + late
    low, high = waves * e2e / 1e3 - 0.01, waves * (e2e + late) / 1e3 + 0.3
    assert low <= m.duration <= high


@pytest.mark.parametrize("api", ["sglang", "openai"])
def test_timing_and_token_counts(server: str, api: str) -> None:
    res = run_load_sync(config(server, api=api, model="m"))
    m = res.metrics
    assert (m.completed, m.failed) == (8, 0)
    assert m.total_output_tokens == 8 * 20 and m.total_input_tokens == 8 * 32
    for r in res.records:
        assert r.ok and r.output_tokens == 20 and r.chunk_tokens == [1] * 20
        assert r.chunk_times[0] == r.ttft and r.chunk_times == sorted(r.chunk_times)
    check_timing(m, 20, waves=2, late=lateness_ms(res, server))
    assert m.concurrency == pytest.approx(4, abs=0.5)
    assert m.output_throughput == pytest.approx(160 / m.duration)


def test_httpx_transport_measures_the_same(server: str) -> None:
    res = run_load_sync(config(server, transport="httpx"))
    m = res.metrics
    assert (m.completed, m.failed) == (8, 0)
    check_timing(m, 20, waves=2, late=lateness_ms(res, server))


@pytest.mark.parametrize("api", ["sglang", "openai"])
def test_multi_token_chunks_split_itl(api: str) -> None:
    # events at tokens 0, 4, 8, 12, 16 and the last (19); per-chunk usage makes openai exact
    with fixed_server("--ttft-ms", str(TTFT), "--itl-ms", str(ITL), "--stream-interval", "4",
                      "--continuous-usage") as url:  # fmt: skip
        res = run_load_sync(config(url, api=api, num_prompts=4))
        late = lateness_ms(res, url)
    for r in res.records:
        assert r.chunk_tokens == [1, 4, 4, 4, 4, 3] and r.output_tokens == 20
    check_timing(res.metrics, 20, waves=1, late=late)


def test_openai_without_per_chunk_usage_counts_chunks_like_bench_serving() -> None:
    with fixed_server("--ttft-ms", "5", "--itl-ms", "2", "--stream-interval", "4") as url:
        res = run_load_sync(config(url, api="openai", num_prompts=2))
        late = lateness_ms(res, url)
    r = res.records[0]
    assert r.chunk_tokens == [1] * 6 and r.output_tokens == 20  # total from the final usage
    # one gap per chunk: 5 gaps over 19 tokens' time, each end at most `late` behind
    assert res.metrics.mean_itl_ms == pytest.approx(19 * 2 / 5, abs=1.5 + 2 * late / 5)


@pytest.mark.parametrize(
    ("flag", "expect"),
    [
        ("--fail-every", "HTTP 500: "),
        ("--error-every", "server error in stream: injected stream error"),
        ("--truncate-every", "closed the connection"),
        ("--stall-every", "timed out after 0.6 s (1 tokens received)"),
    ],
)
def test_per_request_errors_are_recorded_not_raised(flag: str, expect: str) -> None:
    with fixed_server("--ttft-ms", "5", "--itl-ms", "2", flag, "3") as url:
        res = run_load_sync(config(url, num_prompts=6, concurrency=6, request_timeout_s=0.6))
        late = lateness_ms(res, url) / 1e3
    failed = [r for r in res.records if not r.ok]
    assert len(failed) == 2, [r.error for r in res.records]
    assert all(expect in r.error for r in failed), failed[0].error
    m = res.metrics
    assert (m.completed, m.failed) == (4, 2)
    assert m.total_output_tokens == 4 * 20  # failed requests' partial tokens are not counted
    if flag == "--stall-every":
        assert all(0.6 - 0.01 <= r.e2e <= 0.6 + 0.2 + late for r in failed)
        assert m.duration >= 0.59  # the timeout ends the benchmark (ms timer resolution)


def test_connection_refused_raises_one_sentence() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for warmup in (0, 2):
        with pytest.raises(LoadError, match=r"could not connect to .*; is the server running\?"):
            run_load_sync(config(f"http://127.0.0.1:{port}", warmup_requests=warmup))


def test_warmup_runs_first_and_is_not_measured() -> None:
    with fixed_server("--ttft-ms", "5", "--itl-ms", "2") as url:
        res = run_load_sync(config(url, num_prompts=5, warmup_requests=3, seed=11))
        seen = stats(url)["prompts"]
    assert len(res.records) == 5 and res.metrics.completed == 5
    assert len(seen) == 8
    warm = [p[:4] for p in make_warmup_prompts(11, 3, 32)]
    measured = [p[:4] for p in make_prompts(11, 5, 32)]
    assert sorted(seen[:3]) == sorted(warm)
    assert sorted(seen[3:]) == sorted(measured)
    assert min(r.start for r in res.records) < 0.01  # the clock starts after warmup


def test_a_failed_warmup_request_is_tolerated() -> None:
    """Issue 15: the one warmup request of a cell answered 500 (a JIT compile, a hiccup);
    the cell is measured anyway and the failure is counted."""
    with fixed_server("--fail-first", "1", "--ttft-ms", "1", "--itl-ms", "1") as url:
        res = run_load_sync(config(url, warmup_requests=1))
    assert res.warmup_failed == 1
    assert res.metrics.completed == 8 and res.metrics.failed == 0


def test_all_warmup_failing_leaves_the_verdict_to_the_measured_requests() -> None:
    with fixed_server("--fail-every", "1") as url:
        res = run_load_sync(config(url, warmup_requests=2))
    assert res.warmup_failed == 2
    assert res.metrics.completed == 0 and res.metrics.failed == 8
    assert all("500" in r.error for r in res.records)


def test_an_unreachable_server_still_fails_in_the_warmup() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(LoadError, match="is the server running"):
            run_load_sync(config(f"http://127.0.0.1:{port}", warmup_requests=1))


def test_same_seed_same_prompts_across_runs() -> None:
    with fixed_server("--ttft-ms", "1", "--itl-ms", "1") as url:
        run_load_sync(config(url, seed=5, output_len=2))
        run_load_sync(config(url, seed=5, output_len=2))
        run_load_sync(config(url, seed=6, output_len=2))
        seen = [tuple(p) for p in stats(url)["prompts"]]
    assert sorted(seen[:8]) == sorted(seen[8:16])
    assert not set(seen[:8]) & set(seen[16:])


def test_poisson_rate_is_respected() -> None:
    rate, n = 50.0, 50
    with fixed_server("--ttft-ms", "2", "--itl-ms", "1") as url:
        res = run_load_sync(
            config(url, num_prompts=n, output_len=4, concurrency=64, request_rate=rate, seed=2)
        )
    due = arrival_offsets(2, n, rate)
    starts = [r.start for r in sorted(res.records, key=lambda r: r.index)]
    lags = [s - d for s, d in zip(starts, due, strict=True)]
    assert min(lags) >= -3e-3  # the event loop's timers have millisecond resolution
    assert res.check is not None  # a start is late by at most the client's own loop lag
    late = res.check.lag_max_ms / 1e3
    assert sum(lags) / n < 0.01 + late and max(lags) < 0.1 + late
    assert res.metrics.request_throughput == pytest.approx(n / due[-1], rel=0.3)


def test_bench_client_command(server: str) -> None:
    parser = argparse.ArgumentParser()
    add_bench_client(parser)
    argv = ["--url", server, "--concurrency", "2", "--num-prompts", "4", "--input-len", "16",
            "--output-len", "8", "--seed", "3", "--api", "openai", "--model", "m"]  # fmt: skip
    out = bench_client.run(parser.parse_args(argv))
    assert out["completed"] == 4 and out["total_output_tokens"] == 32
    assert json.loads(json.dumps(out)) == out
    with pytest.raises(InputError, match="--concurrency"):
        bench_client.run(parser.parse_args([*argv, "--concurrency", "0"]))
    with pytest.raises(InputError, match="--url"):
        bench_client.run(parser.parse_args([*argv, "--url", "localhost:1"]))
    with pytest.raises(SystemExit):
        parser.parse_args([*argv, "--request-rate", "-1"])


def sim_profile(step_ms: float) -> list[str]:
    """A flat profile: every decode step takes `step_ms`, no prefill cost, no effects."""
    data = {
        "name": "flat",
        "stream_interval": 1,
        "base": {"step_ms": [[1, step_ms], [64, step_ms]], "prefill_ms_per_token": 0.0},
        "rules": [],
        "effects": {},
        "effect_rules": [],
    }
    return ["--profile-json", json.dumps(data)]


@pytest.mark.parametrize("api", ["sglang", "openai"])
def test_against_the_simulator(api: str) -> None:
    from simserver import start_sim

    with start_sim(["--model-path", "sim/m", *sim_profile(10.0)]) as (_, url):
        res = run_load_sync(config(url, api=api, model="sim/m", num_prompts=8, output_len=16))
    m = res.metrics
    assert (m.completed, m.failed, m.total_output_tokens) == (8, 0, 8 * 16), res.records[0].error
    assert m.mean_itl_ms == pytest.approx(10, abs=2.5)
    assert m.mean_tpot_ms == pytest.approx(10, abs=2.5)


def waves_within(span_s: float, e2e_s: float, late_ms: float) -> int:
    """Whole waves of one `e2e_s` each that surely fit in `span_s` when each may run up to
    `late_ms` (`lateness_ms`) behind its schedule: 2 of 2.5 on a quiet host, fewer on a busy
    one (never more: lateness only delays)."""
    return int(span_s // (e2e_s + late_ms / 1e3))


def test_duration_sizing_stops_sending_when_the_time_is_up(server: str) -> None:
    # each request takes TTFT + 19 ITL; at concurrency 4 about 4 requests per wave
    e2e = (TTFT + 19 * ITL) / 1e3
    res = run_load_sync(config(server, num_prompts=400, duration_s=2.5 * e2e))
    m, late = res.metrics, lateness_ms(res, server)
    # 3 waves started within the duration on time, not 400 requests
    assert 4 * waves_within(2.5 * e2e, e2e, late) <= m.completed <= 16
    assert max(r.start for r in res.records) < 2.5 * e2e + 0.05 + late / 1e3
    assert m.duration < 4 * (e2e + late / 1e3)


def test_time_cap_cancels_what_is_left_and_keeps_what_finished(server: str) -> None:
    # concurrency 4, 40 requests: ten waves; a cap of 2.5 waves ends the cell early
    e2e = (TTFT + 19 * ITL) / 1e3
    res = run_load_sync(config(server, num_prompts=40, time_cap_s=2.5 * e2e))
    m, late = res.metrics, lateness_ms(res, server)
    # the waves that finished, kept (2 on time, fewer on a busy host, never more than 3)
    assert 4 * waves_within(2.5 * e2e, e2e, late) <= m.completed <= 12
    # in flight, waiting or never sent: each a failed request with its reason, none left out
    assert res.capped == m.failed == 40 - m.completed and len(res.records) == 40
    reasons = {r.error for r in res.records if not r.ok}
    assert reasons == {CUT, WAITED}  # 4 in flight when the cap came; the rest never left
    # in flight when the cap came: at most the concurrency (4 on a quiet host; fewer when a
    # slot was between requests at the cap)
    assert 1 <= sum(r.error == CUT for r in res.records) <= 4
    assert m.duration < 3 * e2e + late / 1e3


def test_requests_a_server_holds_forever_are_failures_with_their_reason() -> None:
    """The H200 pattern (issue 44): a server that never finishes some requests holds their
    concurrency slots to the cap, and the requests queued behind them never leave the client.
    Every fourth request stalls after one token: at concurrency 4 the 16th request takes the
    last slot, so 12 finish, 4 are cut in flight and 8 are never sent, and all 12 unfinished
    are failures with their reason (before, they were no records at all: "0 failed")."""
    with fixed_server("--ttft-ms", "20", "--itl-ms", "5", "--stall-every", "4") as url:
        res = run_load_sync(config(url, num_prompts=24, time_cap_s=2.0))
        late = lateness_ms(res, url) / 1e3
    m = res.metrics
    assert (m.completed, m.failed, res.capped) == (12, 12, 12)
    errors = [r.error for r in res.records]
    assert (errors.count(CUT), errors.count(WAITED)) == (4, 8)
    cut = [r for r in res.records if r.error == CUT]
    assert all(r.output_tokens == 1 for r in cut)  # what arrived before the cut is kept
    assert all(2.0 - 0.01 <= r.end <= 2.5 + late for r in cut)


def test_no_more_requests_are_cut_than_the_concurrency_holds() -> None:
    """A server that holds every request: at the cap the 16 in flight are cut and the 48
    waiting were never sent. uvloop rounds timers to whole ms, so a cut fired up to a ms before
    the clock read the cap and gave its slot to a waiter, which was sent and cut too: 21 and 23
    cut in 2 of 10 such cells before the first cut counted as the cap (CI: 5 cut of 4 slots)."""
    with fixed_server("--ttft-ms", "20", "--itl-ms", "5", "--stall-every", "1") as url:
        for _ in range(4):
            res = run_load_sync(config(url, num_prompts=64, concurrency=16, time_cap_s=0.5))
            errors = [r.error for r in res.records]
            assert (errors.count(CUT), errors.count(WAITED)) == (16, 48)


def test_requests_due_after_the_cap_are_never_sent_and_counted(server: str) -> None:
    """At a finite rate, requests whose arrival time falls after the cap are failures too
    (never sent), while those due after a `duration_s` are not the cell's at all."""
    offsets = arrival_offsets(0, 30, 20.0)
    res = run_load_sync(config(server, num_prompts=30, request_rate=20.0, time_cap_s=0.6))
    late = {i for i, t in enumerate(offsets) if t >= 0.6}
    assert late and {r.index for r in res.records if r.error == DUE_AFTER} == late
    assert len(res.records) == 30 and res.metrics.failed >= len(late)
    short = run_load_sync(
        config(server, num_prompts=30, request_rate=20.0, duration_s=0.3, time_cap_s=5.0)
    )
    assert short.metrics.failed == 0 and 0 < len(short.records) <= 11  # 11 due by 0.3 s
    assert sum(1 for t in offsets if t < 0.3) == 11


def test_a_cap_the_cell_fits_in_changes_nothing(server: str) -> None:
    res = run_load_sync(config(server, num_prompts=8, time_cap_s=60.0))
    assert (res.metrics.completed, res.capped) == (8, 0)


def test_warmup_output_len_lifts_the_warmup_cap() -> None:
    """Warm-up requests generate at most 32 tokens unless `warmup_output_len` says otherwise
    (a `warmup_requests: cell` copy runs at the cell's own lengths): counted by the tokens the
    server sent, 2 measured + 2 warm-up requests of 40 tokens against 32."""
    sent = {}
    for full in (False, True):
        with fixed_server("--ttft-ms", "2", "--itl-ms", "1") as url:
            cfg = config(url, num_prompts=2, output_len=40, warmup_requests=2,
                         warmup_output_len=40 if full else None)  # fmt: skip
            res = run_load_sync(cfg)
            sent[full] = stats(url)["events"]
        assert res.metrics.completed == 2 and res.metrics.total_output_tokens == 80
    assert sent[True] - sent[False] == 2 * (40 - 32)


def test_the_cap_cuts_a_warmup_copy_of_a_capped_cell_too(server: str) -> None:
    """`warmup_requests: cell` on a cell the cap cuts: the copy is cut at the same cap (found on
    the H200: a 256-request copy ran minutes past a 20 s cap and the cell failed with nothing
    kept). Ten waves of warm-up under a cap of 2.5 waves: the warm-up and the measured part
    each end near the cap, and the cut warm-up requests are counted."""
    e2e = (TTFT + 19 * ITL) / 1e3
    cfg = config(server, num_prompts=40, warmup_requests=40, warmup_output_len=20,
                 time_cap_s=2.5 * e2e)  # fmt: skip
    res = run_load_sync(cfg)
    waves = waves_within(2.5 * e2e, e2e, lateness_ms(res, server))  # 2 on a quiet host
    assert 4 * waves <= res.metrics.completed <= 12
    assert res.capped == 40 - res.metrics.completed and res.metrics.failed == res.capped
    # about 30: 2.5 of 10 waves ran (fewer on a busy host, so more cut)
    assert 20 <= res.warmup_capped <= 40 - 4 * max(0, waves - 1) and res.warmup_failed == 0

"""Capacity under an SLO (`analysis/capacity.py`, its words in `report/sections/slo.py`): on
synthetic measurements whose latency grows with load, the bracket, the estimate, goodput
from per-request records, the comparison's verdict and interval, and that a run's spread
widens the bracket instead of being ignored."""

from __future__ import annotations

from typing import Any

import pytest

from matrixrun.analysis.capacity import capacity, compare_capacity, goodput, per_request
from matrixrun.core.capacity import ArmCapacity, Bound, CapacityOutcome
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import Metrics
from matrixrun.core.verdict import AnalysisSettings
from matrixrun.load.records import RequestRecord
from matrixrun.report.sections.slo import capacity_lines, comparison_words

LOADS = (1, 4, 16, 64, 256)
TTFT_LIMIT = Bound(metric="p99_ttft_ms", max=2000.0)


def meas(arm: str, x: float, ttft: float, attempt: int = 1, **extra: Any) -> Measurement:
    """One run of `arm` at concurrency `x` with p99 TTFT `ttft` ms (throughput ∝ load)."""
    metrics = Metrics(
        duration=10.0,
        completed=100,
        total_input_tokens=1000,
        total_output_tokens=1000,
        request_throughput=x / 2,
        input_throughput=1.0,
        output_throughput=x * 50.0,
        total_throughput=1.0,
        p99_ttft_ms=ttft,
        p99_tpot_ms=extra.pop("tpot", 20.0),
    )
    return Measurement(
        cell_id=f"{arm}-{x}",
        point_id=f"p{x}",
        arm=arm,
        group_id=arm,
        point={"concurrency": x, "input_len": 512},
        attempt=attempt,
        instance=f"{arm}#{attempt}",
        metrics=metrics,
        **extra,
    )


def curve(arm: str, knee: float, runs: int = 1, spread: float = 0.0) -> list[Measurement]:
    """TTFT 200 ms below the knee, then growing ∝ load² past it: 2 s is crossed at
    knee·√10 ≈ 3.16·knee. Runs alternate ±`spread` around the curve."""
    out = []
    for x in LOADS:
        base = 200.0 * max(1.0, (x / knee) ** 2)
        for r in range(runs):
            sign = 1 if r % 2 == 0 else -1
            out.append(meas(arm, x, base * (1 + sign * spread), attempt=r + 1))
    return out


def settings(**kw: Any) -> AnalysisSettings:
    return AnalysisSettings(baseline="fcfs", candidates=["lpm"], **kw)


def arm(cap: Any, name: str) -> ArmCapacity:
    return next(a for a in cap.arms if a.arm == name)


def test_bracket_and_estimate_from_one_run_per_load() -> None:
    cap = capacity(curve("fcfs", 8) + curve("lpm", 32), settings(), [TTFT_LIMIT])
    assert cap is not None
    fcfs, lpm = arm(cap, "fcfs"), arm(cap, "lpm")
    # fcfs: 200 ms up to 8, 800 at 16, 12,800 at 64 → holds at 16, misses at 64
    assert (fcfs.lo, fcfs.hi, fcfs.last_meeting, fcfs.first_missing) == (16, 64, 16, 64)
    assert fcfs.estimate == pytest.approx(8 * 10**0.5, rel=1e-6)  # log-log is exact here
    assert fcfs.limiting == ["p99_ttft_ms"]
    assert fcfs.request_throughput == pytest.approx(8.0)  # at 16
    assert lpm.last_meeting == 64 and lpm.first_missing == 256
    (c,) = cap.comparisons
    assert c.outcome is CapacityOutcome.HIGHER
    assert c.ratio == pytest.approx(4.0)
    assert (c.ratio_lo, c.ratio_hi) == (1.0, 16.0)  # 64/64 .. 256/16


def test_overlapping_brackets_are_undecided_never_same() -> None:
    cap = capacity(curve("fcfs", 8) + curve("lpm", 9), settings(), [TTFT_LIMIT])
    assert cap is not None
    (c,) = cap.comparisons
    assert c.outcome is CapacityOutcome.UNDECIDED
    assert c.ratio == pytest.approx(9 / 8)
    assert (c.ratio_lo, c.ratio_hi) == (0.25, 4.0)
    text = comparison_words(c, "concurrency")
    assert "cannot tell" in text and "1.1×" in text


def test_runs_that_spread_widen_the_bracket() -> None:
    """lpm's two runs at 64 are 900 and 4,000 ms: their geometric mean (1,897 ms) meets 2 s,
    so 64 is the last load that meets on average, but their spread (a t-interval on 1 df)
    reaches far past 2 s, so 64 is not surely within: the bracket that counts starts at 16."""
    ms = curve("fcfs", 8)
    ms += [meas("lpm", x, 200.0, attempt=a) for x in (1, 4, 16) for a in (1, 2)]
    ms += [meas("lpm", 64, v, attempt=a) for a, v in ((1, 900.0), (2, 4000.0))]
    ms += [meas("lpm", 256, v, attempt=a) for a, v in ((1, 9000.0), (2, 9500.0))]
    cap = capacity(ms, settings(), [TTFT_LIMIT])
    assert cap is not None
    lpm = arm(cap, "lpm")
    assert lpm.last_meeting == 64 and lpm.first_missing == 256
    assert lpm.lo == 16  # 64 is not surely within
    assert lpm.hi == 256
    assert lpm.min_runs == 2


def test_every_load_holds_or_none_does() -> None:
    ms = [meas("fcfs", x, 100.0) for x in LOADS] + [meas("lpm", x, 5000.0) for x in LOADS]
    cap = capacity(ms, settings(), [TTFT_LIMIT])
    assert cap is not None
    fcfs, lpm = arm(cap, "fcfs"), arm(cap, "lpm")
    assert fcfs.first_missing is None and fcfs.last_meeting == 256 and fcfs.hi is None
    assert lpm.last_meeting is None and lpm.lo is None and lpm.first_missing == 1
    (c,) = cap.comparisons
    assert c.outcome is CapacityOutcome.LOWER  # lpm misses at 1 where fcfs holds up to 256
    assert c.ratio is None and c.ratio_lo is None and c.ratio_hi == pytest.approx(1 / 256)
    lines = capacity_lines(cap)
    assert "sustains less concurrency" in lines[0]
    assert any("at least 256" in line for line in lines)
    assert any("below the lowest concurrency" in line for line in lines)


def test_two_bounds_the_first_to_break_binds() -> None:
    tpot = Bound(metric="p99_tpot_ms", max=50.0)
    ms = [meas("fcfs", x, 100.0, tpot=10.0 * x**0.5) for x in LOADS]
    ms += [meas("lpm", x, 100.0, tpot=10.0) for x in LOADS]
    cap = capacity(ms, settings(), [TTFT_LIMIT, tpot])
    assert cap is not None
    fcfs = arm(cap, "fcfs")
    assert fcfs.limiting == ["p99_tpot_ms"]  # 10·√64 = 80 > 50
    assert (fcfs.last_meeting, fcfs.first_missing) == (16, 64)


def test_not_a_load_axis_or_no_bounds_gives_nothing() -> None:
    ms = curve("fcfs", 8)
    assert capacity(ms, settings(axis="input_len"), [TTFT_LIMIT]) is None
    assert capacity(ms, settings(), []) is None


def test_an_unmeasured_metric_is_not_judged() -> None:
    cap = capacity(
        curve("fcfs", 8) + curve("lpm", 32), settings(), [Bound(metric="p99_itl_ms", max=5)]
    )
    assert cap is not None
    assert all(a.missing == ["p99_itl_ms"] for a in cap.arms)
    assert cap.comparisons[0].outcome is CapacityOutcome.NOT_JUDGED


def rec(i: int, ttft: float, e2e: float, out: int = 11, err: str = "") -> RequestRecord:
    return RequestRecord(
        index=i, start=0.1 * i, ttft=ttft, e2e=e2e, prompt_tokens=10, output_tokens=out, error=err
    )


def test_goodput_counts_requests_that_meet_each_per_request_bound() -> None:
    bounds = [
        Bound(metric="p99_ttft_ms", max=100.0),
        Bound(metric="mean_tpot_ms", max=10.0),
        Bound(metric="output_throughput", min=1.0),  # a cell's, not a request's
    ]
    assert [b.metric for b in per_request(bounds)] == ["p99_ttft_ms", "mean_tpot_ms"]
    records = [
        rec(0, 0.05, 0.10),  # TTFT 50 ms, TPOT 5 ms: good
        rec(1, 0.15, 0.20),  # TTFT 150 ms: not
        rec(2, 0.05, 0.25),  # TPOT 20 ms: not
        rec(3, 0.05, 0.10, err="boom"),  # failed
    ]
    got = goodput(records, bounds)
    assert got is not None
    rate, share = got
    assert share == pytest.approx(1 / 3)
    assert rate == pytest.approx(1 / 0.45)  # the last request ends at 0.2 + 0.25 s
    # a simulator 10× faster: every time is 10× longer in the model
    slow_rate, slow_share = goodput(records, bounds, time_scale=10.0) or (0.0, 0.0)
    assert slow_share == 0.0 and slow_rate == 0.0


def test_goodput_reaches_the_arm_at_its_capacity() -> None:
    ms = curve("fcfs", 8) + curve("lpm", 32)
    good = {(m.cell_id, m.attempt): (m.point["concurrency"] / 4, 0.5) for m in ms}
    cap = capacity(ms, settings(), [TTFT_LIMIT], good)
    assert cap is not None and cap.goodput_from_records
    assert arm(cap, "fcfs").goodput == pytest.approx(4.0)  # at 16
    assert arm(cap, "lpm").good_share == pytest.approx(0.5)


def test_comparison_words_give_the_ratio_and_its_interval() -> None:
    base = ArmCapacity(arm="fcfs", points=5, lo=16, hi=64, estimate=25.0)
    cand = ArmCapacity(arm="lpm", points=5, lo=64, hi=256, estimate=35.0)
    c = compare_capacity(base, cand)
    assert c.outcome is CapacityOutcome.HIGHER
    text = comparison_words(c, "concurrency")
    assert text.startswith("**`lpm` sustains 1.4× the concurrency of `fcfs` within the SLO**")
    assert "between 1× and 16×" in text


CAPACITY_SPEC = """
experiment: capacity
title: Capacity under an SLO, rehearsed
model: {path: /models/tiny}
hardware: {gpu: NVIDIA H200, count: 1}
engine: {kind: sglang, args: {tp: 1, chunked_prefill_size: 512}}
arms:
  slow: {moe_runner_backend: flashinfer_cutlass}
  fast: {moe_runner_backend: flashinfer_cutedsl}
sweep: {concurrency: [1, 4, 16, 64]}
workload: {input_len: 256, output_len: 8, num_prompts: 64, warmup_requests: 1, seed: 3}
metrics: {primary: output_throughput, secondary: [p99_ttft_ms]}
slo: [{metric: p99_ttft_ms, max: 1200}]
verify: {threshold: 5%, max_runs: 2, noise: 5%}
limits: {startup_timeout: 60s, cell_timeout: 120s, request_timeout: 60s}
correctness: {enabled: false}
rehearsal:
  time_scale: 4
  note: prefill-bound TTFT that grows with the queue
  profile:
    name: capacity
    base: {step_ms: [[1, 10], [64, 14]], prefill_ms_per_token: 0.5}
    rules:
      - when: {moe_runner_backend: flashinfer_cutedsl}
        set: {prefill_ms_per_token: 0.125}
"""


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_rehearsal_with_an_slo_opens_with_capacity(tmp_path: Any) -> None:
    """Prefill-bound TTFT grows with the queue: about 0.55 s at 4 and 2.2 s at 16 on `slow`,
    four times less on `fast`, so under 1.2 s `slow` holds to 4 and `fast` to 16: `fast`
    sustains more concurrency, a bracket of at least 1× (16 against 16), and the document
    says so before the cell verdict."""
    import json
    import subprocess
    import sys

    spec = tmp_path / "capacity.yaml"
    spec.write_text(CAPACITY_SPEC)
    run_dir, report = tmp_path / "run", tmp_path / "r.md"
    res = subprocess.run(
        [sys.executable, "-m", "matrixrun", "run", str(spec), "--rehearse", "--out",
         str(run_dir), "--report", str(report)],
        capture_output=True, text=True, timeout=380, check=False,
    )  # fmt: skip
    assert report.exists(), res.stderr[-2000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    cap = verdict["capacity"]
    by_arm = {a["arm"]: a for a in cap["arms"]}
    assert (by_arm["slow"]["last_meeting"], by_arm["slow"]["first_missing"]) == (4, 16)
    assert (by_arm["fast"]["last_meeting"], by_arm["fast"]["first_missing"]) == (16, 64)
    assert cap["goodput_from_records"] and by_arm["fast"]["goodput"] > 0
    (c,) = cap["comparisons"]
    assert c["outcome"] == "higher" and c["ratio"] > 1.5
    text = report.read_text()
    head = text[: text.index("**Verdict on")]
    assert "**Capacity within the SLO**" in head
    assert "**`fast` sustains" in head and "the concurrency of `slow` within the SLO**" in head
    assert "## Within the SLO: `p99_ttft_ms` ≤ 1,200 ms" in text

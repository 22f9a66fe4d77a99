"""Capacity under an SLO (`analysis/capacity.py`, its words in `report/sections/slo.py`): on
synthetic measurements whose latency grows with load, the bracket, the estimate, goodput
from per-request records, the comparison's verdict and interval, and that a run's spread
widens the bracket instead of being ignored; the verify policy's narrowing of each arm's
bracket (`verify/capacity.py`) as a pure choice, and a rehearsal that narrows both."""

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
slo: [{metric: p99_ttft_ms, max: 1500}]
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
def test_a_rehearsal_with_an_slo_narrows_the_brackets_and_opens_with_capacity(
    tmp_path: Any,
) -> None:
    """Prefill-bound TTFT grows with the queue: about 0.55 s at 4, 1.0 s at 8 and 2.1 s at
    16 on `slow`, four times less on `fast` (1.2 s at 32, 2.4 s at 64). Under 1.5 s the grid
    brackets `slow` between 4 and 16 and `fast` between 16 and 64; the verify policy adds
    each bracket's geometric midpoint for that arm alone (8 for `slow`, 32 for `fast`),
    both come out within, so the brackets halve to 8–16 and 32–64 and the capacity verdict's
    interval narrows from 1×–16× to 2×–8×; the document opens with it, and says which loads
    were added and why."""
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
    plan = json.loads((run_dir / "plan.json").read_text())
    added = sorted(
        (c["x"], c["arm"], c["added_by"])
        for g in plan["groups"]
        for c in g["cells"]
        if c["added_by"]
    )
    assert added == [(8, "slow", "capacity"), (32, "fast", "capacity")]  # one arm each
    runs = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    off_grid = sorted((m["arm"], m["point"]["concurrency"], m["reason"], m["attempt"]) for m in runs
                      if m["point"]["concurrency"] in (8, 32))  # fmt: skip
    assert off_grid == [("fast", 32, "bisection", 1), ("fast", 32, "bisection", 2),
                        ("slow", 8, "bisection", 1), ("slow", 8, "bisection", 2)]  # fmt: skip
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    halved = {(e["arm"], tuple(e["why"]["bracket"])) for e in events
              if e.get("event") == "verify" and e["why"]["kind"] == "capacity"}  # fmt: skip
    assert halved == {("slow", (4.0, 16.0)), ("fast", (16.0, 64.0))}
    verdict = json.loads((run_dir / "verdict.json").read_text())
    cap = verdict["capacity"]
    by_arm = {a["arm"]: a for a in cap["arms"]}
    assert (by_arm["slow"]["lo"], by_arm["slow"]["hi"]) == (8, 16)
    assert (by_arm["fast"]["lo"], by_arm["fast"]["hi"]) == (32, 64)
    assert cap["goodput_from_records"] and by_arm["fast"]["goodput"] > 0
    (c,) = cap["comparisons"]
    assert c["outcome"] == "higher" and c["ratio"] > 1.5
    assert (c["ratio_lo"], c["ratio_hi"]) == (2.0, 8.0)
    text = report.read_text()
    head = text[: text.index("**Verdict on")]
    assert "**Capacity within the SLO**" in head
    assert "**`fast` sustains" in head and "the concurrency of `slow` within the SLO**" in head
    assert "(between 2× and 8× by the sweep's brackets)" in head
    assert "## Within the SLO: `p99_ttft_ms` ≤ 1,500 ms" in text
    assert (
        "Added for capacity (not in the spec's grid, measured by the verify policy to narrow "
        "the brackets above, as it bisects a crossover): `slow` at concurrency 8 (the "
        "geometric midpoint of 4–16): within the SLO there; `fast` at concurrency 32 (the "
        "geometric midpoint of 16–64): within the SLO there."
    ) in text
    assert "(capacity midpoint; same warm server" in text  # its second run, in the rerun log
    assert "was measured there" not in text  # one arm by design: not a half-measured midpoint


# --------------------------------------------------------------------------- narrowing


PICK_SPEC = """
experiment: capacity-pick
title: capacity narrowing, unit tests
model: {{path: /models/m}}
hardware: {{gpu: H200, count: 1}}
arms:
  fcfs: {{schedule_policy: fcfs}}
  lpm: {{schedule_policy: lpm}}
sweep: {{concurrency: [1, 4, 16, 64]}}
workload: {{input_len: 16, output_len: 8, num_prompts: 256}}
metrics: {{primary: output_throughput, secondary: [p99_ttft_ms]}}
{slo}
verify: {{threshold: 3%, surprise: 90%, max_runs: 3, bisect: {bisect}}}
correctness: {{enabled: false}}
"""
SLO = "slo: [{metric: p99_ttft_ms, max: 2000}]"


def picking(bisect: int = 1, slo: str = SLO) -> tuple[Any, Any]:
    from matrixrun.plan import expand
    from matrixrun.spec import parse_spec

    spec = parse_spec(PICK_SPEC.format(slo=slo, bisect=bisect))
    return spec, expand(spec)


def run_of(plan: Any, arm: str, x: float, ttft: float, attempt: int = 1) -> Measurement:
    """One run of the plan's cell (`arm` at concurrency `x`, grid or added) with p99 TTFT
    `ttft` ms, on the group's `attempt`-th launch."""
    c = next(c for c in plan.cells() if c.arm == arm and c.x == x)
    group = next(g.group_id for g in plan.groups if c in g.cells)
    m = meas(arm, x, ttft, attempt=attempt)
    return m.model_copy(
        update={
            "cell_id": c.cell_id,
            "point_id": c.point_id,
            "group_id": group,
            "point": c.point,
            "instance": f"{group}#{attempt}",
            "started_at": "2025-01-01T00:00:00.000000Z",
            "finished_at": "2025-01-01T00:02:00.000000Z",  # 120 s: what a new cell costs
        }
    )


def knees(plan: Any, fcfs: dict[int, float], lpm: float = 200.0) -> list[Measurement]:
    """First runs: fcfs's TTFT as given, lpm's flat (it holds everywhere: no bracket)."""
    return [run_of(plan, "fcfs", x, v) for x, v in fcfs.items()] + [
        run_of(plan, "lpm", x, lpm) for x in (1, 4, 16, 64)
    ]


def test_a_capacity_bracket_gets_its_midpoint_for_that_arm_only() -> None:
    """fcfs holds at 16 (800 ms) and misses at 64 (12.8 s): its capacity bracket 16–64
    gets √(16·64) = 32, for fcfs alone, on fcfs's group, marked as capacity's; lpm holds at
    every load (no upper end) and gets nothing."""
    from matrixrun.core.rerun_reason import WhyKind
    from matrixrun.verify import Policy
    from matrixrun.verify.capacity import choose

    spec, plan = picking()
    ms = knees(plan, {1: 200.0, 4: 200.0, 16: 800.0, 64: 12800.0})
    policy = Policy(spec, plan)
    new, near = choose(spec, plan, policy.settings, ms)
    assert near == []
    (p,) = new
    assert (p.cell.arm, p.cell.x, p.cell.added_by, p.bracket) == ("fcfs", 32, "capacity", (16, 64))
    assert plan.group(p.group_id).arm == "fcfs"
    assert p.cost == 120.0 and p.why.kind is WhyKind.CAPACITY
    # through the policy: a `bisection` pick of stage 2, adopted into the plan when measured
    picks = [p for _, ps in policy.next_round(1, ms) for p in ps if p.reason == "bisection"]
    assert [(p.cell.arm, p.cell.x, p.why.bracket) for p in picks] == [("fcfs", 32, (16.0, 64.0))]
    assert [c.x for c in policy.adopt(picks[0].cell)] == [32]
    assert [c.x for c in plan.group(p.group_id).cells] == [1, 4, 16, 32, 64]


def test_the_bracket_halves_per_midpoint_within_verify_bisect() -> None:
    """32 comes out beyond (4 s): the bracket is 16–32. With bisect 1 the grid interval
    16–64 has had its midpoint; with bisect 2 the next is √(16·32) = 23."""
    from matrixrun.verify import Policy
    from matrixrun.verify.capacity import choose

    for bisect, then in ((1, []), (2, [23])):
        spec, plan = picking(bisect=bisect)
        ms = knees(plan, {1: 200.0, 4: 200.0, 16: 800.0, 64: 12800.0})
        policy = Policy(spec, plan)
        (p,) = choose(spec, plan, policy.settings, ms)[0]
        policy.proposed = {p.cell.cell_id: p}
        policy.adopt(p.cell)
        ms += [run_of(plan, "fcfs", 32, 4000.0, a) for a in (1, 2)]
        new, _ = choose(spec, plan, policy.settings, ms)
        assert [(c.cell.x, c.bracket) for c in new] == [(x, (16, 32)) for x in then]


def test_a_load_within_noise_of_the_bound_is_run_again_not_bisected() -> None:
    """Two runs per load spread ±10%: at 16 fcfs's runs are 1,800 and 2,200 ms, their mean
    (1,990 ms) under 2 s but its interval across it — neither a pass nor a fail. So the
    bracket that counts is 4–64 with 16 inside: 16 gets a run more (its own interval
    narrows), and no midpoint is added while a load inside is unclear."""
    from matrixrun.core.rerun_reason import WhyKind
    from matrixrun.verify import Policy
    from matrixrun.verify.capacity import choose

    spec, plan = picking()
    ms = []
    for arm, ttft in (("fcfs", {1: 200.0, 4: 200.0, 16: 2000.0, 64: 12800.0}), ("lpm", {})):
        for x in (1, 4, 16, 64):
            v = ttft.get(x, 200.0)
            ms += [run_of(plan, arm, x, v * f, a) for a, f in ((1, 0.9), (2, 1.1))]
    policy = Policy(spec, plan)
    new, near = choose(spec, plan, policy.settings, ms)
    assert new == []
    assert [(c.arm, c.x, w.kind, w.bracket) for c, w in near] == [
        ("fcfs", 16, WhyKind.CAPACITY_NEAR, (4.0, 64.0))
    ]
    picks = {(p.cell.arm, p.cell.x): p for _, ps in policy.next_round(1, ms) for p in ps}
    assert picks[("fcfs", 16)].why.kind is WhyKind.CAPACITY_NEAR
    assert not any(p.reason == "bisection" for p in picks.values())


def test_no_capacity_narrowing_without_an_slo_or_with_bisection_off() -> None:
    from matrixrun.verify import Policy
    from matrixrun.verify.capacity import choose

    for bisect, slo in ((1, ""), (0, SLO)):
        spec, plan = picking(bisect=bisect, slo=slo)
        ms = knees(plan, {1: 200.0, 4: 200.0, 16: 800.0, 64: 12800.0})
        assert choose(spec, plan, Policy(spec, plan).settings, ms) == ([], [])


def test_a_load_still_within_noise_at_max_runs_has_its_gaps_bisected() -> None:
    """16 has had its three runs (max_runs) and is still within noise of 2 s: the capacity
    is there, to within the noise, so what is left to narrow is the grid's spacing on either
    side of it — 4–16 gets 8 and 16–64 gets 32, for fcfs, and 16 gets no run more."""
    from matrixrun.verify import Policy
    from matrixrun.verify.capacity import choose, gaps

    spec, plan = picking()
    ms = []
    for arm, ttft in (("fcfs", {1: 200.0, 4: 200.0, 16: 2000.0, 64: 12800.0}), ("lpm", {})):
        for x in (1, 4, 16, 64):
            v = ttft.get(x, 200.0)
            spread = (0.9, 1.1, 1.0) if (arm, x) == ("fcfs", 16) else (0.9, 1.1)
            ms += [run_of(plan, arm, x, v * f, a) for a, f in enumerate(spread, 1)]
    policy = Policy(spec, plan)
    new, near = choose(spec, plan, policy.settings, ms)
    assert [(p.cell.arm, p.cell.x, p.bracket) for p in new] == [
        ("fcfs", 8, (4.0, 16.0)),
        ("fcfs", 32, (16.0, 64.0)),
    ]
    assert [(c.x, w.x) for c, w in near] == [(16, 16.0)]  # wanted, but `want` stops at max_runs
    picks = {(p.cell.arm, p.cell.x) for _, ps in policy.next_round(1, ms) for p in ps}
    assert ("fcfs", 16) not in picks and {("fcfs", 8), ("fcfs", 32)} <= picks
    # the rule by itself: nothing inside → the bracket; inside, not yet stuck → nothing
    arm = ArmCapacity(arm="fcfs", lo=4, hi=64, unclear=[16])
    assert gaps(arm, [1, 4, 16, 64], stuck=False) == []
    assert gaps(arm, [1, 4, 16, 64], stuck=True) == [(4, 16), (16, 64)]
    assert gaps(ArmCapacity(arm="fcfs", lo=16, hi=64), [1, 4, 16, 64], stuck=False) == [(16, 64)]
    open_top = ArmCapacity(arm="fcfs", lo=16, unclear=[64])  # nothing surely misses
    assert gaps(open_top, [1, 4, 16, 64], stuck=True) == [(16, 64)]
    assert gaps(ArmCapacity(arm="fcfs", lo=64), [1, 4, 16, 64], stuck=True) == []


def test_a_run_that_fell_behind_does_not_make_a_load_stuck() -> None:
    """As above, but one of 16's three runs fell behind its model (the simulator woke far
    too late: it carries no value, and the runner measures it again on a slower relaunch).
    The policy does not count it toward max_runs, so neither does the capacity rule: 16 has
    had two runs, not all three, and gets its third before any gap is bisected."""
    from matrixrun.core.keeping import fell_behind
    from matrixrun.verify import Policy
    from matrixrun.verify.capacity import choose

    spec, plan = picking()
    ms = []
    for arm, ttft in (("fcfs", {1: 200.0, 4: 200.0, 16: 2000.0, 64: 12800.0}), ("lpm", {})):
        for x in (1, 4, 16, 64):
            v = ttft.get(x, 200.0)
            spread = (0.9, 1.1, 1.0) if (arm, x) == ("fcfs", 16) else (0.9, 1.1)
            ms += [run_of(plan, arm, x, v * f, a) for a, f in enumerate(spread, 1)]
    i = next(
        i for i, m in enumerate(ms) if (m.arm, m.point["concurrency"], m.attempt) == ("fcfs", 16, 3)
    )
    late = {**ms[i].extra, "sim_engine_lateness_ms": {"max_ms": 1e6}}
    ms[i] = ms[i].model_copy(update={"extra": late})
    assert fell_behind(ms[i], "output_throughput")
    policy = Policy(spec, plan)
    new, near = choose(spec, plan, policy.settings, ms)
    assert new == []
    assert [(c.x, w.x) for c, w in near] == [(16, 16.0)]
    picks = {(p.cell.arm, p.cell.x) for _, ps in policy.next_round(1, ms) for p in ps}
    assert ("fcfs", 16) in picks and ("fcfs", 8) not in picks and ("fcfs", 32) not in picks

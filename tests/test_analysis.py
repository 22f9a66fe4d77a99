"""The verdict engine, by the rules of VERDICTS.md: plain numbers in, verdicts out.

The CuteDSL write-up (shared/examples/000_63e9b5e47fcf52b0.txt) is the reference case; each
other rule gets a small table.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from matrixrun.analysis import (
    AnalysisSettings,
    NoiseModel,
    analyse,
    arm_sample,
    compare,
    confirmed_warmup,
    crossover_estimate,
    effective_n,
    estimate_sigma,
    interval,
    judge,
    limiting_arm,
    look_of,
    pooled_sigma,
    quantile,
    runs_needed,
    warmup_gaps,
)
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import Metrics
from matrixrun.core.verdict import (
    ArmSample,
    CellNote,
    CheckOutcome,
    Comparison,
    Explanation,
    RerunKind,
    Sigma,
    Verdict,
)
from matrixrun.report import fmt, wording
from matrixrun.report.sections import noise

BASE, CAND = "cutlass", "cutedsl"
X = [1, 10, 64, 256, 1024]
BASELINE = [10.36, 38.46, 218.74, 718.83, 1603.04]
CANDIDATE = [10.07, 64.29, 249.23, 515.58, 796.93]


def meas(
    arm: str,
    x: float,
    value: float,
    *,
    metric: str = "output_throughput",
    instance: str | None = None,
    attempt: int = 1,
    reason: Any = "first",
    failed: int = 0,
    completed: int = 100,
    error: str | None = None,
    slice: str = "",
    point: dict[str, Any] | None = None,
    extra_metrics: dict[str, float] | None = None,
) -> Measurement:
    """One measurement with `metric` = value (throughputs default to 1.0 otherwise)."""
    point = point or {"concurrency": x}
    data: dict[str, Any] = {
        "duration": 10.0,
        "completed": completed,
        "failed": failed,
        "total_input_tokens": 1000,
        "total_output_tokens": 1000,
        "request_throughput": 1.0,
        "input_throughput": 1.0,
        "output_throughput": 1.0,
        "total_throughput": 1.0,
    }
    data[metric] = value
    data.update(extra_metrics or {})
    pid = f"{slice}/" + "/".join(f"{k}={v}" for k, v in sorted(point.items()))
    return Measurement(
        cell_id=f"{pid}/{arm}",
        point_id=pid,
        arm=arm,
        group_id=arm,
        slice=slice,
        point=point,
        attempt=attempt,
        instance=instance or f"{arm}#1",
        reason=reason,
        metrics=None if error and completed == 0 else Metrics.model_validate(data),
        error=error,
    )


def writeup(rerun: bool = True) -> list[Measurement]:
    ms = [meas(BASE, x, v) for x, v in zip(X, BASELINE, strict=True)]
    ms += [meas(CAND, x, v) for x, v in zip(X, CANDIDATE, strict=True)]
    if rerun:  # the write-up's warm rerun at 256, to test the JIT-warmup explanation
        ms.append(meas(CAND, 256, 515.77, attempt=2, reason="surprise"))
    return ms


def settings(**kw: Any) -> AnalysisSettings:
    return AnalysisSettings(baseline=BASE, **kw)


def text(c: Comparison) -> str:
    return wording.cell_text(c)


def sentence(v: Verdict, cand: str = "") -> str:
    return wording.overall(v.overall[cand or CAND], v.settings)


def warnings(v: Verdict) -> list[str]:
    return [noise.caveat(c, v) for c in v.caveats]


def notes(c: Comparison) -> list[str]:
    return [wording.cell_note(n, c) for n in c.notes]


def primary_cells(v: Verdict, slice_index: int = 0, cand_index: int = 0) -> list[Comparison]:
    mr = v.slices[slice_index].candidates[cand_index].metrics[0]
    return [c for s in mr.series for c in s.cells]


# --------------------------------------------------------------------------- the write-up


def test_writeup_with_its_warm_rerun_is_mixed_with_crossover_near_95() -> None:
    """The only σ this data has is one warm repeat pair at 256 (df = 1, within-instance).
    t(df=1) = 12.7 inflates it, but σ is so small (0.026%) that the large changes still clear
    the 3% margin; the verdicts say provisional (n = 1) and the σ statement and warnings say
    within-instance, may understate — the claims go no further than the data."""
    v = analyse(writeup(), settings())
    sigma = v.sigma[0]
    assert sigma.source == "warm" and sigma.df == 1
    assert sigma.value == pytest.approx(abs(math.log(515.77 / 515.58)) / math.sqrt(2))
    assert noise.sigma_text(sigma, short=True) == "σ ≈ 0.026% on only 1 df"
    assert noise.sigma_text(sigma).startswith(
        "σ ≈ 0.026% on only 1 df (warm repeats on the same server: within-instance only, may "
        "understate): too few to know the noise"
    )
    texts = [text(c) for c in primary_cells(v)]
    assert texts == [
        "~ −2.8% [−3.3, −2.3] n=1/1 undecided (provisional; small change)",
        "+67.2% [+66.4, +67.9] n=1/1 better (provisional)",
        "+13.9% [+13.4, +14.5] n=1/1 better (provisional)",
        "−28.3% [−28.6, −28.0] n=1/2 worse (provisional)",
        "−50.3% [−50.5, −50.1] n=1/1 worse (provisional)",
    ]
    series = v.slices[0].candidates[0].metrics[0].series[0]
    assert [(r.verdict, r.x_from, r.x_to) for r in series.regimes] == [
        ("undecided", 1, 1),
        ("better", 10, 64),
        ("worse", 256, 1024),
    ]
    (cross,) = series.crossovers
    assert (cross.x_lo, cross.x_hi, cross.direction) == (64, 256, "better_to_worse")
    assert cross.estimate == pytest.approx(94.6, abs=0.1)
    assert wording.crossover(cross, "concurrency") == (
        "crossover between concurrency 64 and 256 (≈ 95, interpolated in log concurrency)"
    )
    ov = v.overall[CAND]
    assert ov.verdict == "mixed" and ov.provisional
    assert "crossover between concurrency 64 and 256 (≈ 95" in sentence(v)
    assert "Provisional" in sentence(v)
    assert sentence(v).endswith(
        "σ comes from warm repeats only (within-instance), which may understate."
    )
    assert [c.kind for c in v.caveats][:2] == ["warm_sigma", "sigma_df1"]
    assert "comes from warm repeats on the same server" in warnings(v)[0]
    assert "df = 1 (t = 12.7)" in warnings(v)[1]


def test_writeup_rerun_confirms_the_256_slowdown_is_not_warmup() -> None:
    v = analyse(writeup(), settings())
    (rerun,) = v.reruns
    assert rerun.kind == RerunKind.WARM and rerun.reason == "surprise" and rerun.matches_first
    assert rerun.change_vs_first == pytest.approx(515.77 / 515.58 - 1)
    assert (rerun.tests, rerun.outcome) == (Explanation.WARMUP, CheckOutcome.FALSIFIED)
    assert rerun.candidate == CAND and rerun.alone == pytest.approx(515.77 / 718.83 - 1)
    cell_256 = primary_cells(v)[3]
    assert cell_256.verdict == "worse" and cell_256.candidate.n == 2


def test_writeup_without_rerun_or_prior_has_no_noise_estimate() -> None:
    """n = 1 everywhere and no prior: nothing can be decided, however large the change."""
    v = analyse(writeup(rerun=False), settings())
    assert v.sigma[0].source == "none"
    cells = primary_cells(v)
    assert all(c.verdict == "undecided" and c.notes[0] == CellNote.NO_NOISE for c in cells)
    assert text(cells[1]) == "~ +67.2% n=1/1 undecided (no noise estimate)"
    assert v.overall[CAND].verdict == "undecided"
    assert "no noise estimate" in sentence(v)


def test_writeup_with_only_a_declared_prior_is_still_mixed() -> None:
    """A declared 2% prior (normal quantile) gives ±5.5% intervals at n = 1/1: the four large
    changes stay decided; −2.8% at concurrency 1 includes 0, so no 'small change' note."""
    v = analyse(writeup(rerun=False), settings(noise=0.02))
    assert v.sigma[0].source == "prior" and v.sigma[0].df is None
    assert [c.verdict for c in primary_cells(v)] == [
        "undecided",
        "better",
        "better",
        "worse",
        "worse",
    ]
    assert not primary_cells(v)[0].small_change
    assert v.overall[CAND].verdict == "mixed"
    assert v.slices[0].candidates[0].metrics[0].series[0].crossovers[0].x_lo == 64


def test_writeup_rerun_beats_the_prior_as_sigma_source_and_warns_it_is_smaller() -> None:
    v = analyse(writeup(), settings(noise=0.02))
    assert v.sigma[0].source == "warm"
    assert any("less than half the declared prior" in w for w in warnings(v))


# --------------------------------------------------------------------------- cell rules


M = math.log1p(0.03)


@pytest.mark.parametrize(
    ("lo", "hi", "verdict", "small"),
    [
        (0.04, 0.06, "better", False),
        (-0.06, -0.04, "worse", False),
        (-0.02, 0.02, "same", False),
        (-0.01, 0.05, "undecided", False),  # straddles 0 and the margin
        (0.01, 0.05, "undecided", True),  # excludes 0, not yet past the margin
        (-0.05, -0.01, "undecided", True),
        (0.005, 0.02, "same", False),  # excludes 0 but inside the band: equivalent
        (M, 0.06, "undecided", True),  # touching the margin is not beyond it
        (-0.05, 0.05, "undecided", False),
    ],
)
def test_judge_tost_boundaries(lo: float, hi: float, verdict: str, small: bool) -> None:
    assert judge(lo, hi, 0.03) == (verdict, small)


def sig(value: float | None, df: float | None = 10) -> Any:
    """A σ of one run on a fresh launch: all of it launch variance on `df` launch df, or (df
    None) a declared prior taken as known."""
    if value is None:
        return Sigma(metric="output_throughput", value=None, df=None, source="none")
    if df is None:
        return Sigma(metric="output_throughput", value=value, df=None, source="prior",
                     prior=math.expm1(value))  # fmt: skip
    return Sigma(metric="output_throughput", value=value, df=df, source="fresh_server",
                 launch=value, launch_df=int(df) or 1)  # fmt: skip


def warm(value: float) -> Sigma:
    """A σ of warm repeats only: one run's noise `value`, no launch part."""
    return Sigma(metric="output_throughput", value=value, df=10, source="warm",
                 run=value, run_df=10)  # fmt: skip


def cell(
    base: list[float],
    cand: list[float],
    sigma: float | None = 0.01,
    metric: str = "output_throughput",
    **kw: Any,
) -> Comparison:
    # every run on a server of its own (the fresh-server σ counts them all)
    bs = [meas(BASE, 8, v, metric=metric, instance=f"{BASE}#{i}") for i, v in enumerate(base)]
    cs = [meas(CAND, 8, v, metric=metric, instance=f"{CAND}#{i}") for i, v in enumerate(cand)]
    s = settings(**kw)
    return compare(
        arm_sample(BASE, bs, metric),
        arm_sample(CAND, cs, metric),
        NoiseModel.of(sig(sigma), s, metric=metric),
        s,
    )


@pytest.mark.parametrize(
    ("base", "cand", "provisional"),
    [([100.0], [110.0], True), ([100.0, 100.0], [110.0], True), ([100.0] * 2, [110.0] * 2, False)],
)
def test_provisional_when_either_arm_has_n_1(
    base: list[float], cand: list[float], provisional: bool
) -> None:
    c = cell(base, cand)
    assert c.provisional is provisional
    assert ("provisional" in text(c)) is provisional


@pytest.mark.parametrize(
    ("instances", "n_eff"), [(["a", "b", "c"], 3.0), (["a", "a"], 1.0), (["a", "a", "b"], 1.8)]
)
def test_effective_n_counts_repeats_on_one_server_once(instances: list[str], n_eff: float) -> None:
    assert effective_n(instances) == pytest.approx(n_eff)


def test_warm_repeats_do_not_narrow_a_fresh_server_interval() -> None:
    """Two runs of each arm on one server each: with the server-to-server σ the interval is
    that of one run per arm (the server's own offset is not averaged away), and it says so;
    with a warm σ (within-server) the repeats count."""
    bs = [meas(BASE, 8, 100.0, attempt=i + 1) for i in range(2)]
    cs = [meas(CAND, 8, 110.0, attempt=i + 1) for i in range(2)]
    fresh = compare(arm_sample(BASE, bs, "output_throughput"),
                    arm_sample(CAND, cs, "output_throughput"),
                    NoiseModel.of(sig(0.02), settings()), settings())  # fmt: skip
    half = quantile(0.95, 10) * 0.02 * math.sqrt(2)
    assert fresh.d_hi - fresh.d_lo == pytest.approx(2 * half)
    assert CellNote.ONE_SERVER in fresh.notes
    assert any("count once" in n for n in notes(fresh))
    warm_sigma = Sigma(metric="output_throughput", value=0.02, df=10, source="warm",
                       run=0.02, run_df=10)  # fmt: skip
    warm = compare(arm_sample(BASE, bs, "output_throughput"),
                   arm_sample(CAND, cs, "output_throughput"),
                   NoiseModel.of(warm_sigma, settings()), settings())  # fmt: skip
    assert warm.d_hi - warm.d_lo == pytest.approx(2 * half / math.sqrt(2))


def test_the_verdict_warns_when_warm_repeats_counted_once() -> None:
    """The write-up plus a fresh-server replicate of the baseline at 256: σ is fresh-server,
    and the candidate's warm rerun at 256 counts once, which the verdict's warnings say."""
    ms = [*writeup(), meas(BASE, 256, 712.0, instance=f"{BASE}#2", attempt=2)]
    v = analyse(ms, settings())
    assert v.sigma[0].source == "fresh_server"
    cell_256 = next(c for c in primary_cells(v) if c.x == 256)
    assert CellNote.ONE_SERVER in cell_256.notes and cell_256.candidate.n == 2
    assert any("1 of 5 cells have an arm with repeats on one server" in w for w in warnings(v))
    assert not any(CellNote.ONE_SERVER in c.notes for c in primary_cells(v) if c.x != 256)


def test_warmup_gaps_are_signed_by_the_metric() -> None:
    """Later runs on the same server against the first: + = better, so a latency that falls
    is a positive gap; a repeat on another server is no pair."""
    ms = [
        meas(CAND, 8, 90.0),
        meas(CAND, 8, 100.0, attempt=2),
        meas(CAND, 8, 101.0, attempt=3, instance=f"{CAND}#2"),
        meas(BASE, 8, 50.0, metric="mean_tpot_ms"),
        meas(BASE, 8, 40.0, metric="mean_tpot_ms", attempt=2),
    ]
    gaps = warmup_gaps(ms, "output_throughput")
    assert gaps[CAND].gap == pytest.approx(math.log(100 / 90)) and gaps[CAND].pairs == 1
    assert warmup_gaps(ms, "mean_tpot_ms")[BASE].gap == pytest.approx(math.log(50 / 40))


def penalised_tie(warm: bool) -> list[Measurement]:
    """A true tie whose candidate runs 15% slow on the first run of a cell on each server:
    three servers per arm, four points; with `warm`, one warm rerun of the candidate at 8
    and at 16 (on its first server) that shows it."""
    ms = []
    for x in (8, 16, 32, 64):
        for k, base, cold in ((1, 100.0, 85.0), (2, 101.0, 86.0), (3, 100.5, 85.3)):
            ms.append(meas(BASE, x, base, instance=f"{BASE}#{k}", attempt=k))
            ms.append(meas(CAND, x, cold, instance=f"{CAND}#{k}", attempt=k))
    if warm:
        ms += [meas(CAND, x, 100.2, attempt=4, reason="surprise") for x in (8, 16)]
    return ms


def test_a_verdict_confirmed_warmup_could_explain_is_not_confident() -> None:
    """The candidate's later runs on a server beat its first by 17%, far beyond noise: its
    cold first runs make it look worse everywhere, and corrected for them it is not worse, so
    no cell says worse; each cell and the verdict's warnings name the warmup. Without the warm
    reruns nothing reveals it and the cold runs read as worse (the bias this check is for)."""
    cold = analyse(penalised_tie(warm=False), settings())
    assert {c.verdict for c in primary_cells(cold)} == {"worse"}
    v = analyse(penalised_tie(warm=True), settings())
    assert v.sigma[0].source == "fresh_server"
    unrerun = [c for c in primary_cells(v) if c.x in (32, 64)]
    assert [c.verdict for c in unrerun] == ["undecided", "undecided"]
    # at 64 the run noise rests on under one df of its own (the weighted fit gives the quiet
    # points' rows the leverage): inconclusive before any warmup check; at 32 the warmup decides
    assert unrerun[0].notes[0] == CellNote.WARMUP
    assert notes(unrerun[0])[0].startswith("first-run warmup could account for it")
    assert "3 of its 3 run(s) here were first on their server" in notes(unrerun[0])[0]
    assert any(w.startswith(f"first-run warmup on {CAND}") for w in warnings(v))


def test_a_warm_rerun_within_noise_confirms_no_warmup() -> None:
    """A 4% gain (beyond the 3% margin) with a σ of several percent is what noise does: no
    warmup is confirmed, and the verdicts stand as without the rerun's pairing."""
    ms = [
        meas(arm, x, v, instance=f"{arm}#{k}", attempt=k)
        for x in (8, 16)
        for k, (b, c) in enumerate(((100.0, 80.0), (108.0, 88.0), (93.0, 75.0)), start=1)
        for arm, v in ((BASE, b), (CAND, c))
    ]
    ms.append(meas(CAND, 8, 83.3, attempt=4, reason="surprise"))
    v = analyse(ms, settings())
    gap = warmup_gaps(ms, "output_throughput")[CAND]
    assert gap.gap > math.log1p(0.03)
    assert not confirmed_warmup(gap, 0.03, v.sigma[0].value)
    assert not any("warmup" in w for w in warnings(v))
    assert not any(CellNote.WARMUP in c.notes for c in primary_cells(v))


def test_interval_uses_pooled_sigma_t_and_both_ns() -> None:
    c = cell([100.0, 100.0], [110.0, 110.0, 110.0], sigma=0.02)
    half = quantile(0.95, 10) * 0.02 * math.sqrt(1 / 2 + 1 / 3)
    assert c.d == pytest.approx(math.log(1.1))
    assert (c.d_lo, c.d_hi) == pytest.approx((math.log(1.1) - half, math.log(1.1) + half))
    assert c.change_lo == pytest.approx(math.expm1(math.log(1.1) - half))
    assert interval(0.1, 0.02, 10, 2, 3, 0.95) == pytest.approx((0.1 - half, 0.1 + half))


def test_geometric_mean_of_repeats() -> None:
    c = cell([100.0], [100.0, 121.0])
    assert c.candidate.mean == pytest.approx(110.0)
    assert c.change == pytest.approx(0.10)


@pytest.mark.parametrize(
    ("metric", "base", "cand", "verdict", "shown"),
    [
        ("mean_ttft_ms", 100.0, 80.0, "better", "−20.0%"),  # latency down is better
        ("p99_itl_ms", 20.0, 25.0, "worse", "+25.0%"),
        ("output_throughput", 100.0, 80.0, "worse", "−20.0%"),
        ("request_throughput", 10.0, 12.5, "better", "+25.0%"),
    ],
)
def test_latency_metrics_signed_so_plus_is_better(
    metric: str, base: float, cand: float, verdict: str, shown: str
) -> None:
    c = cell([base, base], [cand, cand], metric=metric)
    assert c.verdict == verdict
    assert (c.d is not None and c.d > 0) is (verdict == "better")
    assert text(c).startswith(shown)
    # the shown interval is of the raw ratio, ordered low to high
    assert c.change is not None and c.change_lo is not None and c.change_hi is not None
    assert c.change_lo < c.change < c.change_hi


@pytest.mark.parametrize(
    ("cand_failed", "base_failed", "cand_value", "verdict"),
    [
        (5, 0, 120.0, "undecided"),  # 5% > 1%: cannot be called better
        (1, 0, 120.0, "better"),  # 1 of 101 ≈ 0.99% ≤ 1%: allowed
        (5, 0, 80.0, "worse"),  # failing and slower: still worse
        (0, 5, 80.0, "undecided"),  # the baseline cannot be called better either
        (0, 5, 120.0, "better"),
    ],
)
def test_failure_rate_rule(
    cand_failed: int, base_failed: int, cand_value: float, verdict: str
) -> None:
    bs = [meas(BASE, 8, 100.0, failed=base_failed), meas(BASE, 8, 100.0, failed=base_failed)]
    cs = [meas(CAND, 8, cand_value, failed=cand_failed)] * 2
    c = compare(
        arm_sample(BASE, bs, "output_throughput"),
        arm_sample(CAND, cs, "output_throughput"),
        NoiseModel.of(sig(0.01), settings()),
        settings(),
    )
    assert c.verdict == verdict
    if verdict == "undecided":
        assert "fails too many requests" in text(c)
        assert any("% of requests" in n for n in notes(c))


def test_failed_measurement_is_kept_shown_and_blocks_better() -> None:
    ms = [meas(BASE, 8, 100.0), meas(BASE, 8, 100.0, instance="cutlass#2")]
    ms += [
        meas(CAND, 8, 150.0),
        meas(CAND, 8, 0.0, completed=0, error="server died (OOM)", attempt=2),
    ]
    v = analyse(ms, settings())
    (c,) = primary_cells(v)
    assert c.candidate.n == 1 and c.candidate.failed_measurements == 1
    assert c.verdict == "undecided"
    assert any("OOM" in w for w in warnings(v))


def test_cell_where_every_candidate_run_failed() -> None:
    ms = [meas(BASE, 8, 100.0), meas(CAND, 8, 0.0, completed=0, error="timeout")]
    v = analyse(ms, settings(noise=0.02))
    (c,) = primary_cells(v)
    assert c.verdict == "undecided" and c.change is None
    assert text(c) == "~ n/a n=1/0 undecided (no successful measurement of the candidate)"


# --------------------------------------------------------------------------- σ


def test_pooled_sigma_sums_squares_and_degrees_of_freedom() -> None:
    g1 = [0.0, 0.02]
    g2 = [0.0, 0.01, 0.02]
    s, df = pooled_sigma([g1, g2, [5.0]])
    assert df == 1 + 2
    assert s == pytest.approx(math.sqrt((2 * 0.01**2 + 2 * 0.01**2) / 3))
    assert pooled_sigma([[1.0], [2.0]]) == (None, 0)


def test_sigma_is_pooled_across_cells_on_the_log_scale() -> None:
    """Two cells at very different scales with the same relative spread pool to one σ."""
    ms = [meas(BASE, 1, 10.0), meas(BASE, 1, 11.0, attempt=2)]
    ms += [meas(BASE, 64, 1000.0), meas(BASE, 64, 1100.0, attempt=2)]
    s = estimate_sigma(ms, "output_throughput")
    assert s.source == "warm" and s.df == 2
    assert s.value == pytest.approx(math.log(1.1) / math.sqrt(2))


@pytest.mark.parametrize(
    ("fresh", "warm", "prior", "source"),
    [
        (True, True, 0.05, "fresh_server"),
        (False, True, 0.05, "warm"),
        (False, False, 0.05, "prior"),
        (False, False, None, "none"),
    ],
)
def test_sigma_source_preference(fresh: bool, warm: bool, prior: float | None, source: str) -> None:
    ms = [meas(BASE, 8, 100.0)]
    if warm:
        ms.append(meas(BASE, 8, 100.5, attempt=2, reason="surprise"))
    if fresh:  # an A/A run of the baseline on a relaunched server
        ms.append(meas(BASE, 8, 104.0, attempt=3, instance="cutlass#2", reason="aa"))
    s = estimate_sigma(ms, "output_throughput", prior)
    assert s.source == source
    if source == "fresh_server":
        # one cell on two launches (2 runs on #1, 1 on #2): run noise from the warm pair,
        # launch variance by moments from the launch contrast, SS = (2·1/3)·Δ², whose
        # expectation is σ_w² + (4/3)·σ_b²; the launch part has df = launches − groups = 1
        m1 = (math.log(100.0) + math.log(100.5)) / 2
        run2 = math.log(100.5 / 100.0) ** 2 / 2
        launch2 = (2 / 3 * (m1 - math.log(104.0)) ** 2 - run2) / (4 / 3)
        assert s.launch_df == 1 and s.run_df == pytest.approx(1)
        assert s.launch == pytest.approx(math.sqrt(launch2))
        assert s.value == pytest.approx(math.sqrt(launch2 + run2))
        assert s.df is not None and 1 <= s.df <= 2  # Satterthwaite of two 1-df parts
    if source == "prior":
        assert s.value == pytest.approx(math.log1p(0.05)) and s.df is None


def test_prior_uses_the_normal_quantile() -> None:
    assert quantile(0.95, None) == pytest.approx(1.95996, abs=1e-4)
    assert quantile(0.95, 1) == pytest.approx(12.706, abs=1e-3)


# --------------------------------------------------------------------------- along the axis


def test_crossover_formula_with_the_writeup_numbers() -> None:
    d64 = math.log(249.23 / 218.74)
    d256 = math.log(math.sqrt(515.58 * 515.77) / 718.83)
    expected = 64 * (256 / 64) ** (d64 / (d64 - d256))
    assert crossover_estimate(64, 256, d64, d256) == pytest.approx(expected)
    assert expected == pytest.approx(94.6, abs=0.1)
    assert crossover_estimate(256, 64, d256, d64) == pytest.approx(expected)
    assert crossover_estimate(1, 4, 0.1, -0.1) == pytest.approx(2.0)  # midpoint in log x
    assert crossover_estimate(1, 4, 0.1, 0.2) is None
    assert crossover_estimate(0, 4, 0.1, -0.1) is None


def test_non_monotone_sign_changes_say_re_measure() -> None:
    values = {1: 130.0, 8: 70.0, 64: 130.0}
    ms = [meas(BASE, x, 100.0) for x in values] + [meas(CAND, x, v) for x, v in values.items()]
    v = analyse(ms, settings(noise=0.02))
    series = v.slices[0].candidates[0].metrics[0].series[0]
    assert series.non_monotone and len(series.crossovers) == 2
    assert series.non_monotone
    assert "non-monotone, re-measure" in wording.regimes(series, "concurrency", 0.03)
    assert v.overall[CAND].verdict == "mixed"
    assert "non-monotone, re-measure" in sentence(v)


def test_worse_to_better_crossover_and_confident_cells_only() -> None:
    """An inconclusive cell between the two regimes sits inside the bracket."""
    values = {1: 70.0, 8: 101.0, 64: 130.0}
    ms = [meas(BASE, x, 100.0) for x in values] + [meas(CAND, x, v) for x, v in values.items()]
    v = analyse(ms, settings(noise=0.02))
    series = v.slices[0].candidates[0].metrics[0].series[0]
    (cross,) = series.crossovers
    assert (cross.direction, cross.x_lo, cross.x_hi) == ("worse_to_better", 1, 64)
    assert [r.verdict for r in series.regimes] == ["worse", "undecided", "better"]


def test_other_point_keys_make_separate_series() -> None:
    ms = []
    for length in (128, 1024):
        for x, cand in ((1, 130.0), (64, 70.0 if length == 1024 else 130.0)):
            p = {"concurrency": x, "input_len": length}
            ms += [meas(BASE, x, 100.0, point=p), meas(CAND, x, cand, point=p)]
    v = analyse(ms, settings(noise=0.02))
    series = v.slices[0].candidates[0].metrics[0].series
    assert [s.fixed for s in series] == [{"input_len": 128}, {"input_len": 1024}]
    assert [len(s.crossovers) for s in series] == [0, 1]
    assert v.overall[CAND].verdict == "mixed"


# --------------------------------------------------------------------------- overall


def repeated(
    base: float, cands: dict[int, float], n: int = 3, noise: float = 0.0
) -> list[Measurement]:
    """n runs per arm per point, each on its own fresh server, with a fixed small jitter."""
    out = []
    for x, c in cands.items():
        for k in range(n):
            j = 1 + noise * (k - (n - 1) / 2)
            out.append(meas(BASE, x, base * j, attempt=k + 1, instance=f"b#{k}"))
            out.append(meas(CAND, x, c * j, attempt=k + 1, instance=f"c#{k}"))
    return out


@pytest.mark.parametrize(
    ("cands", "expected"),
    [
        ({1: 100.5, 8: 99.8, 64: 100.2}, "same"),
        ({1: 100.5, 8: 110.0, 64: 120.0}, "better"),
        ({1: 90.0, 8: 99.9, 64: 80.0}, "worse"),
        ({1: 90.0, 8: 100.0, 64: 120.0}, "mixed"),
        ({1: 102.5, 8: 103.0, 64: 102.8}, "undecided"),
    ],
)
def test_overall_verdicts(cands: dict[int, float], expected: str) -> None:
    v = analyse(repeated(100.0, cands, noise=0.01), settings())
    ov = v.overall[CAND]
    assert v.sigma[0].source == "fresh_server"
    assert ov.verdict == expected
    printed = expected  # stored as the report prints it: one word
    assert wording.overall(ov, v.settings).startswith(printed)
    assert not ov.provisional
    if expected == "undecided":
        assert ov.runs_needed is not None
        said = wording.overall(ov, v.settings)
        if ov.runs_needed > 20:  # no advice past 20 runs per arm (issue 33), but the number kept
            assert f"more than 20 runs per arm (about {ov.runs_needed} if" in said
        else:
            assert f"about {ov.runs_needed} runs per arm" in said


def test_runs_needed_estimate() -> None:
    """Runs per arm in all, from Student's t on the df the cell would have: with a prior
    (known σ, normal quantile) and one run per arm on its own server it is the normal-theory
    n; repeats on one server are not counted as independent; never ≤ what the arms have."""
    m = math.log1p(0.03)
    s = AnalysisSettings(baseline="b")
    prior = Sigma(metric="x", value=math.log1p(0.01), df=None, source="prior", prior=0.01)
    z = quantile(0.95, None)
    sig = math.log1p(0.01)
    expect = math.ceil(2 * (z * sig / (m - 0.01)) ** 2)
    assert s.margin_for("x") == 0.03
    assert runs_needed(0.01, NoiseModel.of(prior, s), None, ["b1"], ["c1"]) == max(expect, 2)
    on_margin = runs_needed(m, NoiseModel.of(prior, s), None, ["b1"], ["c1"])
    assert on_margin is None
    none = Sigma(metric="x", value=None, df=None, source="none")
    assert runs_needed(0.01, NoiseModel.of(none, s), None, ["b1"], ["c1"]) is None
    # a launch-only σ with 2/2 runs on one server each: more runs on that server would not
    # help, so the estimate counts fresh launches and exceeds the 2 runs already there
    fresh = Sigma(metric="x", value=0.01, df=4, source="fresh_server", launch=0.01, launch_df=4)
    n = runs_needed(0.06, NoiseModel.of(fresh, s), None, ["b1", "b1"], ["c1", "c1"])
    assert n is not None and n > 2


def test_bonferroni_over_looks_widens_the_interval() -> None:
    ms = repeated(100.0, {8: 108.0}, n=3, noise=0.01)
    assert primary_cells(analyse(ms, settings()))[0].verdict == "better"
    wide = analyse(ms, settings(looks=20))
    assert wide.level == pytest.approx(1 - 0.05 / 20)
    assert primary_cells(wide)[0].verdict == "undecided"


def test_secondary_metrics_are_judged_but_the_headline_follows_the_primary() -> None:
    ms = []
    for k in range(2):
        for arm, tput, ttft in ((BASE, 100.0, 50.0), (CAND, 120.0, 80.0)):
            ms.append(
                meas(
                    arm,
                    8,
                    tput * (1 + 0.005 * k),
                    instance=f"{arm}#{k}",
                    attempt=k + 1,
                    extra_metrics={"median_ttft_ms": ttft * (1 + 0.005 * k)},
                )
            )
    v = analyse(ms, settings(secondary=["median_ttft_ms"]))
    cand = v.slices[0].candidates[0]
    assert [m.metric for m in cand.metrics] == ["output_throughput", "median_ttft_ms"]
    assert [m.overall.verdict for m in cand.metrics] == ["better", "worse"]
    assert cand.overall.verdict == "better" == v.overall[CAND].verdict
    assert [s.metric for s in v.sigma] == ["output_throughput", "median_ttft_ms"]


def test_slices_are_judged_apart_and_summed_up() -> None:
    ms = [meas(BASE, 8, 100.0, slice="h100"), meas(CAND, 8, 130.0, slice="h100")]
    ms += [meas(BASE, 8, 100.0, slice="b200"), meas(CAND, 8, 70.0, slice="b200")]
    v = analyse(ms, settings(noise=0.02))
    assert [s.slice for s in v.slices] == ["h100", "b200"]
    assert [s.candidates[0].overall.verdict for s in v.slices] == ["better", "worse"]
    assert v.overall[CAND].verdict == "mixed"
    assert "By slice: h100: better; b200: worse." in sentence(v)


def test_suspect_arm_by_correctness() -> None:
    v = analyse(writeup(), settings(correctness={CAND: 0.5}))
    assert v.slices[0].candidates[0].suspect
    assert "Suspect" in sentence(v)
    assert any("suspect" in w for w in warnings(v))


def test_multiplicity_is_stated_with_many_cells() -> None:
    cands = {x: 100.0 for x in range(1, 13)}
    v = analyse(repeated(100.0, cands, noise=0.01), settings())
    assert v.cells_judged == 12
    assert "about 0.6 may flag by chance" in noise.multiplicity(v)
    assert noise.multiplicity(v) in warnings(v)
    few = analyse(writeup(), settings())
    assert "multiplicity" not in [c.kind for c in few.caveats]
    assert noise.multiplicity(few) not in warnings(few)


# --------------------------------------------------------------------------- verify helpers


def test_surprising_cells_on_the_writeup() -> None:
    v = analyse(writeup(), settings())
    found = [(s, c, cell) for s, c, cell in v.comparisons() if cell.surprise]
    assert [cell.point["concurrency"] for _, _, cell in found] == [10, 64, 256, 1024]
    assert all(c == CAND for _, c, _ in found)


def test_inconclusive_cells_name_the_limiting_arm() -> None:
    def undecided(ms: list[Measurement]) -> list[Comparison]:
        return [c for _, _, c in analyse(ms, settings()).comparisons() if c.verdict == "undecided"]

    refs = undecided(writeup())
    assert [(r.point["concurrency"], r.limiting_arm) for r in refs] == [(1, "both")]
    assert refs[0].runs_needed == 2
    ms = [meas(BASE, 8, 100.0)] + [
        meas(CAND, 8, 101.0 + k, attempt=k + 1, instance=f"c#{k}") for k in range(3)
    ]
    (ref,) = undecided(ms)
    assert (ref.baseline.n, ref.candidate.n, ref.limiting_arm) == (1, 3, "baseline")


@pytest.mark.parametrize(
    ("nb", "nc", "arm"), [(1, 3, "baseline"), (3, 1, "candidate"), (2, 2, "both")]
)
def test_limiting_arm(nb: int, nc: int, arm: str) -> None:
    assert limiting_arm(nb, nc) == arm


# --------------------------------------------------------------------------- printing & JSON


def _worded(change: float, lo: float, hi: float, n: int, verdict: str) -> str:
    sample = ArmSample(arm="a", values=[1.0] * n, n=n, mean=1.0, instances=[], reasons=[])
    c = Comparison(point_id="p", point={}, x=None, baseline=sample, candidate=sample,
                   change=change, change_lo=lo, change_hi=hi, d=change, verdict=verdict,
                   confident=verdict in ("better", "worse"), provisional=False)  # fmt: skip
    return wording.cell_text(c)


def test_cell_text_matches_verdicts_md() -> None:
    assert _worded(-0.283, -0.310, -0.255, 2, "worse") == "−28.3% [−31.0, −25.5] n=2/2 worse"
    assert _worded(0.011, -0.030, 0.054, 3, "same") == "~ +1.1% [−3.0, +5.4] n=3/3 same"
    assert fmt.change(-0.0001) == "+0.0%"
    assert fmt.change(0.672) == "+67.2%"


def test_sigma_text() -> None:
    def words(value: float | None, df: float | None, source: str) -> str:
        return noise.sigma_text(Sigma(metric="m", value=value, df=df, source=source))

    assert words(0.012, 4, "fresh_server") == "σ = 1.2% (df = 4, fresh-server replicates)"
    assert words(0.02, None, "prior") == "σ = 2.0% (declared prior, not measured)"
    assert words(None, None, "none").startswith("no noise estimate")


def test_verdict_round_trips_through_json() -> None:
    v = analyse(writeup(), settings(secondary=["mean_ttft_ms"], noise=0.02))
    text = v.model_dump_json()
    assert "Infinity" not in text and "NaN" not in text
    assert Verdict.model_validate_json(text) == v


def test_equal_spending_splits_alpha_over_the_looks() -> None:
    equal = AnalysisSettings(baseline="b", looks=3)
    assert [equal.level_at(k) for k in (1, 2, 3)] == [pytest.approx(1 - 0.05 / 3)] * 3
    assert AnalysisSettings(baseline="b", looks=1).level == 0.95


def test_a_cells_look_counts_its_extra_server_instances() -> None:
    def arm(*instances: str) -> ArmSample:
        return ArmSample(arm="a", values=[1.0] * len(instances), n=len(instances), mean=1.0,
                         instances=list(instances), reasons=[])  # fmt: skip

    assert look_of(arm("b#1"), arm("c#1", "c#1"), 3) == 1  # a warm rerun is stage 1
    assert look_of(arm("b#1", "b#2"), arm("c#1"), 3) == 2
    assert look_of(arm("b#1", "b#2"), arm("c#1", "c#2", "c#3"), 3) == 3
    assert look_of(arm("b#1", "b#2", "b#3", "b#4"), arm("c#1"), 3) == 3  # capped at looks


def test_rerun_is_judged_against_its_noise_not_the_margin() -> None:
    """A replicate is set against what noise explains for one pair, z·√2·σ (here σ = 2%
    declared: ±5.7%), on the change as printed: −3.17% is within noise, though beyond ±3%;
    with a 0.5% σ the same rerun is beyond noise. No σ at all: no judgement."""
    from matrixrun.analysis.reruns import reruns

    first = meas("cand", 1, 250.83, instance="g#1")
    again = meas("cand", 1, 242.88, instance="g#2", attempt=2, reason="fresh_server")
    s = settings(margin=0.03)
    kw: dict[str, Any] = {"baseline": BASE, "surprise": 0.1}
    (r,) = reruns([first, again], NoiseModel.of(sig(None), s), {}, **kw)
    assert r.change_vs_first == pytest.approx(-0.0317, abs=1e-4)
    assert r.matches_first is None and r.noise_band is None
    prior = Sigma(metric="output_throughput", value=None, df=None, source="prior", prior=0.02)
    (r,) = reruns([first, again], NoiseModel.of(prior, s), {}, **kw)
    assert r.noise_band == pytest.approx(math.expm1(1.96 * math.sqrt(2) * math.log1p(0.02)))
    assert r.matches_first is True
    (r,) = reruns([first, again], NoiseModel.of(warm(0.005), s), {}, **kw)
    assert r.matches_first is False


def limited_cell(metric: str, cand_values: list[float], **extra: Any) -> Comparison:
    """A clear cell (3 fresh servers per arm, σ 1%) whose candidate runs carry `extra`."""
    bs = [meas(BASE, 8, 100.0, metric=metric, instance=f"{BASE}#{i}") for i in range(3)]
    cs = [
        meas(CAND, 8, v, metric=metric, instance=f"{CAND}#{i}").model_copy(update={"extra": extra})
        for i, v in enumerate(cand_values)
    ]
    return compare(
        arm_sample(BASE, bs, metric), arm_sample(CAND, cs, metric),
        NoiseModel.of(sig(0.01), settings(), metric=metric), settings(),
    )  # fmt: skip


def test_a_client_that_fell_behind_cannot_carry_a_verdict_its_lag_could_explain() -> None:
    """A metric the client's self-check flagged (its lag could have moved it by more than
    10%) carries no number (issue 44, `core.keeping`); a smaller bound only widens the cell."""
    lagging = {"client_check": {"client_bound": True, "affected": {"median_itl_ms": 0.3}}}
    c = limited_cell("median_itl_ms", [90.0] * 3, **lagging)  # −10%, but the bound is 30%
    assert c.verdict == "undecided" and c.candidate.n == 0
    small = {"client_check": {"client_bound": True, "affected": {"median_itl_ms": 0.08}}}
    c = limited_cell("median_itl_ms", [95.0] * 3, **small)  # −5%, the bound 8%
    assert c.verdict == "undecided" and c.leading_note == CellNote.CLIENT_BOUND
    assert c.candidate.client_bound == pytest.approx(0.08)
    assert "client's own lag (up to 8.0%)" in text(c)
    assert c.runs_needed is None  # more runs with the same client would not settle it
    # the same bound on another metric leaves this one alone
    other = {"client_check": {"client_bound": True, "affected": {"p99_ttft_ms": 0.3}}}
    assert limited_cell("median_itl_ms", [90.0] * 3, **other).verdict == "better"


def test_a_small_client_bound_leaves_a_clear_verdict() -> None:
    lagging = {"client_check": {"client_bound": True, "affected": {"output_throughput": 0.01}}}
    assert limited_cell("output_throughput", [130.0] * 3, **lagging).verdict == "better"


def test_a_capped_arm_cannot_be_called_better_on_latency_but_can_on_throughput() -> None:
    capped = {"capped": {"after_s": 40.0, "cut_requests": 28, "completed": 36}}
    latency = limited_cell("mean_ttft_ms", [50.0] * 3, **capped)  # −50%: flattered by the cap
    assert latency.verdict == "undecided" and latency.leading_note == CellNote.CAPPED
    from matrixrun.report.wording.verdicts import undecided

    said = undecided(latency)  # what took it away, not "on the margin" (its interval clears it)
    assert "hit the cell's time cap" in said and "on the margin" not in said
    rate = limited_cell("output_throughput", [130.0] * 3, **capped)
    assert rate.verdict == "better" and CellNote.CAPPED in rate.notes
    assert rate.candidate.capped == 3


def test_a_note_that_decides_the_verdict_leads_once() -> None:
    capped = {"capped": {"after_s": 40.0, "cut_requests": 28, "completed": 36}}
    c = limited_cell("mean_ttft_ms", [50.0] * 3, **capped)
    assert c.notes.count(CellNote.CAPPED) == 1 and c.notes[0] == CellNote.CAPPED


# --------------------------------------------------------------------------- noise model (#13)


def _launch_world(
    seed: int, launches: int, cells: int, sigma_b: float, sigma_w: float
) -> list[Measurement]:
    """One group measured on `launches` servers, every cell once per launch: the launch offset
    is shared by all cells of a launch."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ms = []
    for i in range(launches):
        b = rng.normal(0, sigma_b)
        for c in range(cells):
            x = 2**c
            v = 100.0 * math.exp(b + rng.normal(0, sigma_w))
            m = meas(BASE, x, v, instance=f"g#{i}", attempt=i + 1)
            ms.append(m.model_copy(update={"group_id": "g"}))
    return ms


def test_launch_df_counts_launches_not_cells() -> None:
    """Six cells on three launches of one group: σ_b has df = launches − groups = 2, however
    many cells share them (the old pooling counted 12)."""
    s = estimate_sigma(_launch_world(1, 3, 6, 0.03, 0.002), "output_throughput")
    assert s.launch_df == 2
    assert s.source == "fresh_server"
    assert s.df is not None and s.df < 4  # the launch part dominates: about its 2 df
    assert s.launch is not None and 0.005 < s.launch < 0.1


def test_prior_floor_holds_against_one_warm_pair() -> None:
    """The write-up's numbers ingested with --noise 2%: one warm pair (515.58, 515.77) must not
    set σ for every cell; the cell at concurrency 1 keeps about √2·2% per run pair."""
    ms = [meas(BASE, x, b) for x, b in zip(X, BASELINE, strict=True)]
    ms += [meas(CAND, x, c) for x, c in zip(X, CANDIDATE, strict=True)]
    ms.append(meas(CAND, 256, 515.77, attempt=2, reason="surprise"))
    v = analyse(ms, settings(noise=0.02))
    cell = next(c for _, _, c in v.comparisons() if c.x == 1)
    assert cell.floored
    assert cell.se == pytest.approx(math.sqrt(2) * math.log1p(0.02), rel=0.02)
    assert cell.verdict == "undecided"  # −2.8% with ±5.5%: not a verdict


def test_information_spending_sums_to_alpha_over_every_state() -> None:
    s = AnalysisSettings(baseline="b", looks=3, spending="information")
    alphas = [1 - s.level_at(k) for k in range(1, s.states + 1)]
    assert s.states == 5 and sum(alphas) == pytest.approx(0.05)
    assert alphas == sorted(alphas)  # O'Brien–Fleming shape: later states get more
    # a cell's level, read off the noise stage's table of state levels: its state is its runs
    none = Sigma(metric="x", value=None, df=None, source="none")
    model = NoiseModel.of(none, s)
    assert model.level_for(1, 1) == s.level_at(1) and model.level_for(2, 1) == s.level_at(2)
    assert model.level_for(3, 3) == s.level == model.level
    assert model.level_for(9, 9) == s.level  # past the last state: the last state's level
    equal = AnalysisSettings(baseline="b", looks=3)  # `equal` spending: the look decides
    by_look = NoiseModel.of(none, equal)
    assert [by_look.level_for(5, 5, k) for k in (1, 2, 3)] == [equal.level_at(k) for k in (1, 2, 3)]
    assert by_look.level_for(1, 1) == equal.level


def test_calibration_at_the_margin_in_a_launch_dominant_world() -> None:
    """Simulated check (seed 5, 300 cells): true effect exactly +margin, launch spread 3%,
    run noise 0.3%, 3 launches per arm and 4 cells: 'better' may not exceed 2.5% + 2.5 points
    of simulation error (the old cell-counting σ gave about 8%)."""
    import numpy as np

    rng = np.random.default_rng(5)
    wrong = total = 0
    m = math.log1p(0.03)
    for _ in range(75):
        ms = []
        for arm, shift in ((BASE, 0.0), (CAND, m)):
            for i in range(3):
                b = rng.normal(0, 0.03)
                for x in (1, 4, 16, 64):
                    v = 100.0 * math.exp(shift + b + rng.normal(0, 0.003))
                    ms.append(meas(arm, x, v, instance=f"{arm}#{i}", attempt=i + 1).model_copy(
                        update={"group_id": arm}))  # fmt: skip
        for _, _, c in analyse(ms, settings()).comparisons():
            total += 1
            wrong += c.verdict == "better"
    assert total == 300
    assert wrong / total <= 0.05


def test_a_fresh_server_rerun_of_an_ordinary_cell_tests_no_odd_server() -> None:
    """The real H200 run -6: the baseline at concurrency 1 re-measured on a fresh server as a
    σ replicate (60.96 vs 63.13 tok/s, the candidate 60.50: −2.5%, nothing surprising) was
    printed "odd server instance confirmed". A cell whose first run was not beyond the
    surprise threshold has no effect for an odd server to explain: it is a replicate. A
    surprising cell's fresh-server rerun still tests it (reproduced here: falsified)."""
    from matrixrun.analysis.reruns import reruns

    ordinary = [
        meas(BASE, 1, 63.13, instance="b#1"),
        meas(BASE, 1, 60.96, instance="b#2", attempt=2, reason="fresh_server"),
        meas(CAND, 1, 60.50, instance="c#1"),
    ]
    surprising = [
        meas(BASE, 8, 62.09, instance="b#1"),
        meas(CAND, 8, 466.0, instance="c#1"),
        meas(CAND, 8, 314.5, instance="c#2", attempt=2, reason="fresh_server"),
    ]
    ms = ordinary + surprising
    s = settings(margin=0.05, surprise=0.2, noise=0.14)
    cells = {("", CAND, c.point_id): c for c in primary_cells(analyse(ms, s))}
    noise = NoiseModel.of(warm(0.14), s)
    by_x = {
        r.point["concurrency"]: r for r in reruns(ms, noise, cells, baseline=BASE, surprise=0.2)
    }
    assert by_x[1].tests == Explanation.REPLICATE and by_x[1].outcome is None
    assert by_x[8].tests == Explanation.INSTANCE and by_x[8].outcome == CheckOutcome.FALSIFIED


def test_the_routine_replicates_line_counts_against_the_noise_it_names() -> None:
    """The H200 example printed "2 of 2 within ±5% of their first run (−18.53% to +30.38%)":
    counted against the noise band, worded as the margin. Now the words name the band."""
    from matrixrun.core.verdict import Rerun, RerunKind
    from matrixrun.report.sections.reruns import rerun_summary

    def rep(change: float, band: float | None) -> Rerun:
        return Rerun(slice="", arm=CAND, cell_id="c", candidate=CAND, point_id="p",
                     point={"concurrency": 8}, attempt=2, reason="undecided", instance="c#2",
                     kind=RerunKind.FRESH_SERVER, metric="output_throughput", value=1.0,
                     first_value=1.0, change_vs_first=change, noise_band=band,
                     matches_first=None if band is None else abs(change) <= band,
                     tests=Explanation.REPLICATE)  # fmt: skip

    line = rerun_summary([rep(-0.1853, 0.6), rep(0.3038, 0.6), rep(0.9, 0.6)])
    assert "2 of 3 within the noise of their first run" in line
    assert "±" not in line and "changes −18.53% to +90.00%" in line
    assert "no noise estimate" in rerun_summary([rep(0.02, None)])


def test_the_noise_is_estimated_once_and_every_cell_is_judged_with_that_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One pass (docs/architecture.md): per metric, σ, the warm-up gaps and (primary) the
    launch check are computed once, before any cell; every cell of the metric is compared
    with that one `NoiseModel`, and the reruns are set against the primary's."""
    from matrixrun import analysis
    from matrixrun.analysis import noise

    calls: list[str] = []

    def counted(name: str, real: Any) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            calls.append(name)
            return real(*args, **kw)

        return call

    for name in ("estimate_sigma", "warmup_gaps", "launch_check"):
        monkeypatch.setattr(noise, name, counted(name, getattr(noise, name)))
    seen: dict[str, set[int]] = {}
    real_compare, real_reruns = analysis.compare, analysis.reruns

    def compare(*args: Any, **kw: Any) -> Comparison:
        model: NoiseModel = args[2]
        calls.append("compare")
        seen.setdefault(model.metric, set()).add(id(model))
        return real_compare(*args, **kw)

    def reruns(*args: Any, **kw: Any) -> Any:
        model: NoiseModel = args[1]
        calls.append("reruns")
        seen.setdefault("reruns", set()).add(id(model))
        return real_reruns(*args, **kw)

    monkeypatch.setattr(analysis, "compare", compare)
    monkeypatch.setattr(analysis, "reruns", reruns)
    s = settings(secondary=["median_ttft_ms"])
    v = analyse(writeup(), s)
    metrics = 2
    assert calls.count("estimate_sigma") == calls.count("warmup_gaps") == metrics
    assert calls.count("launch_check") == 1
    first_cell = calls.index("compare")
    assert all(c == "compare" for c in calls[first_cell:-1]) and calls[-1] == "reruns"
    assert calls.count("compare") == 2 * len(X)  # every point, on both metrics
    assert all(len(ids) == 1 for ids in seen.values())  # one model per metric, never rebuilt
    assert seen["reruns"] == seen["output_throughput"]
    assert [s.metric for s in v.sigma] == ["output_throughput", "median_ttft_ms"]


def test_a_warm_up_of_one_arm_only_stays_a_warm_up_after_the_partner_check() -> None:
    """The candidate alone is 15% slow on each server's first run (a JIT of its own); its warm
    reruns at 8 and 16 are set aside there (cold compared with cold), and the baseline's
    partner checks at 8 and 16 show it does not warm up: the difference between the arms'
    warm-ups is the candidate's gap, so no cell says worse — the bias the check is for is not
    explained away by the partner check, at the checked points or elsewhere."""
    ms = penalised_tie(warm=True)
    ms += [meas(BASE, x, 100.4, attempt=4, reason="surprise") for x in (8, 16)]
    v = analyse(ms, settings())
    assert {(w.arm, w.x) for w in v.warm_aside} == {(CAND, 8.0), (CAND, 16.0)}
    cells = primary_cells(v)
    assert all(c.verdict != "worse" for c in cells)
    for c in cells:
        if c.x in (8, 16):
            assert c.candidate.n == 3 and "surprise" not in c.candidate.reasons
            assert c.baseline.n == 4  # the baseline's warm run shows no warm-up: it counts
    assert any(
        w.startswith(f"{CAND}'s warm runs at concurrency 8, 16 are left out") for w in warnings(v)
    )


def test_warm_runs_set_aside_do_not_enter_the_run_noise() -> None:
    """Both arms 40% slow on a server's first run at 16 only; each arm's warm run there would,
    pooled with the cold ones, read the step as run noise at 16 (and lend it along the axis):
    set aside, the run noise at 16 is the cold runs' own."""
    ms = []
    for x in (8, 16, 32):
        for k, jitter in ((1, 1.0), (2, 1.01), (3, 0.99)):
            for arm, level in ((BASE, 100.0), (CAND, 80.0)):
                cold = 0.6 if x == 16 else 1.0
                ms.append(meas(arm, x, level * jitter * cold, instance=f"{arm}#{k}", attempt=k))
    ms += [
        meas(arm, 16, v, attempt=4, reason="surprise") for arm, v in ((BASE, 100.5), (CAND, 80.2))
    ]
    v = analyse(ms, settings())
    assert {(w.arm, w.x) for w in v.warm_aside} == {(BASE, 16.0), (CAND, 16.0)}
    at16 = next(s for s in v.sigma[0].by_x if s.x == 16)
    assert at16.raw is None or at16.raw < 0.05
    c16 = next(c for c in primary_cells(v) if c.x == 16)
    assert c16.verdict == "worse" and CellNote.WARMUP not in c16.notes
    with_all = estimate_sigma(ms, "output_throughput")
    assert next(s for s in with_all.by_x if s.x == 16).run > 0.1  # what pooling would have read


def _shape_bound_warmup(
    base_warm_gap: float, cold: float = 0.6, cand: float = 50.0
) -> list[Measurement]:
    """Both arms slow on a server's first run at 16 only (×`cold`: a warm-up bound to the
    batch shape, every arm's), run noise about 11%, the candidate at `cand` against the
    baseline's 100 everywhere. The candidate's warm rerun at 16 gains its whole −ln(cold)
    (0.51 at 0.6); the baseline's partner run there gains `base_warm_gap`."""
    ms = []
    for x in (8, 16, 32):
        for k, jitter in ((1, 1.0), (2, 1.12), (3, 0.89)):
            for arm, level in ((BASE, 100.0), (CAND, cand)):
                slow = cold if x == 16 else 1.0
                ms.append(meas(arm, x, level * jitter * slow, instance=f"{arm}#{k}", attempt=k))
    ms.append(meas(CAND, 16, cand, instance=f"{CAND}#1", attempt=4, reason="surprise"))
    ms.append(
        meas(
            BASE,
            16,
            100.0 * cold * math.exp(base_warm_gap),
            instance=f"{BASE}#1",
            attempt=4,
            reason="surprise",
        )
    )
    return ms


def test_a_warm_up_confirmed_at_a_point_sets_every_arms_warm_runs_there_aside() -> None:
    """Like with like (issue 46): where the candidate's warm-up is confirmed at 16, the
    baseline's warm run there, which beat its first by more than the margin but on one pair
    within its noise, is set aside too — not kept to lift the baseline's mean against a
    candidate compared cold — and its gap there is evidence: the two arms' gaps (0.51, 0.20)
    differ by less than noise at the cell's level, so the cell is compared cold with cold and
    decided. Before, the baseline's warm run stayed in, the candidate's gap was applied whole
    and the cell was undecided by the warm-up check (tuning seed 4, `h200`, matrix 164)."""
    v = analyse(_shape_bound_warmup(0.2), settings())
    assert {(w.arm, w.x) for w in v.warm_aside} == {(BASE, 16.0), (CAND, 16.0)}
    c16 = next(c for c in primary_cells(v) if c.x == 16)
    assert c16.baseline.n == c16.candidate.n == 3
    assert c16.verdict == "worse" and CellNote.WARMUP not in c16.notes


def test_arms_that_warm_up_differently_beyond_noise_still_take_the_verdict_away() -> None:
    """The same, but the baseline's run at 16 shows no warm-up at all (a gap of 0, under the
    margin: kept, not set aside): the candidate's 0.51 is a warm-up of its own, applied whole,
    and the worse verdict it could account for is not confident."""
    v = analyse(_shape_bound_warmup(0.0), settings())
    assert {(w.arm, w.x) for w in v.warm_aside} == {(CAND, 16.0)}
    c16 = next(c for c in primary_cells(v) if c.x == 16)
    assert c16.verdict == "undecided" and c16.notes[0] == CellNote.WARMUP


def test_two_confirmed_warm_ups_differ_only_beyond_noise_at_the_cells_level() -> None:
    """Both arms' warm-ups at 16 confirmed (gaps 0.69 and 0.28, one pair each): their
    difference, 0.41, is beyond one-sided 95% of its noise (2σ√1 ≈ 0.36 at σ ≈ 11%) but not
    at the cell's own level (≈ 0.52), so it does not take the decided verdict away. At
    `WARMUP_Z` it did: two arms that warm up alike lost decided cells to chance differences
    of their single pairs (tuning seed 4, `h200`, matrix 139)."""
    v = analyse(_shape_bound_warmup(0.28, cold=0.5), settings())
    assert {(w.arm, w.x) for w in v.warm_aside} == {(BASE, 16.0), (CAND, 16.0)}
    c16 = next(c for c in primary_cells(v) if c.x == 16)
    assert c16.verdict == "worse" and CellNote.WARMUP not in c16.notes

"""The verify-policy benchmark's analytic ceiling: its chance formula must agree with the
product's own verdict rule, and the oracle must behave like an allocation (the closing note's
claim that the issue's target is out of reach rests on these numbers)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from matrixrun.analysis import judge

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import verdicts


@pytest.mark.parametrize(
    ("effect", "sigma", "n"),
    [(0.10, 0.05, 3), (-0.08, 0.03, 2), (0.0, 0.01, 4), (0.02, 0.008, 5), (0.3, 0.08, 1)],
)
def test_p_correct_matches_the_verdict_rule(effect: float, sigma: float, n: int) -> None:
    """Monte Carlo through `analysis.judge` with σ known: the closed form is the same rule."""
    rng = np.random.default_rng(7)
    sd = sigma * math.sqrt(2 / n)
    half = verdicts.Z95 * sd
    want = "same" if abs(effect) <= verdicts.MARGIN else "better" if effect > 0 else "worse"
    draws = rng.normal(math.log1p(effect), sd, size=20_000)
    hits = sum(judge(d - half, d + half, verdicts.MARGIN)[0] == want for d in draws)
    assert abs(hits / len(draws) - verdicts.p_correct(effect, sigma, n)) < 0.012


def test_p_correct_grows_with_runs_for_a_real_effect() -> None:
    chances = [verdicts.p_correct(0.08, 0.05, n) for n in range(1, 8)]
    assert chances == sorted(chances) and chances[-1] > chances[0] + 0.3


def test_oracle_spends_its_share() -> None:
    """A third of fixed 3's runs is the first pass: the oracle can add nothing. All of them:
    it places them at least as well as three runs everywhere."""
    first_pass = verdicts.ceiling(20, seed=3, share=1 / 3)
    assert first_pass.oracle == pytest.approx(first_pass.one_run)
    everything = verdicts.ceiling(20, seed=3, share=1.0)
    assert everything.oracle >= everything.fixed3 - 1e-9
    sixty = verdicts.ceiling(20, seed=3, share=0.6)
    assert first_pass.oracle < sixty.oracle < everything.oracle


def test_noise_worlds_draw_what_their_docstring_says() -> None:
    """verdicts13's worlds: launch-dominant has σ_b ≥ 1% ≥ 5·σ_w; heteroscedastic run noise
    grows 12× from concurrency 1 to 1024; a fifth of the cells sit at exactly ±margin; the
    band of such a cell is the gate's."""
    import verdicts13

    world, _, _ = verdicts13.draw("launch", np.random.default_rng(3))
    assert world.sigma_b >= 0.01 and world.sigma_w <= 0.005
    for seed in range(20):
        world, points, _ = verdicts13.draw("hetero", np.random.default_rng(seed))
        if 1024 in points:
            ratio = world.sigma_w_at[1024] / world.sigma_w_at[1]
            assert ratio == pytest.approx(12.0)
            break
    effects = [
        e
        for seed in range(40)
        for arm, row in verdicts13.draw("today", np.random.default_rng(seed))[0].effect.items()
        if arm != "base"
        for e in row.values()
    ]
    at_margin = sum(1 for e in effects if verdicts13.band(e) == "at ±m") / len(effects)
    assert 0.1 < at_margin < 0.3
    assert verdicts13.band(-0.03) == "at ±m" and verdicts13.band(0.0) == "tie"


def test_power_spending_also_sums_to_alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    import verdicts13

    from matrixrun.core.verdict import AnalysisSettings

    monkeypatch.setattr(AnalysisSettings, "level_at", AnalysisSettings.level_at)
    verdicts13.use_power_spending()
    s = AnalysisSettings(baseline="b", looks=4, spending="information")
    assert sum(1 - s.level_at(k) for k in range(1, s.states + 1)) == pytest.approx(0.05)


def test_group_sequential_levels_spend_exactly_alpha() -> None:
    """`--what-if group-sequential` (docs/benchmarks.md rests its "Bonferroni leaves α unspent"
    on it): the recursion's boundaries are crossed with probability α by Brownian paths at the
    states' information fractions, one state gets α itself, and each state's level is at
    least as wide as Bonferroni's share would make it."""
    import sequential
    from scipy.stats import norm

    from matrixrun.core.verdict import AnalysisSettings

    assert sequential.nominal_alphas((1.0,), 0.05)[0] == pytest.approx(0.05, abs=1e-9)
    fractions = tuple((k + 1) / 6 for k in range(1, 6))  # max_runs 3: states 1..5
    alphas = np.array(sequential.nominal_alphas(fractions, 0.05))
    rng = np.random.default_rng(3)
    steps = rng.normal(size=(200_000, 5)) * np.sqrt(np.diff((0.0, *fractions)))
    z = np.cumsum(steps, axis=1) / np.sqrt(fractions)
    crossed = (np.abs(z) >= norm.ppf(1 - alphas / 2)).any(axis=1).mean()
    assert abs(crossed - 0.05) < 0.002  # MC standard error ≈ 0.0005
    s = AnalysisSettings(
        baseline="a", candidates=["b"], primary="x", looks=3, spending="information"
    )
    levels = sequential.state_levels(s.states, s.confidence)
    assert all(g <= s.level_at(k + 1) + 1e-12 for k, g in enumerate(levels))
    assert levels[-1] == pytest.approx(1 - 0.0375, abs=5e-4)  # docs: 96.3% for the last state


def test_the_calibration_prior_is_the_real_fixed_design() -> None:
    """`verdicts13 --calibration 3`: the earlier run goes through `verify.design: fixed`
    (every cell 3 times, each on its own launch), so its σ records are a fixed design's, and
    its GPU time is what that design costs."""
    import verdicts13
    from verdicts import CELL_S, LAUNCH_S

    verdicts13.CALIBRATION[:] = [3]
    try:
        sigmas, gpu = verdicts13._earlier_noise("launch", 3, 0)
    finally:
        verdicts13.CALIBRATION[:] = []
    _, points, cands = verdicts13.draw("launch", np.random.default_rng([3, 0]))
    groups, cells = 1 + len(cands), (1 + len(cands)) * len(points)
    s = sigmas["output_throughput"]
    assert s.fixed_design and s.launch_df == groups * 2  # 3 launches − 1, per group
    assert gpu == 3 * groups * LAUNCH_S + 3 * cells * CELL_S
    adaptive, _ = verdicts13._earlier_noise("launch", 3, 0)
    assert not adaptive["output_throughput"].fixed_design


def test_sigma_known_is_the_worlds_own_noise_as_the_analysis_applies_it() -> None:
    """`--what-if sigma-known` hands the analysis the two parts the world draws: a cell with
    one run per arm on fresh servers has Var(d) = 2(σ_b² + σ_w²); three repeats per arm on one
    server each average only the run part away; the df make it judged as known (normal)."""
    from matrixrun.analysis import quantile
    from matrixrun.analysis.variance import cell_variance

    sw, sb = 0.04, 0.02
    sigma = verdicts.known_sigma("output_throughput", sw, sb)
    fresh = cell_variance(sigma, 16.0, ["b#1"], ["c#1"])
    assert fresh is not None and not fresh.floored
    assert fresh.var == pytest.approx(2 * (sb**2 + sw**2))
    one_server = cell_variance(sigma, 16.0, ["b#1"] * 3, ["c#1"] * 3)
    assert one_server is not None
    assert one_server.var == pytest.approx(2 * sb**2 + 2 * sw**2 / 3)
    assert quantile(0.95, one_server.df) == pytest.approx(quantile(0.95, None), abs=1e-6)


@pytest.mark.slow
def test_the_sigma_known_what_if_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It had stopped running (every comparison asserted on a σ with no part to apply)."""
    from matrixrun.analysis import noise

    monkeypatch.setattr(noise, "estimate_sigma", noise.estimate_sigma)  # put back after
    assert verdicts.main(["--matrices", "2", "--what-if", "sigma-known"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("WHAT-IF: every strategy's analysis is given the matrix's true noise")
    policy = next(line for line in out.splitlines() if line.startswith("| policy `"))
    assert "100.0% |" not in policy.split("|")[4]  # it decided something: σ was applied

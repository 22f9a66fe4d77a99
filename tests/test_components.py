"""The noise model's estimation (matrixrun/analysis/components.py): run noise that grows along
the axis, the centre a point is moderated toward, and the launch variance's uncertainty.

Each test builds measurements the way a server group produces them (cells on launches, a
launch offset shared by every cell of a launch) and checks what the estimate does with them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_analysis import BASE, CAND, meas, settings

from matrixrun.analysis import analyse, estimate_sigma
from matrixrun.analysis.moderation import (
    _centre,
    trend_uncertainty,
)
from matrixrun.analysis.variance import cell_variance
from matrixrun.core.measurement import Measurement

XS = [1, 4, 16, 64, 256, 1024]
MARGIN = math.log1p(0.05)


def _growing(x: float, low: float, high: float) -> float:
    """Run noise log-linear in ln x from `low` at 1 to `high` at 1024."""
    t = math.log(x) / math.log(1024)
    return math.exp(math.log(low) + t * (math.log(high) - math.log(low)))


def _arm(
    rng: np.random.Generator,
    arm: str,
    effect: dict[int, float],
    launches: list[list[int]],
    sigma_w: float,
    sigma_b: float,
    low: float,
) -> list[Measurement]:
    """One arm's group: on launch i, one run of each cell in launches[i]."""
    out = []
    for i, cells in enumerate(launches):
        b = rng.normal(0, sigma_b)
        for x in cells:
            e = rng.normal(0, _growing(x, low, sigma_w))
            v = 100.0 * x * math.exp(effect.get(x, 0.0) + b + e)
            m = meas(arm, x, v, instance=f"{arm}#{i}", attempt=i + 1)
            out.append(m.model_copy(update={"group_id": arm}))
    return out


@pytest.mark.slow
def test_a_noisy_high_point_is_not_shrunk_by_the_quiet_low_points() -> None:
    """Issue 13's hetero failure in miniature: run noise ×48 from concurrency 1 to 1024, each
    arm on two launches (every cell on both), the candidate exactly +margin at 1024. The
    high point's s² rests on ~1 df; shrunk toward a value the quiet points hold down (as the
    unweighted fit and the pooled or clamped trend did) its interval is too narrow and +margin
    comes out 'better' far more often than α/2. Here it may not exceed 2.5% + 2.5 points of
    simulation error over 300 matrices."""
    rng = np.random.default_rng(11)
    wrong = 0
    reps = 300
    for _ in range(reps):
        every = [XS, XS]
        ms = _arm(rng, BASE, {}, every, 0.12, 0.002, 0.0025)
        ms += _arm(rng, CAND, {1024: MARGIN}, every, 0.12, 0.002, 0.0025)
        cell = next(
            c for _, _, c in analyse(ms, settings(margin=0.05)).comparisons() if c.x == 1024
        )
        wrong += cell.verdict == "better"
    assert wrong / reps <= 0.05


@pytest.mark.slow
def test_run_noise_that_grows_along_the_axis_is_not_flattened() -> None:
    """The residuals of an unweighted cell + launch fit mix every row's noise into every other
    row of its launch: with noise growing 48× along the axis the quiet point's raw σ² read
    about 100 times its truth (measured: mean over these 200 matrices) and the noisy one's
    0.83 of it. Weighted by the run noise found (iterated), the quiet point is within a few
    times its truth and the noisy one about unbiased."""
    rng = np.random.default_rng(3)
    low, high = [], []
    for _ in range(200):
        every = [XS, XS, XS]
        ms = _arm(rng, BASE, {}, every, 0.12, 0.0, 0.0025)
        s = estimate_sigma(ms, "output_throughput")
        at = {a.x: a for a in s.by_x}
        assert at[1].raw is not None and at[1024].raw is not None
        low.append(at[1].raw ** 2 / 0.0025**2)
        high.append(at[1024].raw ** 2 / 0.12**2)
    assert float(np.mean(low)) < 5.0
    assert 0.9 < float(np.mean(high)) < 1.2


def test_the_centre_is_the_other_points_and_an_extrapolation_lends_little() -> None:
    """A point is moderated toward the trend of the *other* points (its own chance low s²
    does not also pull its centre down), and a trend read beyond the points it was fitted on
    is worth fewer df than one read between them."""
    raw = {float(x): ((0.01 * (1 + k)) ** 2, 2.0) for k, x in enumerate(XS)}
    raw[1024.0] = (0.001**2, 1.0)  # chance low at the top
    s0_top, borrow_top = _centre(raw, 1024.0, 4.0, 1e-4)
    assert s0_top > 0.03**2  # the others' rising line, not the low value itself
    _, borrow_mid = _centre(raw, 16.0, 4.0, 1e-4)
    assert borrow_top < borrow_mid <= 4.0
    unsure = trend_uncertainty(raw, 4.0, 11.0)
    assert unsure[1024.0] > unsure[16.0]


def test_a_point_on_few_df_is_not_put_below_its_centre() -> None:
    """One or two df of chance-low s² at the top of a growing spread may not pull the point
    below what the other points say it should be; with many df of its own it may."""
    from matrixrun.analysis.moderation import run_noise

    class Fit:
        def __init__(self, ss: dict[float | None, float], df: dict[float | None, float]):
            self.resid_ss, self.resid_df = ss, df

    xs: list[float | None] = [float(x) for x in XS]
    s2 = {x: (0.01 * (1 + k)) ** 2 for k, x in enumerate(xs)}
    for own_df, below in ((1.0, False), (8.0, True)):
        df = dict.fromkeys(xs, 2.0)
        df[1024.0] = own_df
        ss = {x: s2[x] * df[x] for x in xs}
        ss[1024.0] = 0.001**2 * own_df  # chance low
        run = run_noise([Fit(ss, df)], {}, {}, xs, "output_throughput")
        assert run is not None
        s0, _ = _centre({x: (ss[x] / df[x], df[x]) for x in xs}, 1024.0, 4.0, run.pooled)
        assert (run.at[1024.0][0] < s0) == below


def test_a_pooled_centre_lends_at_most_its_df() -> None:
    """With fewer than three points that have df there is no trend: the other points' pooled
    value is the centre, lending at most its own df and d₀ = 1 (nothing shows the noise is
    alike along the axis); a point with nothing else to borrow from keeps its own."""
    raw: dict[float | None, tuple[float, float]] = {256.0: (1e-6, 1.0)}
    s0, borrow = _centre(raw, 1.0, 1.0, 1e-6)
    assert (s0, borrow) == (1e-6, 1.0)
    _, own = _centre(raw, 256.0, 1.0, 1e-6)
    assert own == 0.0


def _one_cell_relaunches(rng: np.random.Generator, sigma_b: float) -> list[Measurement]:
    """Each arm: a first launch with every cell, then two relaunches with two cells each."""
    plan = [XS, [1, 4], [16, 64]]
    return _arm(rng, BASE, {}, plan, 0.004, sigma_b, 0.004) + _arm(
        rng, CAND, {}, plan, 0.004, sigma_b, 0.004
    )


def test_the_launch_variance_carries_its_spread_not_just_its_count() -> None:
    """Relaunches that served two cells each: the launch SS is not 4 equal χ²₁ terms, and an
    estimate near 0 is not known to be near 0. The cell's df comes from the estimate's own
    spread and never exceeds what the launch count alone would give."""
    rng = np.random.default_rng(2)
    s = estimate_sigma(_one_cell_relaunches(rng, 0.03), "output_throughput")
    assert s.launch_df == 4 and s.launch is not None and s.launch_var_sd is not None
    assert s.launch_var_sd**2 >= 2 * s.launch**4 / s.launch_df * 0.999
    plain = s.model_copy(update={"launch_var_sd": None})
    one = cell_variance(s, 16.0, ["b#0", "b#1"], ["c#0", "c#1"])
    old = cell_variance(plain, 16.0, ["b#0", "b#1"], ["c#0", "c#1"])
    assert one is not None and old is not None and one.df is not None and old.df is not None
    assert one.df <= old.df
    assert one.var == old.var  # the spread changes the df, never the variance


def test_a_launch_variance_estimated_at_zero_still_costs_df() -> None:
    """No launch spread at all: σ_b² is estimated at (or near) 0, yet a cell across launches
    keeps a df bounded by what the launch contrasts can show, not the run noise's many df."""
    rng = np.random.default_rng(4)
    s = estimate_sigma(_one_cell_relaunches(rng, 0.0), "output_throughput")
    assert s.launch is not None and s.launch_var_sd is not None and s.launch_var_sd > 0
    one = cell_variance(s, 1.0, ["b#0", "b#1"], ["c#0", "c#1"])
    assert one is not None and one.df is not None
    run = next(a for a in s.by_x if a.x == 1.0)
    assert one.df < run.run_df + s.launch_df

"""Every tuning constant of the analysis and the verify policy, in one place, each with why.

These are fixed before a run and are not settings: a spec cannot change them, and each was
chosen for a reason written beside it (most were measured on the scoring benchmark,
`benchmarks/verdicts13.py`, docs/benchmarks.md). Changing one changes verdicts: re-run the
benchmark, and `tests/test_committed_runs.py` names every committed run whose verdict.json it
moves. A module that needs one imports it from here (`tests/test_layout.py` keeps module-level
numbers out of `analysis/`, `verify/` and `spec/design.py`), so the whole method's numbers read
top to bottom in the order the analysis uses them: the noise model, a cell, the axis, reruns,
launches, then the policy.

Pure numbers; imports nothing.
"""

from __future__ import annotations

# -- the noise model (analysis/components.py, analysis/moderation.py) -------------------------

#: Passes of the fit: the first unweighted, each later one weighted by the run noise per point
#: the one before found (iterated weighted least squares). Not converged at 3 when noise grows
#: ×48 along the axis (the quiet end's raw σ² reads 100× its truth unweighted, 13× after one
#: reweighting, 3× after two: tests/test_components.py), but each pass costs a fit.
REWEIGHT_PASSES = 3
#: Family-wise level (Bonferroni over the groups tested) at which one group's launch spread
#: is called larger than the others' and the group gets a launch variance of its own.
ODD_ALPHA = 0.01
#: One-sided level of the upper confidence limit a declared prior is floored at: a few df of
#: warm repeats cannot show the noise is smaller than declared, only their 95% UCL can.
FLOOR_LEVEL = 0.95
#: Prior df of the moderation: how many runs' worth the trend (or pooled value) counts for at
#: one point. Small on purpose: noise on real GPUs changes with concurrency by more than 10×.
D0 = 4.0
#: Tail-latency metrics (p95/p99/max) borrow less: at low concurrency a p99 is the maximum of
#: a few requests and behaves unlike the same metric at high concurrency.
D0_TAIL = 1.0
#: The least d₀ (what a known trend would lend a point), however much the points disagree with
#: it; what the centre does lend is less where its own few df place it poorly.
D0_MIN = 1.0
#: A trend in log x is fitted only on at least `TREND_MIN_POINTS` points with `TREND_POINT_DF`
#: df each and `TREND_MIN_DF` df in all; it costs the points it lends to one df (its slope).
#: Fewer, and a line through chance values would set every point's noise.
TREND_MIN_DF = 4.0
TREND_MIN_POINTS = 3
TREND_POINT_DF = 0.5
#: A point with fewer df of its own than this is never put below its centre: its s² on one or
#: two df is as likely a chance low as a real quiet point (one-sided on purpose; with `hetero`'s
#: noise ×12 along the axis, seed 3, 1500 matrices: ties called better/worse at 256–1024 went
#: from 1.5% to 0.6%). Above it, the point's own data may take it below.
CENTRE_FLOOR_DF = 3.0
#: How far beyond the range of the variances it was fitted on a trend may be read (×4 in
#: variance, ×2 in σ): enough for spread that grows along the axis, not a line through two
#: chance values taken to any length.
EXTRAPOLATE = 4.0
#: Residual df below this at a point are numerical crumbs of leverage, not information: such a
#: point's raw s² is left out rather than read on almost no df.
CRUMB_DF = 0.1

# -- a cell (analysis/stats.py, analysis/comparison.py, analysis/noise_model.py) --------------

#: The least df Student's t is read at: the Satterthwaite df of a cell can fall far below 1,
#: where t's quantiles run to infinity; a quarter df already gives an interval that says
#: nothing, as a finite number.
MIN_T_DF = 0.25
#: Largest half-width kept on the log scale (e^5 ≈ ×150: every verdict is inconclusive long
#: before; beyond it an interval says nothing more and only prints absurd numbers).
MAX_HALF = 5.0
#: Beyond this many runs per arm a cell is "at the margin": more runs are not the answer.
MAX_RUNS_ESTIMATE = 1000
#: One-sided 95% normal quantile: a warmup gap must exceed what noise explains at this level
#: (warm reruns are run where an arm looked slow, so by regression to the mean they beat their
#: first run even with no warmup at all).
WARMUP_Z = 1.645

# -- the axis (analysis/axis.py) --------------------------------------------------------------

#: Parametric-bootstrap draws for a crossover's interval, and the seed (fixed: the same
#: measurements always give the same report).
CROSSOVER_DRAWS = 4000
CROSSOVER_SEED = 20261201
#: Level of a crossover's model-conditional interval (a statement about where, not a verdict).
CROSSOVER_LEVEL = 0.95
#: Fewer draws than this still crossing in the same direction: no interval is given (its ends
#: would be a handful of draws' extremes).
CROSSOVER_MIN_DRAWS = 20
#: The largest correlation two cells' d are drawn with, so their covariance stays positive
#: definite when one launch served both arms of both cells.
CROSSOVER_MAX_CORRELATION = 0.999

# -- reruns (analysis/reruns.py) --------------------------------------------------------------

#: Two-sided 95% normal quantile of the rerun log's noise band: a rerun outside it is one the
#: noise model does not explain.
BAND_Z = 1.96

# -- launch stability (analysis/launches.py) --------------------------------------------------

#: Family-wise chance, per run, of naming a configuration's launches unstable when its
#: launches agree (Bonferroni over the (group, point) pairs tested).
LAUNCH_ALPHA = 0.05
#: Pure-error df at a point below which the within-launch variance is pooled over all points.
LAUNCH_MIN_DF_AT_X = 2

# -- measurements a finding may rest on (core/keeping.py) ---------------------------------------

#: How far a simulated measurement's engine may fall behind its model, as a share of the
#: cell's duration, and still carry a finding (issue 44). The engine's worst lateness bounds
#: how much the cell's duration grew, so it bounds the throughput the cell understates. At
#: 3%, the practical margin most specs use, lateness alone cannot carry a cell across the
#: margin; a loaded 2-core host at ×50 fell behind by up to 50.8% and turned that into an
#: "unstable launches" headline, while the committed unloaded rehearsal's worst was 2.1%.
SIM_LATE_LIMIT = 0.03
#: Times a rehearsal halves its time scale for the rest of the run when a measurement falls
#: behind (each relaunches the group and measures the cell again): ×50 becomes ×12.5 at most,
#: which doubles then quadruples the rest of the rehearsal's wall time; past that the host is
#: too slow for the spec and the report's first line says so.
SIM_MAX_SLOWDOWNS = 2
#: The most the load client's self-check may say its own lag could have moved a metric (as a
#: share of the metric's value) before that metric carries no number (`load/selfcheck.py`
#: flags above it, `core/keeping.py` drops above it): 10%, above the noise and margins specs
#: use, below the 12–23% TTFT and 14% throughput errors a starved client made unflagged.
CLIENT_LIMIT = 0.10


# -- the verify policy (verify/, spec/design.py, plan/) ----------------------------------------

#: A rerun is planned only if it has at least this predicted chance of settling the cell by
#: `max_runs` (a futility rule fixed before the run, like the number of looks): an interval
#: that cannot shrink inside ±margin, or past it, in the runs allowed buys nothing. 0.25, not
#: 0.10: the prediction is optimistic (normal quantile), and on the scoring benchmark (seed 2)
#: the runs between 0.10 and 0.25 were mostly spent on exact ties that no n ≤ 5 settles.
#: Futility only stops reruns, it never decides a cell, so it cannot make a verdict overclaim.
FUTILITY = 0.25
#: The futility rule is applied only once both arms of a cell have at least this many runs:
#: with one run per arm the cell's d has √2 × one run's σ of spread, so its predicted chance
#: says more about that draw than about the cell, and an unlucky first draw of a large effect
#: was stopped for good. Measured on the scoring benchmark (tuning seeds 3 and 4, 200
#: matrices each, docs/benchmarks.md "Futility after one run"): cells ≥ 2m within the best case
#: decided 77.9% → 85.5% in `hetero`, 21.5% → 28.1% in `h200`, 76.6% → 78.8% in `today`, with
#: no earlier run; with a calibration run as the earlier run 88.2% → 92.4% (`hetero`, seed 4)
#: and 86.7% → 91.9% (seed 3); GPU time +8–16% (+11–13% with the calibration prior); the error
#: gates unchanged within their noise.
FUTILITY_MIN_RUNS = 2
#: Fresh-server σ degrees of freedom an adaptive design tops up to before it judges a cell on
#: launch noise (`verify.policy`; or every cell, in a small matrix); the plan prices the same
#: number (`plan.render`). Under the noise model a relaunch adds one launch df however many
#: cells it replicates; the replicates beyond the first add run-noise df (the fit's
#: residuals) at their points, which is what the per-point run noise needs.
MIN_FRESH_DF = 6
#: Runs a cell bisection adds gets on the launch that first measures it (`verify.bisect`: a
#: second, warm, gives its point run-noise df of its own — a point with none borrows only a
#: few df from the trend, and one run there is almost never decided).
BISECTION_RUNS = 2

"""The noise of an earlier run as prior information (`verify.noise_from`, docs/verdicts.md,
"Noise from an earlier run"): this run's variance components pooled with that run's, each
weighted by its degrees of freedom — the conjugate (scaled inverse-χ²) update, with the
earlier estimate as a prior worth the df it was measured on. Pure: both are `Sigma` records.

Why: on a real engine the noise is large and a matrix has few df of its own (the H200 runs,
reports/runs/h200_transformers_cb-3: run noise 16% on 4 df), and Student's t on 2–4 df at the
levels the looks leave (99.93% at a cell's first state) turns a 10× throughput gap into an
interval of −93% to +146 000%. The same engine, model and hardware measured before carries
df that this run need not spend again. It is only as good as the assumption that the noise
is the same: the earlier run must be of the same engine, model and hardware (checked where it
is read, `history.noise_history`), and the report says where the prior came from.

Why the launch variance is not pooled when this run has its own: scored on the `launch` world
(`benchmarks/verdicts13.py --history`, seed 3, 800 matrices), pooling it too called 5.0% of
the cells at exactly −m worse at concurrency 16–64 (the gate is 3%): the failing cells had a
pooled σ̂_b 0.4–0.8× the truth on 7–11 df where the realised launch offsets of their 2–3
launches per arm fell far from 0; pooling only the run noise, and the launch part only where
the run has none, kept that band at 0.6% (worst in the world 2.4%). The reason is the
policy's stopping, not the pooling: a run whose σ̂_b came out low decided its cells and
launched no more, one whose σ̂_b came out high relaunched and regressed toward the truth, so
an adaptive run's final launch variance is a selected, low-leaning sample (40 redraws of each
failing matrix's earlier run: mean 0.71–0.97× the truth, median 0.44–0.76×).

A fixed design (`verify.design: fixed`, `Sigma.fixed_design`) has no stopping: every cell
ran max_runs times, each on its own launch, whatever the data said. Its launch variance is
then pooled with this run's by df like the run noise (docs/verdicts.md, "A calibration run").
"""

from __future__ import annotations

import math

from matrixrun.analysis.stats import satterthwaite
from matrixrun.core.verdict import Sigma, SigmaAt, SigmaSource


def _pool(
    own: tuple[float, float] | None, past: tuple[float, float] | None
) -> tuple[float, float] | None:
    """Two variance estimates (value, df) pooled by df; either may be missing."""
    parts = [p for p in (own, past) if p is not None and p[1] > 0]
    if not parts:
        return own
    df = sum(d for _, d in parts)
    return sum(v * d for v, d in parts) / df, df


def _run_at(sigma: Sigma, x: float | None) -> tuple[float, float] | None:
    """Run-noise variance and df at x: the point's own estimate, else the pooled one."""
    for at in sigma.by_x:
        if at.x == x:
            return at.run**2, at.run_df
    return (sigma.run**2, sigma.run_df) if sigma.run is not None else None


def _launch(sigma: Sigma) -> tuple[float, float, float] | None:
    """(σ_b², df, Var of the σ_b² estimate) of a record, or None where it has none."""
    if sigma.launch is None or sigma.launch_df <= 0:
        return None
    v = sigma.launch**2
    var = sigma.launch_var_sd**2 if sigma.launch_var_sd is not None else 2 * v * v / sigma.launch_df
    return v, float(sigma.launch_df), var


def _pool_launch(
    own: tuple[float, float, float], past: tuple[float, float, float]
) -> tuple[float, float, float]:
    """Two launch variances (σ_b², df, Var of the estimate) pooled by df: the weights are
    dfᵢ / Σdf, so the pooled estimate's variance is Σ(dfᵢ / Σdf)²·Varᵢ."""
    (v1, d1, var1), (v2, d2, var2) = own, past
    df = d1 + d2
    return (d1 * v1 + d2 * v2) / df, df, (d1 * d1 * var1 + d2 * d2 * var2) / (df * df)


def with_history(sigma: Sigma, past: Sigma | None, source: str) -> Sigma:
    """`sigma` with the earlier run's run noise pooled in, by df, at each point (the earlier
    run's at the same point, else its pooled value). The launch part: pooled by df where the
    earlier run is a fixed design; else this run's own where it has one, and the earlier
    run's, on its df and with its spread, where it has none (warm repeats alone cannot show a
    launch part, and without it the launch noise would be taken as 0). `past` None: `sigma`
    unchanged."""
    if past is None or past.metric != sigma.metric:
        return sigma
    by_x = []
    for at in sigma.by_x:
        pooled = _pool((at.run**2, at.run_df), _run_at(past, at.x))
        assert pooled is not None
        by_x.append(at.model_copy(update={"run": math.sqrt(pooled[0]), "run_df": pooled[1]}))
    own_run = (sigma.run**2, sigma.run_df) if sigma.run is not None else None
    past_run = (past.run**2, past.run_df) if past.run is not None else None
    run = _pool(own_run, past_run)
    # an adaptive run's launch variance is pooled in only where this run has none of its own
    # (see the module docstring: pooled always, it failed the calibration gate in `launch`);
    # a fixed design's is pooled by df
    own_launch, past_launch = _launch(sigma), _launch(past)
    pool = own_launch is not None and past_launch is not None and past.fixed_design
    launch = own_launch or past_launch
    if pool:
        assert own_launch is not None and past_launch is not None
        launch = _pool_launch(own_launch, past_launch)
    borrowed = own_launch is None and launch is not None
    if run is None and launch is None:
        return sigma
    if not by_x and run is not None and sigma.run is None:
        by_x = [SigmaAt(x=at.x, run=at.run, run_df=at.run_df) for at in past.by_x]
    vw, dw = run if run is not None else (0.0, 0.0)
    lent = past.launch_df if (borrowed or pool) else 0
    update: dict[str, object] = {
        "by_x": by_x,
        "run": math.sqrt(vw) if run is not None else None,
        "run_df": round(dw, 2),
        "history": source,
        "history_df": round(past.run_df + lent, 2),
        "history_fixed": past.fixed_design and (borrowed or pool),
    }
    if launch is not None:
        vb, db, var_b = launch
        df = satterthwaite([(vb, db), (vw, dw or None)])
        if borrowed or pool:  # an adaptive run's own launch estimate is left as it is
            update |= {
                "launch": math.sqrt(vb),
                "launch_df": round(db),
                "launch_var_sd": math.sqrt(var_b),
            }
        update |= {
            "value": math.sqrt(vb + vw),
            "df": round(df, 2) if df is not None and math.isfinite(df) else None,
            "source": SigmaSource.FRESH_SERVER,
        }
    elif run is not None:
        update |= {"value": math.sqrt(vw), "df": round(dw, 2), "source": SigmaSource.WARM}
    return sigma.model_copy(update=update)

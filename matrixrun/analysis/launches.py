"""Launch instability: launches of one configuration that disagree beyond what run noise
explains (docs/verdicts.md, "Unstable launches").

The noise model (`components`) has one launch variance σ_b² shared by every cell of a launch
and run noise σ_w²(x) within a launch. A reader comparing two flags needs to know first when
that picture breaks at a point: the same configuration, launched again, gives a different
number there by more than the margin and more than its run noise explains. Then no number of
runs on those launches settles the comparison; what limits it is the engine's launch-to-launch
stability, and the useful next measurement is another launch (an odd-server question).

The test, per server group g (one launch configuration) and sweep point x with k ≥ 2 launches
that measured it: the launch means ȳᵢ (log scale, nᵢ runs each) against the within-launch
variance s²(x),

    F = [Σ nᵢ (ȳᵢ − ȳ)² / (k − 1)] / s²(x)   ~   F(k − 1, df(x))   if the launches agree,

one-way ANOVA. s²(x) is pure error: repeats of one cell on one launch, pooled over every
group's cells at x (at least `LAUNCH_MIN_DF_AT_X` df there, else pooled over all points). Not the
noise model's run noise: that also holds the fit's residuals, and a residual at x is exactly a
launch disagreeing with the others at x — on a fixed design with one run per launch it is
nothing else — so testing launches against it would test them against themselves. No repeat
on any launch (a spec with `warmup_requests: cell` takes no warm reruns): the launches of the
other configurations at their points stand in (`other_launches`): under the model they vary
by σ_b² + σ_w² like this one's, so a configuration whose launches disagree far more than the
others' do is the odd one (conservative: that denominator holds the launch part too). Neither:
nothing is tested, and the document says so. Bonferroni over every (group,
point) tested holds the chance of naming any launch falsely to `LAUNCH_ALPHA` per run, and a finding
must also spread more than the margin (largest launch mean / smallest − 1): a disagreement too
small to move a verdict is not worth the first line.

Pure: measurements in, a `LaunchCheck` out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats

from matrixrun.analysis.samples import value_of
from matrixrun.core.measurement import Measurement
from matrixrun.core.tuning import LAUNCH_ALPHA, LAUNCH_MIN_DF_AT_X
from matrixrun.core.verdict import LaunchCheck, LaunchSpread, LaunchValue


def _x(point: dict[str, object], axis: str) -> float | None:
    raw = point.get(axis)
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    return None


def launch_means(
    measurements: Sequence[Measurement], metric: str
) -> dict[tuple[str, str, str], dict[str, list[float]]]:
    """(slice, group, point_id) → instance → log values of the successful runs there, in the
    order the launches first appear."""
    out: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for m in measurements:
        v = value_of(m, metric)
        if v is None:
            continue
        key = (m.slice, m.group_id or m.arm, m.point_id)
        out.setdefault(key, {}).setdefault(m.instance, []).append(math.log(v))
    return out


def _f_test(runs: dict[str, list[float]], var_w: float) -> tuple[float, int]:
    """F of the launch means against run variance `var_w`, and its numerator df."""
    n = [len(v) for v in runs.values()]
    means = [sum(v) / len(v) for v in runs.values()]
    grand = sum(k * y for k, y in zip(n, means, strict=True)) / sum(n)
    ss = sum(k * (y - grand) ** 2 for k, y in zip(n, means, strict=True))
    df = len(runs) - 1
    return ss / df / var_w, df


def pure_error(
    groups: dict[tuple[str, str, str], dict[str, list[float]]],
    xs: dict[tuple[str, str, str], float | None],
) -> tuple[dict[float | None, tuple[float, int]], tuple[float, int]]:
    """Within-launch sums of squares and df: per point, and pooled over all points."""
    at: dict[float | None, tuple[float, int]] = {}
    for key, runs in groups.items():
        for vals in runs.values():
            if len(vals) < 2:
                continue
            mean = sum(vals) / len(vals)
            ss, df = at.get(xs[key], (0.0, 0))
            at[xs[key]] = (ss + sum((u - mean) ** 2 for u in vals), df + len(vals) - 1)
    total = (sum(ss for ss, _ in at.values()), sum(df for _, df in at.values()))
    return at, total


def other_launches(
    groups: dict[tuple[str, str, str], dict[str, list[float]]], key: tuple[str, str, str]
) -> tuple[float, int]:
    """Where no launch was repeated on: how much the launches of the *other* groups disagree
    at their cells (Σ nᵢ(ȳᵢ − ȳ)² over every other (group, point), and Σ (k − 1) df). Under
    the noise model every configuration's launch means vary by the same σ_b² + σ_w²/n, so
    this bounds what run noise (and the ordinary launch part) explains: a configuration whose
    launches disagree far more than the others' is the odd one."""
    ss, df = 0.0, 0
    for other, runs in groups.items():
        if other[1] == key[1] or len(runs) < 2:
            continue
        n = [len(v) for v in runs.values()]
        means = [sum(v) / len(v) for v in runs.values()]
        grand = sum(k * y for k, y in zip(n, means, strict=True)) / sum(n)
        ss += sum(k * (y - grand) ** 2 for k, y in zip(n, means, strict=True))
        df += len(runs) - 1
    return ss, df


def launch_check(
    measurements: Sequence[Measurement],
    metric: str,
    *,
    margin: float,
    axis: str = "concurrency",
    alpha: float = LAUNCH_ALPHA,
) -> LaunchCheck:
    """Every (group, point) measured on two or more launches, tested (module docstring);
    the ones that disagree beyond within-launch noise and by more than `margin`, named."""
    groups = launch_means(measurements, metric)
    first: dict[tuple[str, str, str], Measurement] = {}
    for m in measurements:
        first.setdefault((m.slice, m.group_id or m.arm, m.point_id), m)
    xs = {key: _x(first[key].point, axis) for key in groups}
    at, (ss_all, df_all) = pure_error(groups, xs)
    multi = [key for key, runs in groups.items() if len(runs) >= 2]
    if not multi:
        return LaunchCheck(metric=metric, untested_reason="one_launch")
    tests: list[tuple[tuple[str, str, str], float, int, int, float, str]] = []
    for key in multi:
        ss, df = at.get(xs[key], (0.0, 0))
        if df < LAUNCH_MIN_DF_AT_X or ss <= 0:
            ss, df = ss_all, df_all
        against = "repeats"
        if df == 0 or ss <= 0:
            ss, df = other_launches(groups, key)
            against = "other_launches"
        if df == 0 or ss <= 0:
            continue
        var_w = ss / df
        f, df_b = _f_test(groups[key], var_w)
        tests.append((key, f, df_b, df, var_w, against))
    if not tests:
        return LaunchCheck(metric=metric, untested_reason="no_repeats")
    found = []
    for key, f, df_b, df_w, var_w, against in tests:
        p = min(float(stats.f.sf(f, df_b, df_w)) * len(tests), 1.0)
        runs = groups[key]
        means = {i: math.exp(sum(v) / len(v)) for i, v in runs.items()}
        spread = max(means.values()) / min(means.values()) - 1
        if p >= alpha or spread <= margin:
            continue
        m = first[key]
        found.append(
            LaunchSpread(
                slice=key[0],
                arm=m.arm,
                group=key[1],
                point_id=key[2],
                point=m.point,
                x=xs[key],
                metric=metric,
                launches=[
                    LaunchValue(instance=i, value=means[i], n=len(v)) for i, v in runs.items()
                ],
                spread=spread,
                f=f,
                df_between=df_b,
                df_within=df_w,
                p=p,
                run_sigma=math.sqrt(var_w),
                against=against,
            )
        )
    found.sort(key=lambda s: (s.arm, s.x is None, s.x or 0.0))
    largest = max(
        (
            max(math.exp(sum(v) / len(v)) for v in groups[k].values())
            / min(math.exp(sum(v) / len(v)) for v in groups[k].values())
            - 1
            for k in multi
        ),
        default=None,
    )
    return LaunchCheck(metric=metric, tested=len(tests), unstable=found, largest_spread=largest)

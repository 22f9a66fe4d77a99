"""Reruns: every repeat of a cell set against its first run, and what it says about the
explanation it was run to test (VERDICTS.md §6). Interpreted here once; the report only words
the result."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from matrixrun.analysis.noise_model import NoiseModel, WarmupGap, confirmed_warmup
from matrixrun.analysis.samples import value_of
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import higher_is_better
from matrixrun.core.tuning import BAND_Z, WARMUP_Z
from matrixrun.core.verdict import CheckOutcome, Comparison, Explanation, Rerun, RerunKind

#: Reasons whose rerun tests a named explanation; the others are replicates.
_CHECKS = ("surprise", "fresh_server", "manual")


def _alone(arm: str, baseline: str, value: float | None, cell: Comparison | None) -> float | None:
    if cell is None or value is None or not cell.baseline.mean or not cell.candidate.mean:
        return None
    if arm == baseline:
        return cell.candidate.mean / value - 1
    return value / cell.baseline.mean - 1


def judge_rerun(
    r: Rerun, cell: Comparison | None, margin: float, surprise: float, sigma: float | None
) -> tuple[Explanation, CheckOutcome | None]:
    """What a rerun that tests an explanation says about it, each claim at the standard of a
    verdict: confirmed or falsified only when its test clears what noise explains for one
    pair (`sigma`: the σ of one run as this kind of pair sees it; without one nothing is
    claimed), else not settled. Inconclusive/crossover/A/A reruns are replicates and test no
    story. A warm rerun tests first-run JIT/warm-up (`_warm`); a fresh-server rerun tests
    "that instance was odd" (`_instance`), and only where the first run, on its own against
    the other arm, was beyond the surprise threshold: an ordinary cell has no effect for an
    odd server to explain."""
    if r.reason not in _CHECKS or r.change_vs_first is None:
        return Explanation.REPLICATE, None
    first_alone = _alone(r.arm, cell.baseline.arm, r.first_value, cell) if cell else None
    if r.kind == RerunKind.WARM:
        return Explanation.WARMUP, _warm(r, first_alone, margin, surprise, sigma)
    alone = r.alone
    if alone is None or cell is None or cell.change is None:
        return Explanation.INSTANCE, None
    if first_alone is not None and abs(first_alone) <= surprise:
        # nothing surprising to explain: a fresh-server run of an ordinary cell (the policy's
        # σ replicates share the reason) is a replicate, not a test of "that server was odd"
        # (a real run printed "odd server confirmed" from a baseline replicate 3.4% off)
        return Explanation.REPLICATE, None
    return Explanation.INSTANCE, _instance(r, alone, cell.change, margin, surprise)


def _warm(
    r: Rerun, first_alone: float | None, margin: float, surprise: float, sigma: float | None
) -> CheckOutcome:
    """Warm-up predicts the warm rerun beats the first run by about the gap it explains.
    Confirmed: better beyond the margin and beyond what noise explains for one pair, one-sided
    (`noise_model.confirmed_warmup`, the test the analysis's own warm-up finding uses). Falsified:
    not better beyond the margin, and short of the gain the warm-up would need (the first
    run's own change against the other arm, at least the surprise threshold) by more than
    noise explains. Anything else, or no σ: not settled."""
    if sigma is None or r.change_vs_first is None:
        return CheckOutcome.NOT_SETTLED
    gain = math.log1p(r.change_vs_first) * (1 if higher_is_better(r.metric) else -1)
    if gain > 0 and confirmed_warmup(WarmupGap(gap=gain, pairs=1), margin, sigma):
        return CheckOutcome.CONFIRMED
    needed = abs(math.log1p(first_alone)) if first_alone is not None else 0.0
    needed = max(needed, math.log1p(surprise))
    floor = warm_floor(sigma)
    if gain <= math.log1p(margin) and needed - gain > floor:
        return CheckOutcome.FALSIFIED
    return CheckOutcome.NOT_SETTLED


def warm_floor(sigma: float) -> float:
    """The log gain one warm pair must exceed to be more than noise, one-sided (WARMUP_Z)."""
    return WARMUP_Z * math.sqrt(2) * sigma


def _instance(
    r: Rerun, alone: float, change: float, margin: float, surprise: float
) -> CheckOutcome:
    """An odd instance predicts the effect does not reproduce on a fresh server. Falsified:
    the rerun on its own still beyond the surprise threshold, same sign, and beyond the pair's
    noise band (the effect reproduced is more than noise). Confirmed: the rerun on its own
    within the margin of the other arm, and beyond its first run's noise band (the two
    instances differ by more than noise). Anything else, or no band: not settled."""
    if r.noise_band is None or r.matches_first is None:
        return CheckOutcome.NOT_SETTLED
    band = math.log1p(r.noise_band)
    if abs(alone) > surprise and (alone > 0) == (change > 0) and abs(math.log1p(alone)) > band:
        return CheckOutcome.FALSIFIED
    if abs(math.log1p(alone)) < math.log1p(margin) and not r.matches_first:
        return CheckOutcome.CONFIRMED
    return CheckOutcome.NOT_SETTLED


def _pair_sigma(
    noise: NoiseModel, point: Mapping[str, object], axis: str, kind: RerunKind
) -> float | None:
    """σ of one run at this point as a pair of this kind sees it: run noise for a warm pair,
    run + launch noise for a fresh one (None: no noise estimate)."""
    raw = point.get(axis)
    x = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
    return noise.one_run(x, fresh=kind == RerunKind.FRESH_SERVER)


def reruns(
    measurements: Sequence[Measurement],
    noise: NoiseModel,
    cells: Mapping[tuple[str, str, str], Comparison],
    *,
    baseline: str,
    surprise: float,
    axis: str = "concurrency",
) -> list[Rerun]:
    """Every repeat (attempt > first) of a cell on the noise model's metric, against that
    cell's first run. `cells` maps (slice, candidate, point id) to the comparison on that
    metric a rerun belongs to (a baseline rerun belongs to every candidate's cell at its
    point: the first is taken). Nothing is replaced: this only says what each rerun showed.
    `matches_first` sets the difference against what noise explains for one pair, z·√2·σ at
    the point (`noise`: run noise for a warm rerun, run + launch noise for a fresh one), not
    against the margin: a replicate 3.2% off its first run is unremarkable where σ is 4%; a
    check is judged against the metric's margin (`NoiseModel.margin`)."""
    metric, margin = noise.metric, noise.margin
    groups: dict[tuple[str, str, str], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.slice, m.point_id, m.arm), []).append(m)
    out: list[Rerun] = []
    for (slice_name, pid, arm), ms in groups.items():
        ms = sorted(ms, key=lambda m: m.attempt)
        first = ms[0]
        first_value = value_of(first, metric)
        candidate = arm
        if arm == baseline:
            candidate = next((c for (s, c, p) in cells if s == slice_name and p == pid), "")
        cell = cells.get((slice_name, candidate, pid))
        for k, m in enumerate(ms[1:], start=1):
            # a warm rerun is set against the run before it on its own server (a warm-up
            # partner check's cold run, on a later launch), anything else against the first
            here = next((o for o in ms[:k] if o.instance == m.instance), first)
            first_value = value_of(here, metric)
            value = value_of(m, metric)
            change: float | None = None
            if value is not None and first_value is not None:
                change = math.expm1(math.log(value / first_value))
            kind = RerunKind.WARM if m.instance == here.instance else RerunKind.FRESH_SERVER
            pair = _pair_sigma(noise, m.point, axis, kind)
            # a warm check's band is its test's (one-sided: warm-up predicts a gain), so the
            # number printed beside its outcome is the one that decided it
            check = kind == RerunKind.WARM and m.reason in _CHECKS
            z = WARMUP_Z if check else BAND_Z
            band = None if pair is None else math.expm1(z * math.sqrt(2) * pair)
            r = Rerun(
                slice=slice_name,
                arm=arm,
                cell_id=m.cell_id,
                candidate=candidate,
                point_id=pid,
                point=m.point,
                attempt=m.attempt,
                reason=m.reason,
                instance=m.instance,
                kind=kind,
                metric=metric,
                value=value,
                first_value=first_value,
                change_vs_first=change,
                # judged on the change as printed (rerun / first − 1) against the band as
                # printed, so "within ±x%" never sits beside a printed change beyond it
                matches_first=None if change is None or band is None else abs(change) <= band,
                noise_band=band,
                tests=Explanation.REPLICATE,
                alone=_alone(arm, baseline, value, cell),
                error=m.error,
            )
            r.tests, r.outcome = judge_rerun(r, cell, margin, surprise, pair)
            out.append(r)
    return out

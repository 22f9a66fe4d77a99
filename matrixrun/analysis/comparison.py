"""One cell judged: candidate against baseline on one metric (VERDICTS.md §1, 4, 5, 7), from
the cell's two samples and the noise stage's `NoiseModel` of the metric, and nothing else of
the noise model: its variance, level, margin and warm-up gaps are the model's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from matrixrun.analysis.noise_model import NoiseModel
from matrixrun.analysis.stats import judge, limiting_arm, look_of, quantile
from matrixrun.core.metrics import higher_is_better
from matrixrun.core.tuning import MAX_HALF, MAX_RUNS_ESTIMATE
from matrixrun.core.verdict import (
    AnalysisSettings,
    ArmSample,
    CellNote,
    CellVerdict,
    Comparison,
    WarmupShift,
)

_FAILED_RUNS = {
    "baseline": CellNote.BASELINE_FAILED_RUNS,
    "candidate": CellNote.CANDIDATE_FAILED_RUNS,
}
_FAILED_REQUESTS = {
    "baseline": CellNote.BASELINE_FAILED_REQUESTS,
    "candidate": CellNote.CANDIDATE_FAILED_REQUESTS,
}


def warmup_shift(
    baseline: ArmSample, candidate: ArmSample, noise: NoiseModel, where: tuple[str, str] = ("", "")
) -> tuple[float, list[WarmupShift]]:
    """How far first-run warmup may have moved d, and the evidence. Each server's first run of
    an arm is its cold one, so an arm with a confirmed gap g (`confirmed_warmup`) looks worse
    by g × (its servers / its runs); the shift undoes that for both arms. g is the arm's gap
    at this point (`where`: slice, point id) where its warm runs here were set aside (they
    were left out like with like, `warm.set_aside`, so its gap here is the evidence even where
    its own pooled gap is not confirmed); else, for an arm with a confirmed pooled gap, its
    gap here where that is the larger, else the pooled one (the check asks what warm-up
    *could* account for).

    When both arms have a gap the shift is their difference, and it counts only if that
    difference is itself beyond noise, at the cell's own level (normal quantile; each gap's
    σ√2/√pairs): that the arms warm up differently is a claim like a verdict's and is held to
    the same standard — at `WARMUP_Z` (one-sided 95%) two arms that warm up alike, one pair
    each, lost a decided cell to a chance difference of their gaps (tuning seed 4, `h200`).
    Two arms of one engine that warm up alike at a batch shape are compared cold with cold at
    no cost, and the verify policy measures a partner warm to find out
    (`Policy._warm_partners`); an arm that alone warms up (a JIT on one arm) leaves one gap,
    applied whole. A sensitivity check only: it never decides a cell, it can only take a
    verdict's confidence away. (0, []) when no arm has a gap."""
    shift = 0.0
    var = 0.0
    evidence = []
    for role, a in ((1.0, candidate), (-1.0, baseline)):
        if not a.n:
            continue
        key = (*where, a.arm)
        here = noise.warm_at.get(key)
        w = noise.warmup.get(a.arm)
        if here is not None and key in noise.aside:
            w = here  # its warm runs here were left out: its gap here is the evidence
        elif w is None or not noise.confirmed(w):
            continue
        elif here is not None and here.gap >= w.gap:
            w = here
        cold = len(set(a.instances))
        shift += role * w.gap * cold / a.n
        var += (cold / a.n) ** 2 / w.pairs
        evidence.append(WarmupShift(arm=a.arm, gap=w.gap, pairs=w.pairs, cold=cold, n=a.n))
    sigma = noise.sigma.value
    z = quantile(noise.level, None)
    if len(evidence) == 2 and sigma and abs(shift) <= z * math.sqrt(2 * var) * sigma:
        return 0.0, []
    return shift, evidence


def _failure_notes(baseline: ArmSample, candidate: ArmSample, limit: float) -> list[CellNote]:
    notes = []
    for role, a in (("baseline", baseline), ("candidate", candidate)):
        if a.failed_measurements:
            notes.append(_FAILED_RUNS[role])
        if a.failure_rate > limit:
            notes.append(_FAILED_REQUESTS[role])
    return notes


def compare(
    baseline: ArmSample,
    candidate: ArmSample,
    noise: NoiseModel,
    settings: AnalysisSettings,
    *,
    point_id: str = "",
    point: dict[str, Any] | None = None,
    x: float | None = None,
    slice_name: str = "",
) -> Comparison:
    """Judge one cell on `noise.metric`. For an arm with confirmed first-run warmup (the
    model's `warmup`, `NoiseModel.confirmed`), a verdict that its cold first runs could
    account for is not confident (`warmup_shift`), and the cell's first note is
    `CellNote.WARMUP`. Of `settings` only the fixed rules are read (failure limit, surprise
    threshold, looks)."""
    metric = noise.metric
    notes = _failure_notes(baseline, candidate, settings.failure_limit)
    notes += _capped_notes(baseline, candidate)
    common: dict[str, Any] = {
        "point_id": point_id,
        "point": point or {},
        "x": x,
        "baseline": baseline,
        "candidate": candidate,
    }
    n_b, n_c = baseline.n, candidate.n
    if n_b == 0 or n_c == 0:
        missing = CellNote.NO_BASELINE if n_b == 0 else CellNote.NO_CANDIDATE
        return Comparison(
            **common,
            change=None,
            d=None,
            verdict=CellVerdict.UNDECIDED,
            confident=False,
            provisional=False,
            notes=[missing, *notes],
        )
    assert baseline.mean is not None and candidate.mean is not None
    sign = 1.0 if higher_is_better(metric) else -1.0
    raw = math.log(candidate.mean) - math.log(baseline.mean)
    common.update(
        change=math.expm1(raw),
        d=sign * raw,
        provisional=n_b == 1 or n_c == 1,
        surprise=abs(math.expm1(raw)) > settings.surprise,
    )
    if noise.sigma.value is None:
        return Comparison(
            **common,
            verdict=CellVerdict.UNDECIDED,
            confident=False,
            limiting_arm=limiting_arm(n_b, n_c),
            notes=[CellNote.NO_NOISE, *notes],
        )
    return _judged(common, sign, noise, settings, notes, (slice_name, point_id))


def _capped_notes(baseline: ArmSample, candidate: ArmSample) -> list[CellNote]:
    return [CellNote.CAPPED] if baseline.capped or candidate.capped else []


def _client_could_explain(
    baseline: ArmSample, candidate: ArmSample, d_lo: float, d_hi: float, margin: float
) -> bool:
    """Whether the client's own lag (the self-check's bound on this metric, either arm) could
    move the interval to another verdict: the interval is widened by both bounds, as logs."""
    widen = math.log1p(baseline.client_bound) + math.log1p(candidate.client_bound)
    if widen == 0:
        return False
    before, _ = judge(d_lo, d_hi, margin)
    after, _ = judge(d_lo - widen, d_hi + widen, margin)
    return after != before


def _downgraded(
    verdict: CellVerdict,
    small: bool,
    bounds: tuple[float, float],
    baseline: ArmSample,
    candidate: ArmSample,
    sign: float,
    noise: NoiseModel,
    settings: AnalysisSettings,
    where: tuple[str, str],
) -> tuple[CellVerdict, bool, CellNote | None, list[WarmupShift]]:
    """What may take a verdict's confidence away, in order: a failing arm (§7), confirmed
    first-run warmup, the client's own lag, a capped arm's flattered latency. Returns the
    verdict, the small-change flag, the note that decided it and the warmup evidence."""
    d_lo, d_hi = bounds
    lead: CellNote | None = None
    limit = settings.failure_limit
    margin = noise.margin

    def failing(a: ArmSample) -> bool:
        return a.failure_rate > limit or a.failed_measurements > 0

    if verdict == CellVerdict.BETTER and failing(candidate):
        verdict, small, lead = CellVerdict.UNDECIDED, d_lo > 0, CellNote.CANDIDATE_UNRELIABLE
    elif verdict == CellVerdict.WORSE and failing(baseline):
        verdict, small, lead = CellVerdict.UNDECIDED, d_hi < 0, CellNote.BASELINE_UNRELIABLE
    shift, evidence = warmup_shift(baseline, candidate, noise, where)
    if shift and verdict != CellVerdict.UNDECIDED:
        moved, _ = judge(d_lo + shift, d_hi + shift, margin)
        if moved != verdict:
            verdict, small, lead = CellVerdict.UNDECIDED, False, CellNote.WARMUP
    if verdict != CellVerdict.UNDECIDED and _client_could_explain(
        baseline, candidate, d_lo, d_hi, margin
    ):
        verdict, small, lead = CellVerdict.UNDECIDED, False, CellNote.CLIENT_BOUND
    flattered = candidate if verdict == CellVerdict.BETTER else baseline
    if sign < 0 and verdict in (CellVerdict.BETTER, CellVerdict.WORSE) and flattered.capped:
        verdict, small, lead = CellVerdict.UNDECIDED, False, CellNote.CAPPED
    return verdict, small, lead, evidence


def _judged(
    common: dict[str, Any],
    sign: float,
    noise: NoiseModel,
    settings: AnalysisSettings,
    notes: list[CellNote],
    where: tuple[str, str] = ("", ""),
) -> Comparison:
    """A cell with σ: its interval at its look's level, the verdict, and what may take the
    verdict's confidence away (§7 failing arms, confirmed warmup)."""
    baseline: ArmSample = common["baseline"]
    candidate: ArmSample = common["candidate"]
    d: float = common["d"]
    n_b, n_c = baseline.n, candidate.n
    look = look_of(baseline, candidate, settings.looks)
    level = noise.level_for(n_b, n_c, look)
    margin = noise.margin
    cell = noise.cell(common["x"], baseline.instances, candidate.instances)
    assert cell is not None
    if cell.launch > 0 and (
        len(set(baseline.instances)) < n_b or len(set(candidate.instances)) < n_c
    ):
        notes.append(CellNote.ONE_SERVER)
    se = math.sqrt(cell.var)
    # an interval wider than e^±5 says nothing more; capped so it stays a finite number
    half = min(quantile(level, cell.df) * se, MAX_HALF)
    d_lo, d_hi = d - half, d + half
    verdict, small = judge(d_lo, d_hi, margin)
    verdict, small, lead, evidence = _downgraded(
        verdict, small, (d_lo, d_hi), baseline, candidate, sign, noise, settings, where
    )
    if small:
        notes.append(CellNote.SMALL_CHANGE)
    if lead is not None:  # first, once (CAPPED may already be there as a plain note)
        notes = [lead, *(n for n in notes if n != lead)]
    r_lo, r_hi = sorted((sign * d_lo, sign * d_hi))
    confident = verdict in (CellVerdict.BETTER, CellVerdict.WORSE)
    undecided = verdict == CellVerdict.UNDECIDED
    return Comparison(
        **common,
        change_lo=math.expm1(r_lo),
        change_hi=math.expm1(r_hi),
        d_lo=d_lo,
        d_hi=d_hi,
        verdict=verdict,
        confident=confident,
        look=look,
        level=level,
        small_change=small,
        limiting_arm=None if confident or verdict == CellVerdict.SAME else limiting_arm(n_b, n_c),
        runs_needed=(
            runs_needed(d, noise, common["x"], baseline.instances, candidate.instances)
            if undecided and lead not in (CellNote.CLIENT_BOUND, CellNote.CAPPED)
            else None
        ),
        se=se,
        df=cell.df,
        floored=cell.floored,
        notes=notes,
        warmup=evidence if lead == CellNote.WARMUP else [],
    )


def runs_needed(
    d: float,
    noise: NoiseModel,
    x: float | None,
    baseline: Sequence[str],
    candidate: Sequence[str],
) -> int | None:
    """Runs per arm in all — the ones it has plus extra ones, each on a fresh launch — at which
    the cell's interval would decide, if the observed change were the true one and the noise
    model held: Student's t at the level of that state, on the df the cell would then have
    (its Satterthwaite df now plus one per extra run). Counted with the instances the arms
    really have, so repeats on one server are not taken for independent runs. None when there
    is no noise estimate, the change sits (practically) on the margin, or it would take more
    than `MAX_RUNS_ESTIMATE`."""
    gap = abs(abs(d) - math.log1p(noise.margin))
    now = noise.cell(x, baseline, candidate)
    if now is None or gap <= 0:
        return None
    start = max(len(baseline), len(candidate))

    def decides(n: int) -> bool:
        extra_b = [f"+{k}" for k in range(n - len(baseline))]
        extra_c = [f"+{k}" for k in range(n - len(candidate))]
        cell = noise.cell(x, [*baseline, *extra_b], [*candidate, *extra_c])
        assert cell is not None
        df = (
            None
            if cell.df is None or now.df is None
            else now.df + 2 * n - len(baseline) - len(candidate)
        )
        q = quantile(noise.level_for(n, n), df)
        return q * math.sqrt(cell.var) < gap

    hi = start + 1
    while not decides(hi):
        hi *= 2
        if hi > MAX_RUNS_ESTIMATE:
            return None
    lo = max(start, hi // 2)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if decides(mid):
            hi = mid
        else:
            lo = mid
    return hi

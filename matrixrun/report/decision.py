"""The decision a reviewer acts on, derived from the typed `Verdict`: which arm to use where
(from the regimes along the axis), which explanations the reruns ruled out, what moved with the
primary metric, which metrics repeat another value for value, and the best throughput within a
spec's SLO.

Why a module of its own: these are derivations, not statistics — they read the verdict's
regimes, crossovers, reruns and per-arm means and never estimate anything (no new interval,
no new test), so a recommendation can never claim more than the cells it cites. They are pure
functions returning plain data; `wording.decision` turns the data into sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from matrixrun.core.verdict import (
    CaveatKind,
    CellVerdict,
    CheckOutcome,
    Comparison,
    Crossover,
    Explanation,
    MetricResult,
    OverallVerdict,
    Rerun,
    Series,
    Verdict,
)
from matrixrun.report import fmt
from matrixrun.rundir.settings import SloBound

#: Two metrics whose arm means agree within this everywhere are folded into one line.
FOLD_TOLERANCE = 0.001


class Advice(StrEnum):
    """What the data support doing with a candidate (along one series)."""

    ADOPT = "adopt"  # better somewhere, worse nowhere
    KEEP = "keep"  # worse somewhere, better nowhere
    SPLIT = "split"  # better in one regime, worse in another
    EITHER = "either"  # the same everywhere it is decided
    UNDECIDED = "undecided"  # no cell decided


@dataclass(frozen=True)
class Stretch:
    """Consecutive cells along the axis with one confident verdict (better or worse)."""

    verdict: CellVerdict
    cells: list[Comparison]


@dataclass(frozen=True)
class Direction:
    """Which way the undecided changes point and how consistently: what an undecided
    headline still says ('+26% at all 3 points, each measured once')."""

    up: int  # cells whose candidate mean is above the baseline's
    down: int
    cells: int
    lo: float | None
    hi: float | None
    max_n: int  # the most runs of one arm in one cell (1: each measured once)
    min_n: int


@dataclass(frozen=True)
class Recommendation:
    """A candidate's advice along one series of the primary metric."""

    slice: str
    series: str
    candidate: str
    baseline: str
    advice: Advice
    overall: OverallVerdict
    stretches: list[Stretch]
    crossovers: list[Crossover]
    undecided: list[Comparison]
    direction: Direction
    non_monotone: bool
    provisional: bool
    suspect: bool
    runs_needed: int | None  # the most any undecided cell needs per arm, if known
    no_noise: bool
    #: What each undecided cell needs per arm, where known (the settle line says how many
    #: points a smaller number would already decide).
    runs_needed_each: tuple[int, ...] = ()


def _series_label(series: Series, varying: set[str] | None = None) -> str:
    """The series' point keys off the axis that tell it from its siblings ('input_len 512')."""
    return " · ".join(
        f"{k} {v}" for k, v in sorted(series.fixed.items()) if varying is None or k in varying
    )


def varying_keys(all_series: Sequence[Series]) -> set[str]:
    """Keys off the axis whose values differ between the series of one metric."""
    keys = {k for s in all_series for k in s.fixed}
    return {k for k in keys if len({repr(s.fixed.get(k)) for s in all_series}) > 1}


def stretches(series: Series) -> list[Stretch]:
    """The confident regimes of a series, in axis order, each with its cells."""
    by_id = {c.point_id: c for c in series.cells}
    return [
        Stretch(r.verdict, [by_id[p] for p in r.point_ids if p in by_id])
        for r in series.regimes
        if r.verdict in (CellVerdict.BETTER, CellVerdict.WORSE)
    ]


def direction(cells: Sequence[Comparison]) -> Direction:
    """Sign and spread of the changes (the candidate's mean against the baseline's)."""
    changes = [c.change for c in cells if c.change is not None]
    ns = [n for c in cells for n in (c.baseline.n, c.candidate.n)]
    return Direction(
        up=sum(1 for x in changes if x > 0),
        down=sum(1 for x in changes if x < 0),
        cells=len(changes),
        lo=min(changes) if changes else None,
        hi=max(changes) if changes else None,
        max_n=max(ns) if ns else 0,
        min_n=min(ns) if ns else 0,
    )


def _advice(found: Sequence[Stretch], cells: Sequence[Comparison]) -> Advice:
    verdicts = {s.verdict for s in found}
    if verdicts == {CellVerdict.BETTER}:
        return Advice.ADOPT
    if verdicts == {CellVerdict.WORSE}:
        return Advice.KEEP
    if verdicts:
        return Advice.SPLIT
    if any(c.verdict == CellVerdict.SAME for c in cells):
        return Advice.EITHER
    return Advice.UNDECIDED


def recommendations(verdict: Verdict) -> list[Recommendation]:
    """One per (slice, candidate, series) of the primary metric, in the verdict's order."""
    out = []
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, verdict.settings.primary)
            if mr is None:
                continue
            varying = varying_keys(mr.series)
            for series in mr.series:
                found = stretches(series)
                undecided = [c for c in series.cells if c.verdict == CellVerdict.INCONCLUSIVE]
                needed = [  # a count read off a σ too uncertain to print an interval is no advice
                    c.runs_needed
                    for c in undecided
                    if c.runs_needed is not None
                    and (c.change_lo is None or fmt.interval_usable(c.change_lo, c.change_hi))
                ]
                out.append(
                    Recommendation(
                        slice=sl.slice,
                        series=_series_label(series, varying),
                        candidate=cand.candidate,
                        baseline=verdict.settings.baseline,
                        advice=_advice(found, series.cells),
                        overall=mr.overall.verdict,
                        stretches=found,
                        crossovers=list(series.crossovers),
                        undecided=undecided,
                        direction=direction(series.cells),
                        non_monotone=series.non_monotone,
                        provisional=any(c.provisional for s in found for c in s.cells),
                        suspect=cand.suspect,
                        runs_needed=max(needed) if needed else None,
                        no_noise=mr.sigma.value is None,
                        runs_needed_each=tuple(sorted(needed)),
                    )
                )
    return out


def primary_result(metrics: Sequence[MetricResult], primary: str) -> MetricResult | None:
    return next((m for m in metrics if m.metric == primary), None)


# ------------------------------------------------------------------------------ checks


@dataclass(frozen=True)
class ExplanationCheck:
    """What the reruns that tested one explanation (warm-up, odd instance) showed."""

    explanation: Explanation
    outcome: CheckOutcome  # falsified only when every test of it falsified it
    reruns: list[Rerun]  # the tests, the one to cite first


@dataclass(frozen=True)
class Checks:
    explanations: list[ExplanationCheck]
    agreement: dict[str, float]  # candidate -> output agreement with the baseline
    suspect: list[str]
    failed_measurements: int
    failed_requests: int
    total_requests: int
    replicates: list[Rerun] = field(default_factory=list)  # routine reruns, no explanation


def checks(verdict: Verdict) -> Checks:
    """The explanations the reruns tested and how they came out, the output agreement and the
    failures, counted once per (arm, point) over the primary metric's cells."""
    by_kind: dict[Explanation, list[Rerun]] = {}
    replicates = []
    for r in verdict.reruns:
        if r.tests == Explanation.REPLICATE or r.outcome is None:
            replicates.append(r)
        else:
            by_kind.setdefault(r.tests, []).append(r)
    explanations = []
    for kind, tests in by_kind.items():
        outcomes = {r.outcome for r in tests}
        if outcomes == {CheckOutcome.FALSIFIED}:
            outcome = CheckOutcome.FALSIFIED
        elif CheckOutcome.CONFIRMED in outcomes:
            outcome = CheckOutcome.CONFIRMED
        else:
            outcome = CheckOutcome.NOT_SETTLED
        # cite a test with the outcome, the first one run
        cited = sorted(tests, key=lambda r: r.outcome != outcome)  # stable: run order
        explanations.append(ExplanationCheck(kind, outcome, cited))
    # The analysis's own warm-up finding (over all of an arm's repeats) outranks single
    # reruns: a line saying "ruled out" beside a warm-up caveat would contradict it.
    if any(c.kind == CaveatKind.WARMUP for c in verdict.caveats):
        explanations = [e for e in explanations if e.explanation != Explanation.WARMUP]
        warm = by_kind.get(Explanation.WARMUP, [])
        explanations.insert(0, ExplanationCheck(Explanation.WARMUP, CheckOutcome.CONFIRMED, warm))
    seen: dict[tuple[str, str, str], tuple[int, int, int]] = {}
    for sl, _cand, cell in verdict.comparisons():
        for arm in (cell.baseline, cell.candidate):
            seen[(sl, arm.arm, cell.point_id)] = (
                arm.failed_measurements,
                arm.failed_requests,
                arm.total_requests,
            )
    agreement: dict[str, float] = {}
    suspect: list[str] = []
    for sl_result in verdict.slices:
        for c in sl_result.candidates:
            if c.correctness is not None:
                agreement[c.candidate] = min(agreement.get(c.candidate, 1.0), c.correctness)
            if c.suspect and c.candidate not in suspect:
                suspect.append(c.candidate)
    return Checks(
        explanations=explanations,
        agreement=agreement,
        suspect=suspect,
        failed_measurements=sum(v[0] for v in seen.values()),
        failed_requests=sum(v[1] for v in seen.values()),
        total_requests=sum(v[2] for v in seen.values()),
        replicates=replicates,
    )


# ------------------------------------------------------------------------------ why


@dataclass(frozen=True)
class Movement:
    """How one secondary metric moved over a set of points where the primary did one thing."""

    metric: str
    higher_is_better: bool
    changes: list[tuple[float | None, float]]  # (x, change) at each point measured
    better: int  # confident better / worse / same verdicts among them
    worse: int
    same: int
    folded_into: str | None = None


@dataclass(frozen=True)
class Attribution:
    """Where the primary went one way (a stretch, or every cell when none is decided), and
    what each secondary metric did at those points."""

    candidate: str
    slice: str
    verdict: CellVerdict | None  # None: the cells are undecided
    xs: list[float | None]
    movements: list[Movement]


def _cells_by_point(mr: MetricResult) -> dict[str, Comparison]:
    return {c.point_id: c for s in mr.series for c in s.cells}


def attributions(verdict: Verdict, folded: dict[str, str]) -> list[Attribution]:
    """For each candidate and each confident stretch of the primary (or all of its cells when
    none is confident), the secondary metrics at the same points: the 'why' of a change read
    off the data (decode step time, time to first token), not a cause the harness proved."""
    out = []
    primary = verdict.settings.primary
    for sl in verdict.slices:
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, primary)
            if mr is None:
                continue
            groups: list[tuple[CellVerdict | None, list[Comparison]]] = []
            for series in mr.series:
                found = stretches(series)
                if found:
                    groups += [(s.verdict, s.cells) for s in found]
                else:
                    groups.append((None, list(series.cells)))
            seconds = [m for m in cand.metrics if m.metric != primary]
            for verdict_of, cells in groups:
                ids = [c.point_id for c in cells]
                moves = []
                for m in seconds:
                    by_id = _cells_by_point(m)
                    here = [by_id[i] for i in ids if i in by_id and by_id[i].change is not None]
                    if not here:
                        continue
                    moves.append(
                        Movement(
                            metric=m.metric,
                            higher_is_better=m.higher_is_better,
                            changes=[(c.x, c.change) for c in here if c.change is not None],
                            better=sum(1 for c in here if c.verdict == CellVerdict.BETTER),
                            worse=sum(1 for c in here if c.verdict == CellVerdict.WORSE),
                            same=sum(1 for c in here if c.verdict == CellVerdict.SAME),
                            folded_into=folded.get(m.metric),
                        )
                    )
                out.append(
                    Attribution(
                        candidate=cand.candidate,
                        slice=sl.slice,
                        verdict=verdict_of,
                        xs=[c.x for c in cells],
                        movements=moves,
                    )
                )
    return out


# ------------------------------------------------------------------------------ folding


def _means(verdict: Verdict, metric: str) -> list[float | None]:
    return [
        v
        for _sl, _cand, c in verdict.comparisons(metric)
        for v in (c.baseline.mean, c.candidate.mean)
    ]


def _identical(a: list[float | None], b: list[float | None], tol: float) -> bool:
    if len(a) != len(b) or not a:
        return False
    for x, y in zip(a, b, strict=True):
        if x is None or y is None:
            if x is not y:
                return False
            continue
        if x == y:
            continue
        if y == 0 or abs(x / y - 1) > tol:
            return False
    return True


def folded_metrics(verdict: Verdict, tol: float = FOLD_TOLERANCE) -> dict[str, str]:
    """metric → the earlier metric it matches within `tol` in every arm mean of every cell
    (sglang's mean ITL equals mean TPOT when every request streams its tokens one by one):
    the later one is folded into a line instead of repeating a table value for value."""
    metrics = verdict.settings.metrics
    means = {m: _means(verdict, m) for m in metrics}
    out: dict[str, str] = {}
    for i, m in enumerate(metrics):
        for earlier in metrics[:i]:
            if earlier not in out and _identical(means[m], means[earlier], tol):
                out[m] = earlier
                break
    return out


# ------------------------------------------------------------------------------ SLO


@dataclass(frozen=True)
class SloBest:
    """One arm's best primary value among the points where it meets every SLO bound."""

    arm: str
    slice: str
    series: str
    x: float | None
    value: float | None  # None: no point meets the SLO
    points_meeting: int
    points: int
    missing: list[str]  # SLO metrics the run did not measure


def meets(value: float | None, bound: SloBound) -> bool:
    if value is None:
        return False
    if bound.max is not None and value > bound.max:
        return False
    return not (bound.min is not None and value < bound.min)


def slo_best(verdict: Verdict, slo: Sequence[SloBound]) -> list[SloBest]:
    """The goodput view: for each arm (baseline once per slice, then each candidate) and
    series, the best primary mean at a point where the arm's means meet every bound. An
    arm mean is a geometric mean over its runs, so a point 'meets' on the average run."""
    if not slo:
        return []
    primary = verdict.settings.primary
    better_high = True
    out: list[SloBest] = []
    for sl in verdict.slices:
        done_baseline: set[str] = set()
        for cand in sl.candidates:
            mr = primary_result(cand.metrics, primary)
            if mr is None:
                continue
            better_high = mr.higher_is_better
            by_metric = {m.metric: _cells_by_point(m) for m in cand.metrics}
            missing = [b.metric for b in slo if b.metric not in by_metric]
            varying = varying_keys(mr.series)
            for series in mr.series:
                label = _series_label(series, varying)
                roles = [("candidate", cand.candidate)]
                if label not in done_baseline:
                    roles.insert(0, ("baseline", verdict.settings.baseline))
                    done_baseline.add(label)
                for role, arm in roles:
                    best: tuple[float, float | None] | None = None
                    meeting = 0
                    for c in series.cells:
                        sample = c.baseline if role == "baseline" else c.candidate
                        ok = not missing and all(
                            meets(
                                getattr(by_metric[b.metric].get(c.point_id), role).mean
                                if c.point_id in by_metric[b.metric]
                                else None,
                                b,
                            )
                            for b in slo
                        )
                        if not ok or sample.mean is None:
                            continue
                        meeting += 1
                        v = sample.mean
                        if best is None or (v > best[0] if better_high else v < best[0]):
                            best = (v, c.x)
                    out.append(
                        SloBest(
                            arm=arm,
                            slice=sl.slice,
                            series=label,
                            x=best[1] if best else None,
                            value=best[0] if best else None,
                            points_meeting=meeting,
                            points=len(series.cells),
                            missing=missing,
                        )
                    )
    return out

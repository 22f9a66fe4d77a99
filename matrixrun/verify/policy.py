"""The repeat-to-verify policy: which cells to run again and why, decided from the spec's
verify block and the measurements so far (see the package docstring).

Not pure, and not meant to be: a `Policy` keeps what its last analysis found and what the
driver measured. Its answers depend only on the spec, the plan and the measurements passed
in (a resumed run, given the same measurements, asks for the same reruns), but between calls
it holds state: `_aside` (the warm runs the latest analysis set aside, which `_n` leaves out:
rewritten by every `_verdict`), `proposed` (bisection's and capacity's latest new cells,
rewritten by every `next_round`, read by `adopt`) and the plan with its indexes (`cells`,
`group_of`, `by_point_arm`), which `adopt` grows by the proposed cells the driver measures
(and `_new_points` by their groups). So call `next_round` before `adopt`, and `_n` after a
`_verdict` of the same measurements."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from matrixrun.analysis import analyse, one_run_sigma, quantile
from matrixrun.analysis.warm import warm_runs
from matrixrun.core.keeping import counted_runs
from matrixrun.core.measurement import Failure, Measurement, Reason, wall_seconds
from matrixrun.core.rerun_reason import RerunWhy, WhyKind
from matrixrun.core.tuning import BISECTION_RUNS, FUTILITY, FUTILITY_MIN_RUNS, MIN_FRESH_DF
from matrixrun.core.verdict import CellNote, Comparison, Verdict
from matrixrun.plan import Cell, Plan, ServerGroup, sweep_order
from matrixrun.rundir.settings import analysis_settings, rounds
from matrixrun.spec import Spec
from matrixrun.verify import bisect, capacity
from matrixrun.verify.chance import decide_chance


@dataclass(frozen=True)
class Pick:
    """A rerun the policy asks for: the cell, its reason, and the numbers behind it."""

    cell: Cell
    reason: Reason
    why: RerunWhy
    #: Seconds one run will take when the cell has no run yet (a bisection cell), else None.
    cost: float | None = None
    #: A warm-up partner check (`Policy._warm_partners`): once measured on its launch, the
    #: cell is measured again there, warm (reason "surprise").
    warm_repeat: bool = False


#: Order in which picks claim the budget: checks of named explanations, σ, then the cells.
_PRIORITY: dict[str, int] = {
    "aa": 0,
    "fresh_server": 1,
    "calibration": 2,
    "crossover": 3,
    "bisection": 3,
    "undecided": 4,
}


class Policy:
    """The spec's verify block applied to the measurements so far; stateful between calls
    (the module docstring says which state and who writes it)."""

    def __init__(self, spec: Spec, plan: Plan) -> None:
        self.spec = spec
        self.plan = plan
        self.settings = analysis_settings(spec, plan)
        #: the rounds max_runs implies, and one more for the cells the last of them left
        #: short of max_runs (`_extra_round`): those whose warm runs were set aside
        #: (`analysis.warm`), and those the last round's data unsettled
        self.planned_rounds = rounds(spec)
        adaptive = spec.verify.max_runs >= 2 and spec.verify.design != "fixed"
        self.rounds = self.planned_rounds + (1 if adaptive else 0)
        self.cells = {c.cell_id: c for c in plan.cells()}
        self.group_of = {c.cell_id: g for g in plan.groups for c in g.cells}
        self.by_point_arm = {(c.slice, c.point_id, c.arm): c for c in plan.cells()}
        #: Bisection's latest proposals, by cell id (`adopt` puts them in the plan).
        self.proposed: dict[str, bisect.Proposal] = {}
        #: (cell id, attempt) of the warm runs the last analysis left out (`analysis.warm`):
        #: they test the warm-up, they are not among the runs `max_runs` counts.
        self._aside: set[tuple[str, int]] = set()

    def expected_runs(self) -> int:
        """Runs the progress display starts with: the first pass (reruns add to it)."""
        return len(self.cells)

    # -- helpers -------------------------------------------------------------------------
    def _n(self, cell: Cell, ms: Sequence[Measurement]) -> int:
        """Runs of `cell` toward `max_runs`: all but the warm runs set aside and the runs that
        fell behind (`core.keeping`: a busy host's, which carry no value and which the runner
        measures again on a slower relaunch). Counted, a run that fell behind took a cell's
        last run from it: a fixed-design calibration on a loaded host ended with 2 runs of a
        cell where it promised 3."""
        return counted_runs(cell.cell_id, ms, self.settings.primary, self._aside)

    def _verdict(self, ms: Sequence[Measurement]) -> Verdict:
        verdict = analyse(ms, self.settings)
        keys = {(w.slice, w.point_id, w.arm) for w in verdict.warm_aside}
        warm = warm_runs(ms, self.settings.primary) if keys else {}
        self._aside = {run for run, key in warm.items() if key in keys}
        return verdict

    def _primary_cells(self, verdict: Verdict) -> list[tuple[str, str, Comparison]]:
        return verdict.comparisons(self.settings.primary)

    def _measured_warm(self, cell: Cell, ms: Sequence[Measurement]) -> bool:
        """Whether `cell` has two successful runs on one server (a warm one among them)."""
        servers = [m.instance for m in ms if m.cell_id == cell.cell_id and m.ok]
        return len(set(servers)) < len(servers)

    def _has(self, cell: Cell, ms: Sequence[Measurement], reason: str) -> bool:
        return any(m.cell_id == cell.cell_id and m.reason == reason for m in ms)

    def rerun_time_spent(self, ms: Sequence[Measurement]) -> float:
        """GPU time the reruns have spent: their cells, plus a launch (the spec's estimate)
        for every server instance that served reruns only (a stage-2 relaunch)."""
        first = {m.instance for m in ms if m.reason == "first"}
        relaunched = {m.instance for m in ms if m.reason != "first"} - first
        launch = self.spec.estimate.launch or 0.0
        return sum(wall_seconds(m) for m in ms if m.reason != "first") + launch * len(relaunched)

    def _worth(self, res: Comparison, verdict: Verdict) -> float:
        """Predicted chance that more runs settle `res` within max_runs (1 with no σ yet:
        then runs are needed to measure σ at all)."""
        sigma = next(s for s in verdict.sigma if s.metric == self.settings.primary)
        one = one_run_sigma(sigma, res.x)
        if one is None or res.d is None:
            return 1.0
        # Optimistic on purpose (normal quantile: df grows with the runs; a warm σ may
        # understate): futility should stop only what cannot be settled. σ is the cell's
        # own point's (run noise there plus the launch part), at the last state's level.
        q = quantile(self.settings.level, None)
        return decide_chance(
            res.d,
            one,
            max(res.baseline.n, 1),
            max(res.candidate.n, 1),
            self.spec.verify.max_runs,
            self.settings.margin_for(self.settings.primary),
            q,
        )

    # -- stage 1 ---------------------------------------------------------------------------
    def warm_reruns(
        self, group: ServerGroup, ms: Sequence[Measurement]
    ) -> list[tuple[Cell, RerunWhy]]:
        """Cells of `group` (its server still up) whose comparison is surprising in the
        direction first-run warmup would explain — this arm looks slow — and that have not had
        their warm rerun: rerun now, on the same server. (A compile on first use can only make
        a run slower, so a surprise in the arm's favour is no case for this check.)"""
        v = self.spec.verify
        if not v.warm_rerun or v.max_runs < 2:
            return []
        own = {c.cell_id for c in group.cells}
        picks: list[Pick] = []
        for slice_name, candidate, res in self._primary_cells(self._verdict(ms)):
            if not res.surprise or res.d is None:
                continue
            slow = candidate if res.d < 0 else self.plan.baseline
            if group.arm != slow:
                continue
            cell = self.by_point_arm.get((slice_name, res.point_id, group.arm))
            if cell is None or cell.cell_id not in own:
                continue
            if self._has(cell, ms, "surprise") or self._n(cell, ms) >= v.max_runs:
                continue
            if any(p.cell.cell_id == cell.cell_id for p in picks):
                continue
            picks.append(
                Pick(
                    cell,
                    "surprise",
                    RerunWhy(
                        kind=WhyKind.WARM_CHECK,
                        arm=group.arm,
                        baseline=self.plan.baseline,
                        change=res.change,
                        surprise=v.surprise,
                    ),
                )
            )
        return [(p.cell, p.why) for p in self._within_budget(picks, ms, launch=False)]

    # -- stage 2 ---------------------------------------------------------------------------
    def next_round(
        self, round_no: int, ms: Sequence[Measurement]
    ) -> list[tuple[ServerGroup, list[Pick]]]:
        """Round `round_no` of stage 2: which cells to rerun, why, grouped by server launch in
        ABBA order, trimmed to the budget. Picks, by reason:

        - inconclusive: the arm(s) whose n limits the interval, unless the futility rule says
          the runs left cannot settle it (`FUTILITY`, once both arms have `FUTILITY_MIN_RUNS`);
        - fresh_server: per candidate server with surprising cells, its most surprising cell
          once on a fresh launch (an odd instance shifts all its cells, so one rerun tests it),
          unless an inconclusive rerun of one of them already does;
        - crossover: both arms of cells bracketing a sign change, while n = 1;
        - bisection (`verify.bisect`): a new cell at the bracket's midpoint (`bisect.choose`);
        - capacity (with an SLO): loads within noise of a bound again, and a new cell of one
          arm at its capacity bracket's midpoint (`capacity.choose`);
        - aa: with `verify.aa`, every baseline cell once more on a fresh server in round 1.
        """
        v = self.spec.verify
        if round_no > self.rounds:
            return []
        verdict = self._verdict(ms)
        results = self._primary_cells(verdict)
        wanted: dict[str, Pick] = {}
        worth: dict[str, float] = {}

        def want(
            cell: Cell | None,
            reason: Reason,
            why: RerunWhy,
            value: float = 1.0,
            warm_repeat: bool = False,
        ) -> None:
            if cell is None or cell.cell_id in wanted or self._n(cell, ms) >= v.max_runs:
                return
            if not any(m.ok for m in ms if m.cell_id == cell.cell_id) and not capped_once(
                cell.cell_id, ms
            ):
                return  # never measured (server would not start, crashed): report, don't retry
            wanted[cell.cell_id] = Pick(cell, reason, why, warm_repeat=warm_repeat)
            worth[cell.cell_id] = value

        if v.aa and round_no == 1:
            for g in self.plan.groups:
                if g.arm == self.plan.baseline:
                    for cell in g.cells:
                        if not self._has(cell, ms, "aa"):
                            want(cell, "aa", RerunWhy(kind=WhyKind.AA))
        if v.fresh_server:
            self._unstable_launches(verdict, want)
        if v.warm_rerun:
            self._warm_partners(results, ms, want)
        self._capped(ms, want)
        self._undecided(verdict, results, want)
        if v.fresh_server:
            self._instance_checks(results, ms, want)
        brackets = self._crossover_brackets(results)
        for slice_name, candidate, bracket in brackets:
            for res in bracket:
                for arm in (self.plan.baseline, candidate):
                    end = self.by_point_arm.get((slice_name, res.point_id, arm))
                    if end is not None and self._n(end, ms) == 1:
                        why = RerunWhy(kind=WhyKind.CROSSOVER, axis=self.plan.axis, x=res.x)
                        want(end, "crossover", why)
        for pick in self._new_points(brackets, ms, want):
            wanted.setdefault(pick.cell.cell_id, pick)
        calibration: set[str] = set()
        if wanted:
            calibration = self._calibration(results, ms, set(wanted), want, round_no)

        def rank(p: Pick) -> tuple[int, float]:
            kind = "calibration" if p.cell.cell_id in calibration else p.reason
            return _PRIORITY.get(kind, 9), -worth.get(p.cell.cell_id, 1.0)

        picks = sorted(wanted.values(), key=rank)
        if round_no > self.planned_rounds:
            picks = self._extra_round(picks, ms)
        return self._batched(self._within_budget(picks, ms, launch=True), round_no)

    def _new_points(
        self,
        brackets: list[tuple[str, str, list[Comparison]]],
        ms: Sequence[Measurement],
        want: Callable[[Cell | None, Reason, RerunWhy], None],
    ) -> list[Pick]:
        """The cells to add off the grid: crossover midpoints (`bisect.choose`) and capacity
        midpoints (`capacity.choose`, whose reruns of loads within noise of an SLO bound go
        through `want`: they have runs), remembered for `adopt`. A new cell has no run yet,
        so it is a pick of its own rather than `want`'s, with reason `bisection` either way
        (one path through the schedule, plan.json and a resume)."""
        proposals = bisect.choose(self.spec, self.plan, brackets, ms)
        more, near = capacity.choose(
            self.spec, self.plan, self.settings, ms, proposals, aside=self._aside
        )
        for cell, why in near:
            want(cell, "undecided", why)
        proposals += more
        self.proposed = {p.cell.cell_id: p for p in proposals}
        for p in proposals:
            self.group_of.setdefault(p.cell.cell_id, self.plan.group(p.group_id))
        return [Pick(p.cell, "bisection", p.why, p.cost) for p in proposals]

    def _extra_round(self, picks: list[Pick], ms: Sequence[Measurement]) -> list[Pick]:
        """The round after those max_runs implies serves the cells the planned rounds left
        short of max_runs: those with a warm run set aside at their point (either arm),
        partner checks, and undecided cells with runs left — a cell decided when the last
        round was chosen, which that round's runs elsewhere unsettled (the pooled σ moved),
        had no round left to get its last run in. Its levels are keyed to its runs, not
        to the round (`AnalysisSettings.level_at`), so the extra round spends no α."""
        points = {(self.cells[cid].slice, self.cells[cid].point_id) for cid, _ in self._aside}
        return [
            p
            for p in picks
            if p.warm_repeat
            or (p.cell.slice, p.cell.point_id) in points
            or p.why.kind == WhyKind.UNDECIDED
        ]

    def _undecided(
        self,
        verdict: Verdict,
        results: list[tuple[str, str, Comparison]],
        want: Callable[[Cell | None, Reason, RerunWhy, float], None],
    ) -> None:
        """More runs of the arm(s) whose n limits an inconclusive cell's interval, unless the
        futility rule says the runs left cannot settle it (judged only once both arms have
        `FUTILITY_MIN_RUNS` runs: one run per arm is too few to give a cell up on)."""
        v = self.spec.verify
        primary_sigma = next(x for x in verdict.sigma if x.metric == self.settings.primary)
        no_sigma = primary_sigma.value is None
        for slice_name, candidate, res in results:
            if res.verdict != "undecided":
                continue
            chance = self._worth(res, verdict)
            judged = min(res.baseline.n, res.candidate.n) >= FUTILITY_MIN_RUNS
            if chance < FUTILITY and judged:
                continue
            # an arm with no run to compare is what limits the cell (the other has its run)
            unmeasured = [
                arm
                for arm, n in ((self.plan.baseline, res.baseline.n), (candidate, res.candidate.n))
                if n == 0
            ]
            arms = unmeasured or {"baseline": [self.plan.baseline], "candidate": [candidate]}.get(
                res.limiting_arm or "", [self.plan.baseline, candidate]
            )
            for arm in arms:
                want(
                    self.by_point_arm.get((slice_name, res.point_id, arm)),
                    "undecided",
                    RerunWhy(
                        kind=WhyKind.UNDECIDED,
                        arm=arm,
                        cell=res,
                        no_sigma=no_sigma,
                        max_runs=v.max_runs,
                        chance=chance,
                    ),
                    chance,
                )

    def _capped(
        self, ms: Sequence[Measurement], want: Callable[[Cell | None, Reason, RerunWhy], None]
    ) -> None:
        """A cell whose only failure is one run the time cap cut (requests cut in flight or
        never sent: not compared, `Failure.CAPPED`) is measured once more on a fresh launch:
        a server that stalled, or connections that went stale, may not do it again. Once
        only: a cap too short for the cell's workload would cut every run, and the run
        says so instead of spending the budget on it."""
        for cell_id in sorted({m.cell_id for m in ms}):
            cell = self.cells.get(cell_id)
            if cell is not None and capped_once(cell_id, ms):
                want(cell, "undecided", RerunWhy(kind=WhyKind.CAPPED, arm=cell.arm))

    def _warm_partners(
        self,
        results: list[tuple[str, str, Comparison]],
        ms: Sequence[Measurement],
        want: Callable[..., None],
    ) -> None:
        """A cell where one arm's confirmed warm-up could account for the verdict (or will,
        once the interval narrows: its warm runs were set aside there), while the other arm
        was never measured warm there, cannot tell "this arm is slow only cold" from "this
        engine is slow cold at this shape": the other arm on its next launch, then once more
        on it, warm (`Pick.warm_repeat`) — which the warm-up check then sets against the first
        arm's gap (`comparison.warmup_shift`)."""
        aside = {(self.cells[cid].slice, self.cells[cid].point_id) for cid, _ in self._aside}
        for slice_name, candidate, res in results:
            led = bool(res.notes) and res.notes[0] == CellNote.WARMUP
            if not led and (slice_name, res.point_id) not in aside:
                continue
            for arm in (self.plan.baseline, candidate):
                cell = self.by_point_arm.get((slice_name, res.point_id, arm))
                if cell is None or self._has(cell, ms, "surprise"):
                    continue
                if self._measured_warm(cell, ms):
                    continue
                want(
                    cell,
                    "fresh_server",
                    RerunWhy(kind=WhyKind.WARM_PARTNER, arm=arm, change=res.change, x=res.x),
                    1.0,
                    True,
                )

    def _unstable_launches(
        self, verdict: Verdict, want: Callable[[Cell | None, Reason, RerunWhy], None]
    ) -> None:
        """Launches of one configuration that disagree beyond run noise at a point
        (`Verdict.launch_check`) are an odd-server question: the cell once more on a further
        fresh launch of that group, first in the round, rather than more runs on the launches
        that disagree (which would only measure each of them better)."""
        check = verdict.launch_check
        for s in check.unstable if check is not None else []:
            want(
                self.by_point_arm.get((s.slice, s.point_id, s.arm)),
                "fresh_server",
                RerunWhy(kind=WhyKind.UNSTABLE_LAUNCH, arm=s.arm, change=s.spread, x=s.x),
            )

    def _instance_checks(
        self,
        results: list[tuple[str, str, Comparison]],
        ms: Sequence[Measurement],
        want: Callable[[Cell | None, Reason, RerunWhy], None],
    ) -> None:
        """ "This server instance was odd": one fresh-server rerun per candidate server whose
        cells surprised, of its most surprising cell, once per group."""
        by_group: dict[str, list[tuple[float, Cell, Comparison]]] = {}
        for slice_name, candidate, res in results:
            cell = self.by_point_arm.get((slice_name, res.point_id, candidate))
            if cell is None or not res.surprise or res.change is None:
                continue
            by_group.setdefault(self.group_of[cell.cell_id].group_id, []).append(
                (abs(res.change), cell, res)
            )
        first = {m.instance for m in ms if m.reason == "first"}
        for group_id, found in by_group.items():
            if any(m.group_id == group_id and m.instance not in first for m in ms):
                continue  # a relaunch of this group has served reruns: the check is done
            _, cell, res = max(found, key=lambda t: t[0])
            want(
                cell,
                "fresh_server",
                RerunWhy(kind=WhyKind.INSTANCE_CHECK, change=res.change),
            )

    def _calibration(
        self,
        results: list[tuple[str, str, Comparison]],
        ms: Sequence[Measurement],
        picked: set[str],
        want: Callable[[Cell | None, Reason, RerunWhy], None],
        round_no: int = 1,
    ) -> set[str]:
        """Once a round relaunches anything, the analysis will judge every cell with the
        fresh-server σ; top its degrees of freedom up to `MIN_FRESH_DF` (or as many as the
        matrix has cells) with fresh replicates of cells not yet picked — first those whose
        verdict the new σ could move (inconclusive, then confident or same by the smallest
        |change|), preferring servers this round relaunches anyway. Returns the cell ids."""
        instances: dict[str, set[str]] = {}
        for m in ms:
            if m.ok:
                instances.setdefault(m.cell_id, set()).add(m.instance)
        df = sum(max(len(v) - 1, 0) for v in instances.values())
        df += sum(1 for cid in picked if instances.get(cid))
        target = min(MIN_FRESH_DF, len(self.cells))
        if df >= target:
            return set()
        groups = {self.group_of[cid].group_id for cid in picked}
        # the round's first launch first: its replicates bring σ before the later launches
        # (and its own re-choice) decide which inconclusive cells still need runs
        position = {g.group_id: i for i, g in enumerate(self._order(round_no))}
        order: list[tuple[bool, int, bool, float, Cell]] = []
        for slice_name, candidate, res in results:
            arms = [candidate, self.plan.baseline]
            if res.limiting_arm == "baseline":
                arms.reverse()
            for arm in arms:
                cell = self.by_point_arm.get((slice_name, res.point_id, arm))
                if cell is None or cell.cell_id in picked or not instances.get(cell.cell_id):
                    continue
                order.append(
                    (
                        self.group_of[cell.cell_id].group_id not in groups,
                        position[self.group_of[cell.cell_id].group_id],
                        res.verdict != "undecided",
                        abs(res.d or 0.0),
                        cell,
                    )
                )
        added: set[str] = set()
        for *_, cell in sorted(order, key=lambda t: t[:4]):
            if df >= target:
                break
            if cell.cell_id in added or self._n(cell, ms) >= self.spec.verify.max_runs:
                continue
            want(
                cell,
                "fresh_server",
                RerunWhy(kind=WhyKind.SIGMA_REPLICATE, target_df=target),
            )
            added.add(cell.cell_id)
            df += 1
        return added

    def _crossover_brackets(
        self, results: list[tuple[str, str, Comparison]]
    ) -> list[tuple[str, str, list[Comparison]]]:
        out = []
        series: dict[tuple[str, str], list[Comparison]] = {}
        for s, c, res in results:
            series.setdefault((s, c), []).append(res)
        for (s, c), cells in series.items():
            confident = sorted(
                (r for r in cells if r.confident and r.x is not None), key=lambda r: float(r.x or 0)
            )
            for a, b in itertools.pairwise(confident):
                if a.verdict != b.verdict:
                    out.append((s, c, [a, b]))
        return out

    def _within_budget(
        self, picks: list[Pick], ms: Sequence[Measurement], *, launch: bool
    ) -> list[Pick]:
        """Keep picks, in priority order, while the rerun budget lasts: each costs its cell's
        longest run so far (twice for a warm-up partner check), plus one launch per group not
        yet launched this round (stage 2).
        A pick that does not fit is dropped and cheaper later ones may still fit."""
        budget = self.spec.verify.budget
        if budget is None:
            return picks
        left = budget - self.rerun_time_spent(ms)
        kept = []
        launch_s = (self.spec.estimate.launch or 0.0) if launch else 0.0
        launched: set[str] = set()
        for pick in picks:
            first = [m for m in ms if m.cell_id == pick.cell.cell_id]
            default = pick.cost if pick.cost is not None else self.spec.estimate.cell
            cost = max((wall_seconds(m) for m in first), default=default or 0.0)
            cost *= 2 if pick.warm_repeat else 1  # the cell, then once more warm
            group = self.group_of[pick.cell.cell_id].group_id
            cost += 0.0 if group in launched else launch_s
            if cost > left:
                continue
            left -= cost
            launched.add(group)
            kept.append(pick)
        return kept

    def _order(self, round_no: int) -> list[ServerGroup]:
        """Launch order of a round: the plan's order reversed on odd rounds (ABBA)."""
        order = list(self.plan.groups)
        if round_no % 2 == 1:
            order.reverse()
        return order

    def _batched(self, picks: list[Pick], round_no: int) -> list[tuple[ServerGroup, list[Pick]]]:
        """One launch per group per round; arm order alternates by round (ABBA)."""
        order = self._order(round_no)
        by_group: dict[str, list[Pick]] = {}
        for pick in picks:
            by_group.setdefault(self.group_of[pick.cell.cell_id].group_id, []).append(pick)
        out = []
        for g in order:
            if g.group_id in by_group:
                cells = sorted(by_group[g.group_id], key=lambda p: sweep_order(p.cell))
                out.append((g, cells))
        return out

    def adopt(self, cell: Cell) -> list[Cell]:
        """The driver is about to measure `cell`, a bisection proposal: put it and every
        proposed cell at its point (the other arms) into the plan and the policy's indexes, so
        the completion rule finishes the point even if the bracket moves. Returns the cells
        newly added (the runner records them in plan.json before measuring)."""
        added = []
        for p in list(self.proposed.values()):
            if p.cell.slice != cell.slice or p.cell.point_id != cell.point_id:
                continue
            if self.plan.add_cell(p.group_id, p.cell):
                self.cells[p.cell.cell_id] = p.cell
                self.group_of[p.cell.cell_id] = self.plan.group(p.group_id)
                self.by_point_arm[(p.cell.slice, p.cell.point_id, p.cell.arm)] = p.cell
                added.append(p.cell)
        return added

    def warm_repeat_wanted(self, cell: Cell, ms: Sequence[Measurement]) -> bool:
        """Whether `cell`, just measured as a warm-up partner check (`Pick.warm_repeat`),
        gets its warm run now: its latest run succeeded and is its only one on that server."""
        runs = sorted((m for m in ms if m.cell_id == cell.cell_id), key=lambda m: m.attempt)
        if not runs or not runs[-1].ok:
            return False
        return sum(1 for m in runs if m.instance == runs[-1].instance) == 1

    def repeat_wanted(self, cell: Cell, ms: Sequence[Measurement]) -> bool:
        """Whether `cell`, just measured by bisection, gets its warm repeat now: its runs so
        far all succeeded, number fewer than `BISECTION_RUNS`, and max_runs allows one more."""
        runs = [m for m in ms if m.cell_id == cell.cell_id]
        limit = min(BISECTION_RUNS, self.spec.verify.max_runs)
        return bool(runs) and all(m.ok for m in runs) and len(runs) < limit


#: Failures of a run that the time cap ended (`Failure`): the server was serving.
_CAPPED = (Failure.CAPPED, Failure.CAPPED_EMPTY)


def capped_once(cell_id: str, ms: Sequence[Measurement]) -> bool:
    """Whether `cell_id` has no successful run and exactly one, which the time cap ended: the
    one case where a failed cell is measured again (`Policy._capped`)."""
    runs = [m for m in ms if m.cell_id == cell_id]
    capped = [m for m in runs if m.failure in _CAPPED]
    return len(capped) == 1 and len(runs) == 1

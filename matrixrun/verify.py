"""Repeat-to-verify: which cells to run again, why, and where (VERDICTS.md §6). Pure.

The policy is fixed by the spec's `verify` block before anything runs and is a function of the
measurements so far, so a resumed run asks for exactly the reruns the interrupted one would have:

- stage 1 (while a group's server is still up): cells whose |change| exceeds `surprise` get
  one warm rerun of the arm on that server — the test of "first-time JIT compile / warmup";
- stage 2, in at most `max_runs − 1` planned rounds (the number of looks is fixed here and the
  analysis widens its intervals for it, Bonferroni):
  * surprising cells get a rerun of the candidate on a freshly launched server (tests "this
    server instance was odd"; also the right replicate for σ),
  * cells whose confident verdicts flip sign (crossover brackets) get a fresh replicate of
    both arms while n = 1, so the bracket is not built on single runs,
  * inconclusive cells get more runs of the arm whose n limits the interval (both when equal),
  * with `aa`, every baseline cell once more on a fresh server in round 1 (A/A: σ without any
    candidate effect);
  groups are batched so each arm is relaunched once per round, in ABBA order across rounds,
  and a round that would exceed the rerun `budget` is trimmed to fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from matrixrun.analysis import analyse, iter_cells
from matrixrun.measurement import Measurement, Reason
from matrixrun.plan import Cell, Plan, ServerGroup
from matrixrun.spec import Spec
from matrixrun.verdict import AnalysisSettings
from matrixrun.verdict import Cell as CellResult

Pick = tuple[Cell, Reason, str]


def settings_for(spec: Spec, plan: Plan) -> AnalysisSettings:
    """Analysis settings implied by the spec (the same for the runner, report and policy)."""
    v = spec.verify
    return AnalysisSettings(
        baseline=plan.baseline, candidates=plan.candidates, primary=spec.metrics.primary,
        secondary=list(spec.metrics.secondary), margin=v.threshold, surprise=v.surprise,
        noise=v.noise, confidence=v.confidence, looks=looks(spec), failure_limit=v.failure_rate,
        axis=plan.axis, correctness_min=spec.correctness.floor,
    )


def rounds(spec: Spec) -> int:
    """Stage-2 rounds fixed by the plan: one per extra run a cell may get."""
    return max(spec.verify.max_runs - 1, 0)


def looks(spec: Spec) -> int:
    """Times the data are judged with the power to stop: after stage 1 and after each round."""
    return 1 + rounds(spec)


def _seconds(m: Measurement) -> float:
    if not (m.started_at and m.finished_at):
        return 0.0
    fmt = "%Y-%m-%dT%H:%M:%S.%f"
    start = datetime.strptime(m.started_at.rstrip("Z"), fmt)
    end = datetime.strptime(m.finished_at.rstrip("Z"), fmt)
    return max((end - start).total_seconds(), 0.0)


class Policy:
    def __init__(self, spec: Spec, plan: Plan) -> None:
        self.spec = spec
        self.plan = plan
        self.settings = settings_for(spec, plan)
        self.rounds = rounds(spec)
        self.cells = {c.cell_id: c for c in plan.cells()}
        self.group_of = {c.cell_id: g for g in plan.groups for c in g.cells}
        self.by_point_arm = {(c.slice, c.point_id, c.arm): c for c in plan.cells()}

    def expected_runs(self) -> int:
        return len(self.cells)

    # -- helpers -------------------------------------------------------------------------
    def _n(self, cell: Cell, ms: Sequence[Measurement]) -> int:
        return sum(1 for m in ms if m.cell_id == cell.cell_id)

    def _primary_cells(self, ms: Sequence[Measurement]) -> list[tuple[str, str, CellResult]]:
        verdict = analyse(ms, self.settings)
        return [(s, c, cell) for s, c, _, cell in iter_cells(verdict, self.settings.primary)]

    def _has(self, cell: Cell, ms: Sequence[Measurement], reason: str) -> bool:
        return any(m.cell_id == cell.cell_id and m.reason == reason for m in ms)

    def rerun_time_spent(self, ms: Sequence[Measurement]) -> float:
        return sum(_seconds(m) for m in ms if m.reason != "first")

    # -- stage 1 ---------------------------------------------------------------------------
    def warm_reruns(self, group: ServerGroup, ms: Sequence[Measurement]) -> list[tuple[Cell, str]]:
        """Cells of `group` (its server still up) whose comparison is surprising and that have
        not had their warm rerun: rerun now, on the same server."""
        v = self.spec.verify
        if not v.warm_rerun or v.max_runs < 2:
            return []
        picks: list[tuple[Cell, str]] = []
        for slice_name, candidate, res in self._primary_cells(ms):
            if not res.surprise or group.arm not in (candidate, self.plan.baseline):
                continue
            cell = self.by_point_arm.get((slice_name, res.point_id, group.arm))
            if cell is None or cell.cell_id not in {c.cell_id for c in group.cells}:
                continue
            if self._has(cell, ms, "surprise") or self._n(cell, ms) >= v.max_runs:
                continue
            if any(p[0].cell_id == cell.cell_id for p in picks):
                continue
            picks.append((cell, f"change {res.change:+.1%} vs {self.plan.baseline} exceeds the "
                                f"surprise threshold {v.surprise:.0%}: a warm rerun tests "
                                "first-run JIT compile/warmup"))
        return picks

    # -- stage 2 ---------------------------------------------------------------------------
    def next_round(self, round_no: int,
                   ms: Sequence[Measurement]) -> list[tuple[ServerGroup, list[Pick]]]:
        v = self.spec.verify
        if round_no > self.rounds:
            return []
        wanted: dict[str, Pick] = {}

        def want(cell: Cell | None, reason: Reason, why: str) -> None:
            if cell is None or cell.cell_id in wanted or self._n(cell, ms) >= v.max_runs:
                return
            wanted[cell.cell_id] = (cell, reason, why)

        results = self._primary_cells(ms)
        for slice_name, candidate, res in results:
            def arm_cell(arm: str, res: CellResult = res, s: str = slice_name) -> Cell | None:
                return self.by_point_arm.get((s, res.point_id, arm))

            cand = arm_cell(candidate)
            if v.fresh_server and res.surprise and cand is not None and not self._has(
                    cand, ms, "fresh_server"):
                want(cand, "fresh_server", f"change {res.change:+.1%} is surprising: a rerun "
                     "on a freshly launched server tests whether the first server was odd")
            if res.verdict == "inconclusive":
                arms = {"baseline": [self.plan.baseline], "candidate": [candidate]}.get(
                    res.limiting_arm or "", [self.plan.baseline, candidate])
                for arm in arms:
                    want(arm_cell(arm), "inconclusive", f"inconclusive ({res.text}); {arm}'s "
                         f"n limits the interval")
        for slice_name, candidate, bracket in self._crossover_brackets(results):
            for res in bracket:
                for arm in (self.plan.baseline, candidate):
                    cell = self.by_point_arm.get((slice_name, res.point_id, arm))
                    if cell is not None and self._n(cell, ms) == 1:
                        want(cell, "crossover", f"brackets the crossover at {self.plan.axis} "
                             f"{res.x:g}: a second run so the bracket rests on more than one")
        if v.aa and round_no == 1:
            for g in self.plan.groups:
                if g.arm != self.plan.baseline:
                    continue
                for cell in g.cells:
                    if not self._has(cell, ms, "aa"):
                        want(cell, "aa", "A/A: the baseline again on a fresh server measures "
                             "the server-to-server spread")

        picks = self._within_budget(list(wanted.values()), ms)
        return self._batched(picks, round_no)

    def _crossover_brackets(self, results: list[tuple[str, str, CellResult]]
                            ) -> list[tuple[str, str, list[CellResult]]]:
        out = []
        series: dict[tuple[str, str], list[CellResult]] = {}
        for s, c, res in results:
            series.setdefault((s, c), []).append(res)
        for (s, c), cells in series.items():
            confident = sorted((r for r in cells if r.confident and r.x is not None),
                               key=lambda r: float(r.x or 0))
            for a, b in zip(confident, confident[1:], strict=False):
                if a.verdict != b.verdict:
                    out.append((s, c, [a, b]))
        return out

    def _within_budget(self, picks: list[Pick], ms: Sequence[Measurement]) -> list[Pick]:
        budget = self.spec.verify.budget
        if budget is None:
            return picks
        left = budget - self.rerun_time_spent(ms)
        kept = []
        launch = self.spec.estimate.launch or 0.0
        launched: set[str] = set()
        for pick in picks:
            first = [m for m in ms if m.cell_id == pick[0].cell_id]
            cost = max((_seconds(m) for m in first), default=0.0)
            group = self.group_of[pick[0].cell_id].group_id
            cost += 0.0 if group in launched else launch
            if cost > left:
                continue
            left -= cost
            launched.add(group)
            kept.append(pick)
        return kept

    def _batched(self, picks: list[Pick], round_no: int) -> list[tuple[ServerGroup, list[Pick]]]:
        """One launch per group per round; arm order alternates by round (ABBA)."""
        order = list(self.plan.groups)
        if round_no % 2 == 1:
            order.reverse()
        by_group: dict[str, list[Pick]] = {}
        for pick in picks:
            by_group.setdefault(self.group_of[pick[0].cell_id].group_id, []).append(pick)
        out = []
        for g in order:
            if g.group_id in by_group:
                cells = sorted(by_group[g.group_id], key=lambda p: g.cells.index(p[0]))
                out.append((g, cells))
        return out



#: Warm reruns to add while a server is up: called after the queued cells of a launch are done.
After = Callable[[], list[tuple[Cell, Reason]]]
#: Measure `cells` on one launch of `group` (appending to the shared measurement list), then
#: keep asking `after` (when given) for more cells on the same server until it has none.
RunCells = Callable[[ServerGroup, list[tuple[Cell, Reason]], After | None], None]
#: Told about every rerun the policy asks for: (stage, round, cell, reason, why).
Note = Callable[[int, int, Cell, Reason, str], None]


def rounds_done(policy: Policy, ms: Sequence[Measurement]) -> int:
    """Stage-2 rounds already (at least partly) run, read from the measurements alone: each
    round relaunches a group at most once, so the most fresh instances any group spent on
    reruns only is the number of rounds begun. A resumed run continues after it."""
    instances: dict[str, set[str]] = {}
    first: set[str] = set()
    for m in ms:
        if m.reason == "first":
            first.add(m.instance)
        else:
            instances.setdefault(m.group_id, set()).add(m.instance)
    return max((len(names - first) for names in instances.values()), default=0)


def drive(policy: Policy, ms: list[Measurement], run_cells: RunCells,
          note: Note | None = None) -> None:
    """The order of work, shared by the runner and the scoring benchmark so both run exactly
    the policy that is scored: stage 1 group by group (cells not yet measured), each followed,
    on the same warm server, by its warm reruns; then the planned stage-2 rounds, each group in
    a round on one fresh launch. `ms` is the live list `run_cells` appends to."""
    measured = {m.cell_id for m in ms}
    for group in policy.plan.groups:
        todo = [c for c in group.cells if c.cell_id not in measured]
        if not todo:
            continue

        def warm(group: ServerGroup = group) -> list[tuple[Cell, Reason]]:
            picks = policy.warm_reruns(group, ms)
            for cell, why in picks:
                if note is not None:
                    note(1, 0, cell, "surprise", why)
            return [(cell, "surprise") for cell, _ in picks]

        run_cells(group, [(c, "first") for c in todo], warm)
    for round_no in range(rounds_done(policy, ms) + 1, policy.rounds + 1):
        batch = policy.next_round(round_no, ms)
        if not batch:
            break
        for group, cells in batch:
            for cell, reason, why in cells:
                if note is not None:
                    note(2, round_no, cell, reason, why)
            run_cells(group, [(c, r) for c, r, _ in cells], None)

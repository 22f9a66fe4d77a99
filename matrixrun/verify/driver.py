"""The order of work, shared by the runner and the policy's scoring benchmark so both run
exactly the policy that is scored."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from matrixrun.measurement import Measurement, Reason
from matrixrun.plan import Cell, ServerGroup
from matrixrun.rerun_reason import RerunWhy
from matrixrun.verify.policy import Pick, Policy

#: Warm reruns to add while a server is up: called after the queued cells of a launch are done.
After = Callable[[], list[tuple[Cell, Reason]]]
#: Measure `cells` on one launch of `group` (appending to the shared measurement list), then
#: keep asking `after` (when given) for more cells on the same server until it has none.
RunCells = Callable[[ServerGroup, list[tuple[Cell, Reason]], After | None], None]
#: Told about every rerun the policy asks for: (stage, round, cell, reason, why).
Note = Callable[[int, int, Cell, Reason, RerunWhy], None]


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


def drive(
    policy: Policy, ms: list[Measurement], run_cells: RunCells, note: Note | None = None
) -> None:
    """The order of work, shared by the runner and the scoring benchmark so both run exactly
    the policy that is scored: stage 1 group by group (cells not yet measured), each followed,
    on the same warm server, by its warm reruns; then the planned stage-2 rounds, each group in
    a round on one fresh launch whose reruns are re-chosen as σ arrives (`_run_round`). `ms`
    is the live list `run_cells` appends to."""
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
        _run_round(policy, ms, run_cells, note, round_no, [g for g, _ in batch])


def _run_round(
    policy: Policy,
    ms: list[Measurement],
    run_cells: RunCells,
    note: Note | None,
    round_no: int,
    groups: list[ServerGroup],
) -> None:
    """One stage-2 round: each group that still has picks gets one fresh launch. On it the
    checks and σ replicates run first; the inconclusive reruns are then chosen again, on the
    same launch, with the fresh σ they (and earlier launches of the round) brought, so cells
    that σ settles are not rerun. A group left with no picks is not launched at all."""
    done: set[str] = set()  # cells already rerun in this round

    def current(group: ServerGroup) -> list[Pick]:
        return [
            p
            for g, picks in policy.next_round(round_no, ms)
            if g.group_id == group.group_id
            for p in picks
            if p.cell.cell_id not in done
        ]

    def step(picks: list[Pick]) -> list[Pick]:
        """What to run next on the launch: every check and σ replicate, else one
        inconclusive rerun (each measured one may bring the σ that settles the rest)."""
        checks = [p for p in picks if p.reason != "inconclusive"]
        return checks or picks[:1]

    def take(picks: list[Pick]) -> list[tuple[Cell, Reason]]:
        for p in picks:
            done.add(p.cell.cell_id)
            if note is not None:
                note(2, round_no, p.cell, p.reason, p.why)
        return [(p.cell, p.reason) for p in picks]

    for group in groups:
        first = step(current(group))
        if not first:
            continue

        def more(group: ServerGroup = group) -> list[tuple[Cell, Reason]]:
            return take(step(current(group)))

        run_cells(group, take(first), more)

"""The order of work, shared by the runner and the policy's scoring benchmark so both run
exactly the policy that is scored."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from matrixrun.core.measurement import Measurement, Reason
from matrixrun.core.rerun_reason import RerunWhy
from matrixrun.plan import Cell, ServerGroup
from matrixrun.verify import bisect
from matrixrun.verify.policy import Pick, Policy

#: Warm reruns to add while a server is up: called after the queued cells of a launch are done.
After = Callable[[], list[tuple[Cell, Reason]]]
#: Measure `cells` on one launch of `group` (appending to the shared measurement list), then
#: keep asking `after` (when given) for more cells on the same server until it has none.
RunCells = Callable[[ServerGroup, list[tuple[Cell, Reason]], After | None], None]
#: Told about every rerun the policy asks for: (stage, round, cell, reason, why).
Note = Callable[[int, int, Cell, Reason, RerunWhy], None]


class Journal(Protocol):
    """Where the order of work notes stage-2 progress (the runner: events.jsonl), so a run
    killed inside a round can finish that round when resumed rather than count it as done."""

    def round_begun(self, round_no: int, groups: list[str]) -> None: ...

    def group_done(self, round_no: int, group_id: str) -> None: ...


@dataclass(frozen=True)
class Unfinished:
    """Where a killed run stood in stage 2 (from its journal): round `round_no` had begun and
    still owed `groups` (in their round order; empty when the round was done), `rerun` are
    the cells already rerun in that round, and `pending` the reruns the policy had already
    chosen (noted) for the launch the kill interrupted but that were never measured. A
    resumed run measures `pending` first on the first owed group's new launch (the choice
    was made; re-choosing on other data would make a resumed run differ from an
    uninterrupted one), finishes the owed groups, then goes on with round `round_no + 1`."""

    round_no: int
    groups: tuple[str, ...]
    rerun: frozenset[str]
    pending: tuple[tuple[str, Reason], ...] = ()


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


def first_pass(
    group: ServerGroup, ms: Sequence[Measurement], retry: Collection[str] = frozenset()
) -> list[Cell]:
    """The cells stage 1 measures on a group's first launch: those never measured, and those
    `--retry-failed` measures again (every attempt failed); not the cells bisection added
    (stage 2's, even in a resumed run's plan). The one rule for the runner, the Slurm
    controller and its jobs."""
    measured = {m.cell_id for m in ms} - set(retry)
    return [c for c in group.cells if c.cell_id not in measured and c.added_by is None]


def drive(
    policy: Policy,
    ms: list[Measurement],
    run_cells: RunCells,
    note: Note | None = None,
    journal: Journal | None = None,
    unfinished: Unfinished | None = None,
    retry: Collection[str] = frozenset(),
) -> None:
    """The order of work, shared by the runner and the scoring benchmark so both run exactly
    the policy that is scored: stage 1 group by group (cells not yet measured), each followed,
    on the same warm server, by its warm reruns; then the planned stage-2 rounds, each group in
    a round on one fresh launch whose reruns are re-chosen as σ arrives (`_run_round`). `ms`
    is the live list `run_cells` appends to. `journal` hears each round begin and each group
    finish its launch of it; `unfinished` (read back from a journal) resumes inside a round
    (without one, stage 2 resumes after the rounds the measurements show begun). `retry`:
    cells stage 1 measures again although tried (`--retry-failed`: every attempt failed)."""
    for group in policy.plan.groups:
        todo = first_pass(group, ms, retry)
        if not todo:
            continue

        def warm(group: ServerGroup = group) -> list[tuple[Cell, Reason]]:
            picks = policy.warm_reruns(group, ms)
            for cell, why in picks:
                if note is not None:
                    note(1, 0, cell, "surprise", why)
            return [(cell, "surprise") for cell, _ in picks]

        run_cells(group, [(c, "first") for c in todo], warm)
    start = rounds_done(policy, ms) + 1
    if unfinished is not None:
        by_id = {g.group_id: g for g in policy.plan.groups}
        owed = [by_id[g] for g in unfinished.groups if g in by_id]
        rerun = set(unfinished.rerun)
        cells = {c.cell_id: c for c in policy.plan.cells()}
        pending = [(cells[c], r) for c, r in unfinished.pending if c in cells]
        _run_round(policy, ms, run_cells, note, unfinished.round_no, owed, journal, rerun, pending)
        start = unfinished.round_no + 1
    for round_no in range(start, policy.rounds + 1):
        batch = policy.next_round(round_no, ms)
        if not batch:
            break
        groups = [g for g, _ in batch]
        if journal is not None:
            journal.round_begun(round_no, [g.group_id for g in groups])
        _run_round(policy, ms, run_cells, note, round_no, groups, journal)


def _run_round(
    policy: Policy,
    ms: list[Measurement],
    run_cells: RunCells,
    note: Note | None,
    round_no: int,
    groups: list[ServerGroup],
    journal: Journal | None = None,
    done: set[str] | None = None,
    pending: list[tuple[Cell, Reason]] | None = None,
) -> None:
    """One stage-2 round: each group that still has picks gets one fresh launch. On it the
    checks and σ replicates run first; the inconclusive reruns are then chosen again, on the
    same launch, with the fresh σ they (and earlier launches of the round) brought, so cells
    that σ settles are not rerun. A group left with no picks is not launched at all."""
    done = set() if done is None else done  # cells already rerun in this round
    repeat: list[Pick] = []  # bisection cells of the current launch owed their second run

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
            if p.reason == "bisection" and p.cell.cell_id not in done:
                bisect.adopt(policy, p.cell)  # a new cell joins the plan (with its other arms)
                repeat.append(p)
            done.add(p.cell.cell_id)
            if note is not None:
                note(2, round_no, p.cell, p.reason, p.why)
        return [(p.cell, p.reason) for p in picks]

    for group in groups:
        # a resumed round: the interrupted launch's chosen reruns first (see Unfinished)
        owed = [
            (c, r)
            for c, r in pending or []
            if policy.group_of[c.cell_id].group_id == group.group_id
        ]
        done.update(c.cell_id for c, _ in owed)
        first = owed or take(step(current(group)))
        if first:

            def more(group: ServerGroup = group) -> list[tuple[Cell, Reason]]:
                again = [p for p in repeat if bisect.repeat_wanted(policy, p.cell, ms)]
                repeat.clear()
                return take(again) if again else take(step(current(group)))

            run_cells(group, first, more)
        if journal is not None:
            journal.group_done(round_no, group.group_id)

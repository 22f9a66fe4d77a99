"""The order of work as plain work items: what stage 1 measures on a group's first launch, what
each stage-2 round measures on its fresh launches. The local runner, a Slurm job and the scoring
benchmark all consume it the same way:

    for launch in Schedule(policy, view).launches():   # or .stage1(group) / .round(n, [group])
        items = launch.next()
        # launch a server only if there are items; measure each; when the queue is empty,
        # ask launch.next() again for more on the same warm server; [] ends the launch

The schedule decides (from the measurements so far, through the policy); the consumer measures.
No callbacks cross the boundary: a `Work` item says which cell, why, in which stage and round,
and — for a rerun the policy chose — the `RerunWhy` the consumer writes to the audit log before
measuring it. Decisions are lazy: a launch's next items, and a round's groups, are chosen only
when asked for, so each sees every measurement made before it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from matrixrun.core.measurement import Measurement, Reason
from matrixrun.core.rerun_reason import RerunWhy
from matrixrun.plan import Cell, ServerGroup
from matrixrun.verify.policy import Pick, Policy

#: The measurements so far, as the consumer sees them now (a Slurm job re-reads the shared run
#: directory, so other groups' numbers count as they land).
View = Callable[[], Sequence[Measurement]]


@dataclass(frozen=True)
class Work:
    """One measurement to make on the current launch."""

    cell: Cell
    reason: Reason
    #: 1: stage 1 (first runs and their warm reruns); 2: a stage-2 round's launch.
    stage: int
    #: The stage-2 round (0 in stage 1); a stage-2 measurement is tagged with it
    #: (`extra.round`), which is how a resumed run knows what a round already measured.
    round_no: int = 0
    #: Why the policy chose this rerun, for the audit log (None: a first run, or a rerun that
    #: was chosen and logged before a kill and is now measured on the resumed run).
    why: RerunWhy | None = None


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
    chosen (logged) that were never measured — the interrupted launch's, or a torn record's.
    A resumed run measures `pending` first on the first owed group's new launch (the choice
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
    (stage 2's, even in a resumed run's plan)."""
    measured = {m.cell_id for m in ms} - set(retry)
    return [c for c in group.cells if c.cell_id not in measured and c.added_by is None]


class Launch:
    """One launch of one group: `next()` gives the items to measure on it, again and again
    while the server is up, until it gives none. The first call gives [] when the launch has
    nothing to do (then no server is started)."""

    def __init__(self, group: ServerGroup, stage: int, round_no: int) -> None:
        self.group = group
        self.stage = stage
        self.round_no = round_no

    def next(self) -> list[Work]:
        raise NotImplementedError


class _FirstLaunch(Launch):
    """Stage 1: the group's unmeasured cells, then warm reruns of surprising ones."""

    def __init__(self, s: Schedule, group: ServerGroup) -> None:
        super().__init__(group, 1, 0)
        self._s = s
        self._opened = False

    def next(self) -> list[Work]:
        ms = self._s.view()
        if not self._opened:
            self._opened = True
            return [Work(c, "first", 1) for c in first_pass(self.group, ms, self._s.retry)]
        return [
            Work(cell, "surprise", 1, 0, why)
            for cell, why in self._s.policy.warm_reruns(self.group, ms)
        ]


@dataclass
class _Round:
    """What one stage-2 round remembers across its launches."""

    round_no: int
    done: set[str] = field(default_factory=set)  # cells rerun in this round
    repeat: list[Pick] = field(default_factory=list)  # bisection cells owed a second run


class _RoundLaunch(Launch):
    """A stage-2 round's launch of one group: its checks and σ replicates first, then the
    inconclusive reruns one at a time, each re-chosen with the σ the previous ones brought
    (so cells that σ settles are not rerun)."""

    def __init__(
        self, s: Schedule, r: _Round, group: ServerGroup, owed: list[tuple[Cell, Reason]]
    ) -> None:
        super().__init__(group, 2, r.round_no)
        self._s = s
        self._r = r
        self._owed = owed

    def _current(self) -> list[Pick]:
        return [
            p
            for g, picks in self._s.policy.next_round(self._r.round_no, self._s.view())
            if g.group_id == self.group.group_id
            for p in picks
            if p.cell.cell_id not in self._r.done
        ]

    def _take(self, picks: list[Pick]) -> list[Work]:
        for p in picks:
            if p.reason == "bisection" and p.cell.cell_id not in self._r.done:
                self._s.policy.adopt(p.cell)  # a new cell joins the plan (with its other arms)
                self._r.repeat.append(p)
            elif p.warm_repeat and p.cell.cell_id not in self._r.done:
                self._r.repeat.append(p)
            self._r.done.add(p.cell.cell_id)
        return [Work(p.cell, p.reason, 2, self._r.round_no, p.why) for p in picks]

    def _repeats(self) -> list[Work]:
        """The second runs owed on this launch: bisection cells' repeats (`repeat_wanted`)
        and warm-up partner checks' warm runs (`warm_repeat_wanted`, reason "surprise")."""
        policy, ms = self._s.policy, self._s.view()
        owed, self._r.repeat = self._r.repeat, []
        warm = [p for p in owed if p.warm_repeat and policy.warm_repeat_wanted(p.cell, ms)]
        again = [p for p in owed if not p.warm_repeat and policy.repeat_wanted(p.cell, ms)]
        return self._take(again) + [
            Work(p.cell, "surprise", 2, self._r.round_no, p.why) for p in warm
        ]

    def next(self) -> list[Work]:
        if self._owed:  # a resumed round: the interrupted launch's chosen reruns first
            owed, self._owed = self._owed, []
            self._r.done.update(c.cell_id for c, _ in owed)
            return [Work(c, r, 2, self._r.round_no) for c, r in owed]
        again = self._repeats()
        if again:
            return again
        picks = self._current()
        checks = [p for p in picks if p.reason != "undecided"]
        return self._take(checks or picks[:1])


class Schedule:
    """The verify policy's order of work over `view()`'s measurements (see the module
    docstring). `journal` hears each round begin and each group finish its launch of it;
    `unfinished` (read back from a journal) resumes inside a round; `retry`: cells stage 1
    measures again although tried (`--retry-failed`: every attempt failed)."""

    def __init__(
        self,
        policy: Policy,
        view: View,
        journal: Journal | None = None,
        unfinished: Unfinished | None = None,
        retry: Collection[str] = frozenset(),
    ) -> None:
        self.policy = policy
        self.view = view
        self.journal = journal
        self.unfinished = unfinished
        self.retry = frozenset(retry)

    def stage1(self, group: ServerGroup) -> Launch:
        """Stage 1 of one group (a Slurm job's round 0)."""
        return _FirstLaunch(self, group)

    def round(
        self,
        round_no: int,
        groups: Sequence[ServerGroup],
        rerun: Collection[str] = frozenset(),
        pending: Sequence[tuple[Cell, Reason]] = (),
    ) -> Iterator[Launch]:
        """The launches of round `round_no` for `groups`, in order (a Slurm job: its one
        group). `rerun` and `pending` resume a round (`Unfinished`). Each group's launch is
        journalled done once the consumer asks for the next one."""
        r = _Round(round_no, set(rerun))
        for group in groups:
            owed = [
                (c, why)
                for c, why in pending
                if self.policy.group_of[c.cell_id].group_id == group.group_id
            ]
            yield _RoundLaunch(self, r, group, owed)
            if self.journal is not None:
                self.journal.group_done(round_no, group.group_id)

    def launches(self) -> Iterator[Launch]:
        """The whole order: stage 1 group by group, then a resumed round's rest, then the
        planned stage-2 rounds (each group in a round on one fresh launch)."""
        for group in self.policy.plan.groups:
            yield self.stage1(group)
        ms = self.view()
        start = rounds_done(self.policy, ms) + 1
        u = self.unfinished
        if u is not None:
            by_id = {g.group_id: g for g in self.policy.plan.groups}
            cells = {c.cell_id: c for c in self.policy.plan.cells()}
            pending = [(cells[c], why) for c, why in u.pending if c in cells]
            owed = [by_id[g] for g in u.groups if g in by_id]
            yield from self.round(u.round_no, owed, u.rerun, pending)
            start = u.round_no + 1
        for round_no in range(start, self.policy.rounds + 1):
            batch = self.policy.next_round(round_no, self.view())
            if not batch:
                break
            groups = [g for g, _ in batch]
            if self.journal is not None:
                self.journal.round_begun(round_no, [g.group_id for g in groups])
            yield from self.round(round_no, groups)

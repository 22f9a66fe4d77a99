"""The fixed design (`verify.design: fixed`): a calibration run. Every cell is measured exactly
`max_runs` times, each run on its own launch of its group, and nothing is chosen by the data —
no warm reruns, no checks, no bisection, no futility rule.

Why a separate design: an adaptive run stops where its intervals came out narrow, so its final
estimate of the launch-to-launch noise σ_b² is a selected sample that leans low (a run whose
σ̂_b came out low decided its cells and launched no more; docs/benchmarks.md measured the mean
at 0.71–0.97× and the median at 0.44–0.76× the truth). A later run could not pool it without
overclaiming (`analysis.prior`). A fixed design's σ̂_b² has no such selection, so a later run
that names it in `verify.noise_from` pools its launch part by df as well as its run noise.
It is also an ordinary comparison, judged once at the end (one look: `settings.looks`).

Same order of work as the adaptive policy (`driver.drive`): stage 1 is each group's first
launch, each round r of stage 2 one more launch of every group with every cell once. A resumed
run measures only what its rounds still owe.
"""

from __future__ import annotations

from collections.abc import Sequence

from matrixrun.core.measurement import Measurement
from matrixrun.core.rerun_reason import RerunWhy, WhyKind
from matrixrun.plan import Cell, ServerGroup
from matrixrun.verify.policy import Pick, Policy


class FixedDesign(Policy):
    """`max_runs` launches of every group, every cell once on each (see the module
    docstring). Shares the adaptive policy's bookkeeping (budget, ABBA order, batching)."""

    def expected_runs(self) -> int:
        """Runs the progress display starts with: the whole design (it has no reruns to add)."""
        return len(self.cells) * self.spec.verify.max_runs

    def warm_reruns(
        self, group: ServerGroup, ms: Sequence[Measurement]
    ) -> list[tuple[Cell, RerunWhy]]:
        """None: a warm rerun would be chosen by the data."""
        return []

    def next_round(
        self, round_no: int, ms: Sequence[Measurement]
    ) -> list[tuple[ServerGroup, list[Pick]]]:
        """Round `round_no`: every cell that has been tried fewer than 1 + `round_no` times,
        once (a cell no launch could measure at all is reported, not chased), within the
        budget, one launch per group, ABBA."""
        if round_no > self.rounds:
            return []
        ok = {m.cell_id for m in ms if m.ok}
        why = RerunWhy(kind=WhyKind.FIXED_DESIGN, max_runs=self.spec.verify.max_runs)
        picks = [
            Pick(cell, "fixed", why)
            for cell in self.cells.values()
            if cell.cell_id in ok and self._n(cell, ms) <= round_no
        ]
        return self._batched(self._within_budget(picks, ms, launch=True), round_no)

"""The local executor: every server group on this machine, one after another, in the verify
policy's order (`Runner.run` → the launches of `verify.Schedule`, each by
`Runner.run_launch`). What `matrixrun run` has always done."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matrixrun.run.runner import Runner, RunSummary


class LocalExecutor:
    gates_here = True

    def run(self, runner: Runner) -> RunSummary:
        return runner.run()

"""The local executor: every server group on this machine, one after another, in the verify
policy's order (the launches of `verify.Schedule`, each by `Measurer.measure_launch`). What
`matrixrun run` has always done; the run's start and end are the session's (`run/session.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from matrixrun import verify
from matrixrun.run.resume import EventJournal

if TYPE_CHECKING:
    from matrixrun.run.measurer import Measurer
    from matrixrun.run.session import Opening


class LocalExecutor:
    name = "local"
    servers_here = True

    def dispatch(self, measurer: Measurer, opening: Opening) -> None:
        """Stage 1 (every cell once; surprising cells rerun while their server is warm), a
        round a killed session left half done, then the planned stage-2 rounds: the same work
        items a Slurm job and the policy's scoring benchmark consume."""
        schedule = verify.Schedule(
            opening.policy,
            lambda: measurer.measurements,
            EventJournal(measurer.run_dir),
            opening.unfinished,
            retry=measurer.retry,
        )
        for launch in schedule.launches():
            measurer.measure_launch(launch)

"""`matrixrun run` end to end: the spec loaded, the run directory chosen (new or resumed), the
engine picked (the simulator for a rehearsal), the hardware gated where the servers run, then
the run session (`session.run`: one start, the executor's dispatch — here, or as Slurm jobs —,
one end). Kept above the measurer, the recorder, the session and the executors, which it
composes (each made once, with everything it needs), so none of them imports its caller.

The spec file is read once, here or by the caller (`SpecFile`): the flag check, the resume's
comparison, the run directory's copy and hash and the plan's ids all take that one reading."""

from __future__ import annotations

import os
from pathlib import Path

from matrixrun.core.interrupt import RunInterrupted
from matrixrun.engines import for_spec
from matrixrun.engines.base import Engine
from matrixrun.engines.preflight import require_launchable
from matrixrun.engines.sim import rehearsal_engine
from matrixrun.flags import negatable_for, require_valid_flags
from matrixrun.load.datasets.resolve import check_workload
from matrixrun.plan import expand
from matrixrun.plan.history import refuse_simulated_noise
from matrixrun.run.amend import record_amendment
from matrixrun.run.executors import Executor, LocalExecutor
from matrixrun.run.gates import hardware_gate
from matrixrun.run.measurer import Measurer, RunOptions
from matrixrun.run.progress import NullObserver, Observer
from matrixrun.run.record import RunDirRecorder
from matrixrun.run.resume import new_run_dir, resumed_run_dir
from matrixrun.run.session import RunSummary
from matrixrun.run.session import run as run_session
from matrixrun.spec import SpecFile, read_spec
from matrixrun.store.prior import prepare


def run_experiment(
    spec_file: SpecFile | str | Path,
    out: str | Path | None = None,
    resume: str | Path | None = None,
    rehearse: bool = False,
    observer: Observer | None = None,
    ignore_hardware: bool = False,
    executor: Executor | None = None,
    retry_failed: bool = False,
) -> RunSummary:
    """`matrixrun run`: load the spec (unless given as read), pick the run directory and the
    engine, gate the hardware (real launches only), run (here, or through `executor`:
    executors/)."""
    executor = executor or LocalExecutor()
    source = spec_file if isinstance(spec_file, SpecFile) else read_spec(spec_file)
    spec_path = source.path
    spec = source.spec
    refuse_simulated_noise(spec, rehearse)
    require_valid_flags(source)  # validate's check, before any launch
    check_workload(spec, rehearse)  # the model's vocabulary, the dataset: before any launch
    hardware = None
    engine: Engine
    if rehearse:
        engine = rehearsal_engine(spec, spec.experiment, negatable_for(spec.engine))
    else:
        engine = for_spec(spec.engine, negatable_for(spec.engine))
        if engine.launches and executor.servers_here:
            require_launchable(spec)  # one error for a missing engine, not one per cell
            hardware = hardware_gate(spec, ignore_hardware)
    # the run directory only once nothing stands in the way of launching
    if resume is not None:
        rd, amended = resumed_run_dir(resume, source)
        if amended is not None:  # a raised verify limit: on file before anything is measured
            record_amendment(rd, amended, spec_path, source.text)
    else:
        rd = new_run_dir(spec_path, out, rehearse)
    spec, store_error = prepare(spec, rd.path, rehearse)  # verify.noise_from: auto, decided once
    options = RunOptions(
        rehearse=rehearse,
        observer=observer or NullObserver(),
        retry_failed=retry_failed,
        spec_path=_printable(spec_path),
    )
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    source = source.with_spec(spec)
    plan = expand(spec, source.hash)
    recorder = RunDirRecorder(rd)
    measurer = Measurer(source, plan, engine, recorder, options, hardware=hardware)
    try:
        return run_session(measurer, executor, store_error)
    except KeyboardInterrupt as exc:  # the CLI's line names where the measurements are
        raise RunInterrupted(str(rd.path)) from exc


def _printable(path: Path) -> str:
    """The spec's path as text a UTF-8 file can hold (settings.json, what Reproduce prints).
    Under a locale that is not UTF-8, Python keeps a name's non-ASCII bytes as lone
    surrogates, which no JSON writer takes; read as UTF-8 they are the name as typed."""
    return os.fsencode(path).decode("utf-8", errors="replace")

"""The two stages after measuring, each reading and writing only the run directory:

    results.jsonl + settings.json ─analyse_run─▶ verdict.json
    verdict.json + settings.json + plan.json + env.json (+ events, results) ─render_run─▶ report.md

`run` and `ingest` end by calling both, once each; `matrixrun analyse` and `matrixrun report`
call one each. Neither parses a spec, so a run directory is self-contained. The render stage is
the report's own (`matrixrun.report.render_run`, which loads nothing of `run/`); it is
re-exported here so the run's callers name both stages in one place.
"""

from __future__ import annotations

from pathlib import Path

from matrixrun.core.capacity import Bound, Capacity
from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.core.verdict import AnalysisSettings
from matrixrun.load.records import read_jsonl
from matrixrun.report import render_run, report_text, write_chart
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import SloBound, read_settings

__all__ = ["analyse_run", "render_run", "report_text", "write_chart"]


def _run_dir(run_dir: str | Path | RunDir) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)


def analyse_run(run_dir: str | Path | RunDir) -> Path:
    """Judge results.jsonl by settings.json; write verdict.json and return its path."""
    # Imported here, not at the top: rendering (`matrixrun report`, `post`) reads verdict.json
    # and must not load the analysis (tests/test_report.py checks that it does not).
    from matrixrun.analysis import analyse

    rd = _run_dir(run_dir)
    if not rd.results_file.exists():
        raise InputError(
            f"{rd.path} has no results.jsonl; give a directory written by `matrixrun run` or "
            "`matrixrun ingest`"
        )
    settings = read_settings(rd)
    measurements = rd.measurements()
    verdict = analyse(measurements, settings.analysis)
    slo = settings.spec.slo if settings.spec is not None else []
    if slo:
        verdict.capacity = _capacity(rd, measurements, verdict.settings, slo)
    # a run without an SLO writes no `capacity` key: its verdict.json reads as it always did
    text = verdict.model_dump_json(indent=2, exclude=None if verdict.capacity else {"capacity"})
    return rd.write_text("verdict.json", text + "\n")


def _capacity(
    rd: RunDir, measurements: list[Measurement], settings: AnalysisSettings, slo: list[SloBound]
) -> Capacity | None:
    """Capacity under the SLO, goodput counted from each measurement's per-request records
    where the run directory kept them (`requests/`)."""
    from matrixrun.analysis.capacity import capacity, goodput  # late: as `analyse` above

    bounds = [Bound(metric=b.metric, max=b.max, min=b.min) for b in slo]
    good: dict[tuple[str, int], tuple[float, float]] = {}
    for m in measurements:
        path = rd.path / m.requests_file if m.requests_file else None
        if m.ok and path is not None and path.exists():
            counted = goodput(read_jsonl(path), bounds, m.time_scale)
            if counted is not None:
                good[(m.cell_id, m.attempt)] = counted
    return capacity(measurements, settings, bounds, good)

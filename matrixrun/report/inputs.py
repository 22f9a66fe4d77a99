"""What the verdict document is made from, read once from a run directory.

`read_inputs` is the only function of the report that touches files. It reads what the
earlier stages wrote — verdict.json, settings.json, plan.json, env.json, events.jsonl,
results.jsonl (the failure list and the simulator's timing), ingest.json, jobs.json — and never
the spec: a report renders from a run directory whose spec copy is gone. Everything after it
(`document.document_of` and the sections) is pure."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.core.verdict import Verdict
from matrixrun.plan import Plan
from matrixrun.rundir.jobs import JobsFile, read_jobs
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import RunSettings, read_settings

#: The chart picture beside report.md in a run directory (`chart_png.write_chart`).
CHART_FILE = "chart.png"


@dataclass(frozen=True)
class RunInputs:
    """Everything the document is made from, read once from the run directory."""

    run_dir: str
    verdict: Verdict
    settings: RunSettings
    measurements: list[Measurement] = field(default_factory=list)
    plan: Plan | None = None
    env: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    ingest: dict[str, Any] | None = None
    #: A Slurm run's jobs.json (None for a local run or an ingest).
    jobs: JobsFile | None = None
    #: RUN_DIR/chart.png exists (written beside the report when matplotlib is installed).
    chart_png: bool = False
    #: The run directory as a relative link from where the document is written ("." for
    #: RUN_DIR/report.md): links into the directory keep working when both are copied.
    link_base: str = "."


def _optional_json(rd: RunDir, name: str) -> Any:
    """A file the report can do without: None when it is missing or does not parse."""
    try:
        return rd.read_json(name) if rd.has(name) else None
    except InputError:
        return None


def display_path(path: Path) -> str:
    """The run directory as a reader can use it: relative to the working directory when it
    lies under it (`reports/runs/x` in this repository), else from `runs/` on when it lies
    under one (so a report does not leak /home/...), else as given."""
    with contextlib.suppress(ValueError, OSError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    parts = path.parts
    if "runs" in parts:
        index = len(parts) - 1 - parts[::-1].index("runs")
        return str(Path(*parts[index:]))
    return str(path)


def link_base(run_dir: Path, report_at: Path | None) -> str:
    """The run directory relative to the folder the document is written to (RUN_DIR/report.md
    when `report_at` is None): what links into the directory start with. Never absolute, so a
    run directory copied to another machine, its report inside, keeps working links."""
    folder = (report_at if report_at is not None else run_dir / "report.md").resolve().parent
    return Path(os.path.relpath(run_dir.resolve(), folder)).as_posix()


def read_inputs(rd: RunDir, report_at: Path | None = None) -> RunInputs:
    """Read a run directory (spec-driven or ingested). Missing optional files are empty.
    `report_at` is where the document will be written (default RUN_DIR/report.md): the links
    and paths it prints are relative to it wherever the working directory does not hold the
    run (a run written to /tmp/NAME is not printed as /tmp/NAME)."""
    settings = read_settings(rd)
    if not rd.has("verdict.json"):
        raise InputError(
            f"{rd.path} has no verdict.json; write it with `matrixrun analyse {rd.path}`"
        )
    data = rd.read_json("verdict.json")  # every file read through RunDir: an older one migrated
    try:
        verdict = Verdict.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"{rd.path / 'verdict.json'} is not the verdict of this matrixrun version "
            f"({exc.error_count()} problem(s)); rewrite it with `matrixrun analyse {rd.path}`"
        ) from exc
    env = _optional_json(rd, "env.json")
    ingest = _optional_json(rd, "ingest.json")
    jobs = _optional_json(rd, "jobs.json")
    base = link_base(rd.path, report_at)
    shown = display_path(rd.path)
    return RunInputs(
        run_dir=base if Path(shown).is_absolute() else shown,
        link_base=base,
        verdict=verdict,
        settings=settings,
        measurements=rd.measurements() if rd.results_file.exists() else [],
        plan=Plan.model_validate(rd.read_json("plan.json")) if rd.has("plan.json") else None,
        env=env if isinstance(env, dict) else {},
        events=rd.events(),
        jobs=None if jobs is None else read_jobs(rd.path / "jobs.json"),
        ingest=ingest if isinstance(ingest, dict) else None,
        chart_png=(rd.path / CHART_FILE).exists(),
    )


def spec_stem(run_dir: str) -> str | None:
    """The spec file's stem from the runs/<stem>/<id> layout the runner uses (wherever that
    `runs/` lies), else None (never guessed from the experiment name)."""
    parts = Path(run_dir).parts
    if "runs" in parts:
        index = len(parts) - 1 - parts[::-1].index("runs")
        if len(parts) - index == 3:
            return parts[index + 1].removesuffix(".rehearsal")
    return None  # unknown: the caller points at the run directory's own copy instead


def spec_path_of(inputs: RunInputs) -> str:
    """The spec a command should name: the path `run` was given (settings.json), else the run
    directory's own copy — never a guess from the directory's name (a spec in `myspec/` is
    not `spec/x.yaml`)."""
    facts = inputs.settings.spec
    if facts is not None and facts.spec_path:
        return facts.spec_path
    return f"{inputs.run_dir}/spec.yaml"


def compared_pair(inputs: RunInputs) -> tuple[str, str, list[str]] | None:
    """(label A, label B, arms) of a `matrixrun compare` directory, else None."""
    info = (inputs.ingest or {}).get("compare")
    if not isinstance(info, dict):
        return None
    return str(info.get("a")), str(info.get("b")), [str(x) for x in info.get("arms", [])]

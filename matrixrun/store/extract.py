"""A run directory as the rows the results store keeps (`RunRecord`): read from its files
alone, so recording a run and rebuilding the store from run directories give the same rows.

What is read: env.json (engine, versions, GPUs, simulated), settings.json (baseline, primary
metric, margin, design, what noise was borrowed), plan.json (each arm's model, GPUs and
flags; an ingested run has none, and its arms' models come from what their servers
reported), results.jsonl (every measurement) and verdict.json (each judged cell, each
candidate's overall verdict, the noise). The noise kept is the run's *own*: where the run
borrowed an earlier run's (`verify.noise_from`), it is analysed again without it, so pooling
several stored runs (`store.prior`) never counts one run's df twice.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from matrixrun.analysis import analyse
from matrixrun.core.errors import InputError
from matrixrun.core.verdict import AnalysisSettings, Sigma, Verdict
from matrixrun.rundir.environment import Environment, read_environment
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import read_settings
from matrixrun.store.schema import canonical


@dataclass(frozen=True)
class ArmRow:
    arm: str
    baseline: bool
    model: str
    gpu: str
    gpu_count: int
    engine_version: str | None
    flags: str
    verdict: str | None


@dataclass(frozen=True)
class MeasurementRow:
    arm: str
    slice: str
    point_id: str
    point: str
    x: float | None
    attempt: int
    instance: str | None
    reason: str | None
    engine_version: str | None
    value: float | None
    log_value: float | None
    metrics: str | None
    error: str | None
    started_at: str | None


@dataclass(frozen=True)
class CellRow:
    candidate: str
    slice: str
    point_id: str
    x: float | None
    verdict: str
    change: float | None
    change_lo: float | None
    change_hi: float | None


@dataclass(frozen=True)
class RunRecord:
    """Everything the store keeps about one run directory."""

    run_dir: str
    kind: str
    experiment: str | None
    engine: str
    client: str | None
    simulated: bool
    harness_version: str | None
    git_sha: str | None
    host: str | None
    spec_sha256: str | None
    started_at: str | None
    finished_at: str | None
    primary_metric: str | None
    margin: float | None
    design: str | None
    noise_from: str | None
    failed: int
    analysed: bool
    arms: list[ArmRow] = field(default_factory=list)
    measurements: list[MeasurementRow] = field(default_factory=list)
    cells: list[CellRow] = field(default_factory=list)
    sigmas: dict[str, Sigma] = field(default_factory=dict)


def is_run_dir(path: Path) -> bool:
    """A directory `run`, `ingest` or `compare` wrote: measurements and their settings."""
    return (path / "results.jsonl").is_file() and (path / "settings.json").is_file()


def _kind(path: Path) -> str:
    if (path / "ingest.json").is_file():
        return "ingest"
    if (path / "compare.json").is_file():
        return "compare"
    return "run"


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot be read as JSON ({exc}); the store skips it") from None


def _engine_version(env: Environment, arm: str) -> str | None:
    versions = [s.version for s in env.servers.values() if s.arm == arm and s.version]
    return versions[0] if versions else None


def _arms(
    plan: Any, env: Environment, baseline: str | None, overall: dict[str, str]
) -> list[ArmRow]:
    """Each arm once: from plan.json's groups (model, GPUs, flags), else from env.json's
    servers (an ingested run: the model its server reported, GPUs as nvidia-smi saw them)."""
    gpus = env.gpus
    seen: dict[str, ArmRow] = {}
    groups = plan.get("groups") if isinstance(plan, dict) else None
    for g in groups or []:
        if not isinstance(g, dict) or str(g.get("arm")) in seen:
            continue
        arm = str(g.get("arm"))
        model, hw = g.get("model") or {}, g.get("hardware") or {}
        seen[arm] = ArmRow(
            arm=arm,
            baseline=arm == baseline,
            model=str(model.get("path") or model.get("name") or "?"),
            gpu=str(hw.get("gpu") or "?"),
            gpu_count=int(hw.get("count") or 1),
            engine_version=_engine_version(env, arm),
            flags=canonical(g.get("flags") or {}),
            verdict=overall.get(arm),
        )
    for server in env.servers.values():
        if server.arm in seen:
            continue
        args = server.args or {}
        seen[server.arm] = ArmRow(
            arm=server.arm,
            baseline=server.arm == baseline,
            model=str(args.get("model_path") or args.get("served_model_name") or "?"),
            gpu=gpus[0].name if gpus else "?",
            gpu_count=len(gpus) or 1,
            engine_version=_engine_version(env, server.arm),
            flags=canonical({}),
            verdict=overall.get(server.arm),
        )
    return list(seen.values())


def _cells(verdict: Verdict | None) -> list[CellRow]:
    out: list[CellRow] = []
    for sl in verdict.slices if verdict else []:
        for cand in sl.candidates:
            primary = next((m for m in cand.metrics if m.primary), None)
            for series in primary.series if primary else []:
                for c in series.cells:
                    out.append(
                        CellRow(
                            candidate=cand.candidate,
                            slice=sl.slice,
                            point_id=c.point_id,
                            x=c.x,
                            verdict=str(c.verdict),
                            change=c.change,
                            change_lo=c.change_lo,
                            change_hi=c.change_hi,
                        )
                    )
    return out


def _own_sigmas(
    rd: RunDir, verdict: Verdict | None, analysis: AnalysisSettings
) -> dict[str, Sigma]:
    """The run's own noise per metric: its verdict's, or where it borrowed an earlier run's,
    the analysis again without it (never the pooled value: that would count df twice)."""
    if verdict is None:
        return {}
    if not analysis.noise_history:
        return {s.metric: s for s in verdict.sigma}
    own = analysis.model_copy(update={"noise_history": {}, "noise_from": None})
    return {s.metric: s for s in analyse(rd.measurements(), own).sigma}


def extract(run_dir: str | Path) -> RunRecord:
    """The rows of one run directory; an InputError (one sentence) where it is not one."""
    path = Path(run_dir).resolve()
    if not is_run_dir(path):
        raise InputError(
            f"{path}: not a run directory (it needs results.jsonl and settings.json); give "
            "a directory `matrixrun run`, `ingest` or `compare` wrote"
        )
    rd = RunDir(path)
    settings = read_settings(rd)  # another format version: one sentence, the run skipped
    env = read_environment(path / "env.json") or Environment()
    try:
        verdict = (  # through RunDir: an older verdict.json is migrated (core.migrate)
            Verdict.model_validate(rd.read_json("verdict.json"))
            if (path / "verdict.json").is_file()
            else None
        )
    except (ValidationError, ValueError, InputError):
        verdict = None  # an older verdict.json: the measurements are still worth indexing
    plan = _json(path / "plan.json")
    a = settings.analysis
    overall = {c: str(o.verdict) for c, o in (verdict.overall if verdict else {}).items()}
    arms = _arms(plan, env, a.baseline, overall)
    versions = {s_name: s.version for s_name, s in env.servers.items()}
    ms = rd.measurements()
    rows = [
        MeasurementRow(
            arm=m.arm,
            slice=m.slice,
            point_id=m.point_id,
            point=canonical(m.point),
            x=_x(m.point, a.axis),
            attempt=m.attempt,
            instance=m.instance,
            reason=str(m.reason) if m.reason else None,
            engine_version=versions.get(m.instance or "") or _engine_version(env, m.arm),
            value=(value := m.metrics.get(a.primary) if m.metrics else None),
            log_value=(
                math.log(value) if value is not None and value > 0 and m.error is None else None
            ),
            metrics=m.metrics.model_dump_json() if m.metrics else None,
            error=m.error,
            started_at=m.started_at,
        )
        for m in ms
    ]
    starts = sorted(m.started_at for m in ms if m.started_at)
    ends = sorted(m.finished_at for m in ms if m.finished_at)
    spec = settings.spec
    return RunRecord(
        run_dir=str(path),
        kind=_kind(path),
        experiment=plan.get("experiment") if isinstance(plan, dict) else None,
        engine=env.engine or (spec.engine if spec else None) or "unknown",
        client=env.client,
        simulated=settings.rehearsal or env.simulated or any(m.simulated for m in ms),
        harness_version=env.harness.version,
        git_sha=env.git_sha,
        host=env.host,
        spec_sha256=spec.spec_sha256 if spec else None,
        started_at=starts[0] if starts else None,
        finished_at=ends[-1] if ends else None,
        primary_metric=a.primary,
        margin=a.margin,
        design=a.design,
        noise_from=a.noise_from,
        failed=sum(1 for m in ms if m.error is not None),
        analysed=verdict is not None,
        arms=arms,
        measurements=rows,
        cells=_cells(verdict),
        sigmas=_own_sigmas(rd, verdict, a),
    )


def _x(point: dict[str, Any], axis: str | None) -> float | None:
    value = point.get(axis) if axis else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

"""What `matrixrun history` asks the results store, as typed rows (no words: those are in
`cli/history_view.py`).

- `experiments`: runs by engine, model, hardware, flag and arm, newest first.
- `arm_series`: an arm's primary metric at each point, grouped by the engine version its
  servers reported, versions in the order they were first measured (what the regression check
  and the chart read).
- `measured_before`: for each arm of a spec, the stored runs of the same engine kind, model,
  GPUs and flags, and which of the spec's points they measured.

Every query filters in SQL and reads only the rows it needs, so a store of 10,000 runs answers
in well under a second (benchmarks/store.py, docs/benchmarks.md).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Row, Select, and_, func, select

from matrixrun.store import schema as t


@dataclass(frozen=True)
class Filters:
    engine: str | None = None
    model: str | None = None  # a substring of the model path
    gpu: str | None = None  # a substring of the GPU name
    flag: str | None = None  # a server flag the arm sets
    arm: str | None = None
    simulated: bool | None = None  # None: both


@dataclass(frozen=True)
class ArmSummary:
    arm: str
    baseline: bool
    engine_version: str | None
    flags: dict[str, object]
    verdict: str | None


@dataclass(frozen=True)
class Experiment:
    run_dir: str
    kind: str
    experiment: str | None
    engine: str
    simulated: bool
    finished_at: str | None
    model: str
    hardware: str
    measurements: int
    arms: list[ArmSummary]


def _arm_conditions(f: Filters) -> list[object]:
    cond: list[object] = []
    if f.model:
        cond.append(t.arms.c.model.contains(f.model, autoescape=True))
    if f.gpu:
        cond.append(t.arms.c.gpu.contains(f.gpu, autoescape=True))
    if f.arm:
        cond.append(t.arms.c.arm == f.arm)
    if f.flag:
        key = json.dumps(f.flag.replace("-", "_").lstrip("_"))
        cond.append(t.arms.c.flags.contains(f"{key}:", autoescape=True))
    return cond


def _run_conditions(f: Filters) -> list[object]:
    cond: list[object] = []
    if f.engine:
        cond.append(t.runs.c.engine == f.engine)
    if f.simulated is not None:
        cond.append(t.runs.c.simulated == f.simulated)
    return cond


def _matching_runs(f: Filters) -> Select[tuple[int]]:
    q = select(t.runs.c.id).where(*_run_conditions(f))  # type: ignore[arg-type]
    arm_cond = _arm_conditions(f)
    if arm_cond:
        sub = select(t.arms.c.run_id).where(*arm_cond)  # type: ignore[arg-type]
        q = q.where(t.runs.c.id.in_(sub))
    return q


def experiments(conn: Connection, f: Filters, limit: int = 20) -> tuple[int, list[Experiment]]:
    """How many runs match, and the newest `limit` of them with their arms."""
    ids = _matching_runs(f).subquery()
    total = conn.execute(select(func.count()).select_from(ids)).scalar_one()
    rows = conn.execute(
        select(t.runs)
        .where(t.runs.c.id.in_(select(ids.c.id)))
        .order_by(t.runs.c.finished_at.desc().nulls_last(), t.runs.c.id.desc())
        .limit(limit)
    ).all()
    by_run: dict[int, list[Row[Any]]] = defaultdict(list)
    if rows:
        for a in conn.execute(
            select(t.arms).where(t.arms.c.run_id.in_([r.id for r in rows]))
        ).all():
            by_run[a.run_id].append(a)
    out = []
    for r in rows:
        arms = by_run[r.id]
        models = sorted({a.model for a in arms})
        hw = sorted({f"{a.gpu_count}× {a.gpu}" for a in arms})
        out.append(
            Experiment(
                run_dir=r.run_dir,
                kind=r.kind,
                experiment=r.experiment,
                engine=r.engine,
                simulated=r.simulated,
                finished_at=r.finished_at,
                model=", ".join(models) or "?",
                hardware=", ".join(hw) or "?",
                measurements=r.measurements,
                arms=[
                    ArmSummary(a.arm, a.baseline, a.engine_version, json.loads(a.flags), a.verdict)
                    for a in sorted(arms, key=lambda a: (not a.baseline, a.arm))
                ],
            )
        )
    return int(total), out


@dataclass(frozen=True)
class LogStats:
    """Sufficient statistics of one version's log values at one point."""

    n: int
    mean: float  # of ln(value): exp(mean) is the geometric mean
    ss: float  # Σ (ln v − mean)²

    @classmethod
    def of(cls, values: Sequence[float]) -> LogStats:
        logs = [math.log(v) for v in values if v > 0]
        m = sum(logs) / len(logs) if logs else math.nan
        return cls(len(logs), m, sum((v - m) ** 2 for v in logs))


@dataclass(frozen=True)
class VersionGroup:
    """One engine version's measurements of the arm at each point (x), in time order."""

    version: str
    first_seen: str
    runs: int
    at: dict[float, LogStats] = field(default_factory=dict)


@dataclass(frozen=True)
class ArmSeries:
    arm: str
    metric: str | None
    groups: list[VersionGroup]
    metrics_seen: list[str]


def arm_series(conn: Connection, f: Filters, metric: str | None = None) -> ArmSeries:
    """The arm's primary metric, per engine version and point, over real runs only unless
    `f.simulated` says otherwise (a simulator's numbers say nothing about an engine's).
    Aggregated in SQL (count, Σ ln v, Σ (ln v)²): the rows read are versions × points, however
    many runs the store holds."""
    assert f.arm is not None
    sim = f.simulated if f.simulated is not None else False
    runs = _matching_runs(Filters(**{**vars(f), "simulated": sim})).subquery()
    metrics_seen = [
        m
        for (m,) in conn.execute(
            select(t.runs.c.primary_metric)
            .where(t.runs.c.id.in_(select(runs.c.id)), t.runs.c.primary_metric.is_not(None))
            .group_by(t.runs.c.primary_metric)
            .order_by(func.count().desc())
        ).all()
    ]
    metric = metric or (metrics_seen[0] if metrics_seen else None)
    judged = select(runs.c.id).join(t.runs, t.runs.c.id == runs.c.id)
    judged = judged.where(t.runs.c.primary_metric == metric)
    m, lv = t.measurements.c, t.measurements.c.log_value
    per_point = conn.execute(
        select(m.engine_version, m.x, func.count(), func.sum(lv), func.sum(lv * lv))
        .where(m.arm == f.arm, m.run_id.in_(judged), lv.is_not(None))
        .group_by(m.engine_version, m.x)
    ).all()
    a = t.arms.c
    per_version = conn.execute(
        select(a.engine_version, func.min(t.runs.c.finished_at), func.count())
        .join(t.runs, t.runs.c.id == a.run_id)
        .where(a.arm == f.arm, a.run_id.in_(judged))
        .group_by(a.engine_version)
    ).all()
    at: dict[str, dict[float, LogStats]] = defaultdict(dict)
    for version, x, n, s1, s2 in per_point:
        mean = float(s1) / n
        at[version or "unknown"][x if x is not None else math.nan] = LogStats(
            int(n), mean, max(float(s2) - n * mean * mean, 0.0)
        )
    groups = [
        VersionGroup(version or "unknown", first or "", int(count), at[version or "unknown"])
        for version, first, count in sorted(per_version, key=lambda r: (r[1] or "", r[0] or ""))
        if at.get(version or "unknown")
    ]
    return ArmSeries(f.arm, metric, groups, metrics_seen)


@dataclass(frozen=True)
class ArmKey:
    """What makes two arms the same configuration: engine kind, model, GPUs and flags."""

    arm: str
    engine: str
    model: str
    gpu: str
    gpu_count: int
    flags: str  # canonical JSON
    points: frozenset[str]  # canonical JSON of each point the spec measures


@dataclass(frozen=True)
class Earlier:
    run_dir: str
    finished_at: str | None
    engine_version: str | None
    simulated: bool
    points: int  # how many of the spec's points it measured


def measured_before(conn: Connection, keys: Sequence[ArmKey]) -> dict[str, list[Earlier]]:
    """For each arm of a spec, the stored runs of the same configuration, newest first."""
    out: dict[str, list[Earlier]] = {}
    for k in keys:
        rows = conn.execute(
            select(t.runs.c.id, t.runs.c.run_dir, t.runs.c.finished_at, t.runs.c.simulated)
            .add_columns(t.arms.c.arm, t.arms.c.engine_version)
            .join(t.arms, t.arms.c.run_id == t.runs.c.id)
            .where(
                t.runs.c.engine == k.engine,
                t.arms.c.model == k.model,
                t.arms.c.gpu == k.gpu,
                t.arms.c.gpu_count == k.gpu_count,
                t.arms.c.flags == k.flags,
            )
            .order_by(t.runs.c.finished_at.desc().nulls_last())
        ).all()
        counts: dict[int, int] = dict(
            conn.execute(
                select(t.measurements.c.run_id, func.count(t.measurements.c.point.distinct()))
                .join(
                    t.arms,
                    and_(
                        t.arms.c.run_id == t.measurements.c.run_id,
                        t.arms.c.arm == t.measurements.c.arm,
                    ),
                )
                .join(t.runs, t.runs.c.id == t.measurements.c.run_id)
                .where(
                    t.runs.c.engine == k.engine,
                    t.arms.c.model == k.model,
                    t.arms.c.gpu == k.gpu,
                    t.arms.c.gpu_count == k.gpu_count,
                    t.arms.c.flags == k.flags,
                    t.measurements.c.point.in_(sorted(k.points)),
                )
                .group_by(t.measurements.c.run_id)
            ).all()
        )
        found = [
            Earlier(run_dir, finished, version, simulated, int(counts.get(run_id, 0)))
            for run_id, run_dir, finished, simulated, _, version in rows
        ]
        out[k.arm] = found
    return out

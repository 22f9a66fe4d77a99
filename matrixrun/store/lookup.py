"""The store's side of an automatic noise prior (`store.prior`): the earlier runs whose own
noise a new run may pool. Kept apart from the pure pooling so that it stays one query."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Set
from dataclasses import dataclass

from sqlalchemy import select

from matrixrun.core.verdict import Sigma
from matrixrun.store import schema as t
from matrixrun.store.db import Store

GroupKey = tuple[str, str, int]  # model path, GPU, GPU count


@dataclass(frozen=True)
class EarlierNoise:
    """One earlier run's own noise per metric, and what a label names it by."""

    run_dir: str
    finished_at: str | None
    fixed_design: bool
    sigmas: Mapping[str, Sigma]
    engine_version: str | None = None


def earlier_noise(store: Store, engine: str, wanted: Set[GroupKey]) -> list[EarlierNoise]:
    """Analysed real runs (or ingests) of `engine` whose arms include every (model, GPU,
    count) wanted, with their own noise per metric; never a `compare` directory."""
    if not wanted:
        return []
    model, gpu, count = next(iter(wanted))
    with store.read() as conn:
        rows = conn.execute(
            select(
                t.runs.c.id,
                t.runs.c.run_dir,
                t.runs.c.finished_at,
                t.runs.c.design,
                t.arms.c.model,
                t.arms.c.gpu,
                t.arms.c.gpu_count,
                t.arms.c.engine_version,
            )
            .join(t.arms, t.arms.c.run_id == t.runs.c.id)
            .where(
                t.runs.c.engine == engine,
                t.runs.c.simulated.is_(False),
                t.runs.c.analysed.is_(True),
                # a compare's measurements are two other runs' relabelled: not a run's noise
                t.runs.c.kind != "compare",
                t.runs.c.id.in_(
                    select(t.arms.c.run_id).where(
                        t.arms.c.model == model, t.arms.c.gpu == gpu, t.arms.c.gpu_count == count
                    )
                ),
            )
        ).all()
        keys: dict[int, set[GroupKey]] = defaultdict(set)
        info: dict[int, tuple[str, str | None, bool, str | None]] = {}
        for rid, run_dir, finished, design, m, g, c, version in rows:
            keys[rid].add((m, g, c))
            prev = info.get(rid)
            info[rid] = (run_dir, finished, design == "fixed", (prev and prev[3]) or version)
        ids = [rid for rid, have in keys.items() if wanted <= have]
        sigmas: dict[int, dict[str, Sigma]] = defaultdict(dict)
        if ids:
            for rid, metric, record in conn.execute(
                select(t.sigmas.c.run_id, t.sigmas.c.metric, t.sigmas.c.record).where(
                    t.sigmas.c.run_id.in_(ids)
                )
            ).all():
                sigmas[rid][metric] = Sigma.model_validate_json(record)
    return [
        EarlierNoise(
            run_dir=info[rid][0],
            finished_at=info[rid][1],
            fixed_design=info[rid][2],
            sigmas=sigmas[rid],
            engine_version=info[rid][3],
        )
        for rid in ids
        if sigmas[rid]
    ]

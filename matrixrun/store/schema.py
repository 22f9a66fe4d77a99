"""The results store's tables (SQLAlchemy Core), one definition for SQLite and PostgreSQL.

The store is an index of run directories, never their replacement: every row is derived from
a run directory's files (`store.extract`), so `matrixrun store rebuild RUN_DIRS...` recreates
it. One run is one transaction (`Store.record`): its rows are replaced together or not at all,
so a writer killed mid-record leaves the run as it was before (tested by killing one).

`SCHEMA_VERSION` is kept in the `meta` table. A store of an older version is migrated in place
where a migration exists (`MIGRATIONS`); a newer one than this code knows is refused with one
sentence, since writing it could drop what a newer version records. Rebuilding from run
directories is always possible and is what a refused store is told to do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)


def canonical(value: Any) -> str:
    """JSON with sorted keys: equal flags or points give equal text (what the `flags` and
    `point` columns hold, and what queries match on)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


#: Bumped when a table or column changes, or what a column holds; `MIGRATIONS[v]` takes a
#: store from v to v + 1.
SCHEMA_VERSION = 2

metadata = MetaData()

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

#: One row per run directory (a `run`, an `ingest` or a `compare`).
runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_dir", Text, nullable=False, unique=True),
    Column("kind", String(16), nullable=False),  # run | ingest | compare
    Column("experiment", Text),
    Column("engine", String(64), nullable=False),  # the engine kind: sglang, vllm, command …
    Column("client", String(64)),
    Column("simulated", Boolean, nullable=False),
    Column("harness_version", String(64)),
    Column("git_sha", String(80)),
    Column("host", Text),
    Column("spec_sha256", String(64)),
    Column("started_at", String(32)),  # ISO 8601 UTC, the first measurement's start
    Column("finished_at", String(32)),  # the last measurement's end
    Column("primary_metric", String(64)),
    Column("margin", Float),
    Column("design", String(16)),
    Column("noise_from", Text),  # what the run borrowed its noise from, as its report names it
    Column("measurements", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("analysed", Boolean, nullable=False),
)

#: A run's arms: where each ran (model, GPUs), with which flags and engine version.
arms = Table(
    "arms",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("arm", String(200), nullable=False),
    Column("baseline", Boolean, nullable=False),
    Column("model", Text, nullable=False),
    Column("gpu", String(200), nullable=False),
    Column("gpu_count", Integer, nullable=False),
    Column("engine_version", Text),  # as its servers reported it; the first one's
    Column("flags", Text, nullable=False),  # canonical JSON of the arm's server flags
    Column("verdict", String(16)),  # its overall verdict on the primary metric (candidates)
)

#: Every measurement (one run of one cell) with its primary metric pulled out for queries.
measurements = Table(
    "measurements",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("arm", String(200), nullable=False),
    Column("slice", Text, nullable=False),
    Column("point_id", String(64), nullable=False),
    Column("point", Text, nullable=False),  # canonical JSON of the point
    Column("x", Float),
    Column("attempt", Integer, nullable=False),
    Column("instance", String(200)),
    Column("reason", String(32)),
    Column("engine_version", Text),
    Column("value", Float),  # the run's primary metric; None where it failed
    # ln(value) where the run succeeded and value > 0: what the version table aggregates
    Column("log_value", Float),
    Column("metrics", Text),  # every metric, JSON
    Column("error", Text),
    Column("started_at", String(32)),
)

#: Each judged cell: a candidate against the baseline at one point, on the primary metric.
cells = Table(
    "cells",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("candidate", String(200), nullable=False),
    Column("slice", Text, nullable=False),
    Column("point_id", String(64), nullable=False),
    Column("x", Float),
    Column("verdict", String(16), nullable=False),
    Column("change", Float),
    Column("change_lo", Float),
    Column("change_hi", Float),
)

#: The run's own noise per metric (`Sigma`, JSON): analysed without anything it borrowed, so
#: pooling several stored runs never counts one run's df twice.
sigmas = Table(
    "sigmas",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("metric", String(64), nullable=False),
    Column("fixed_design", Boolean, nullable=False),
    Column("record", Text, nullable=False),
)

Index("ix_arms_run", arms.c.run_id)
Index("ix_arms_key", arms.c.arm, arms.c.model, arms.c.gpu)
Index("ix_measurements_run", measurements.c.run_id)
#: covers the version table's aggregate (`queries.arm_series`): no table row is read
Index(
    "ix_measurements_series",
    measurements.c.arm,
    measurements.c.run_id,
    measurements.c.engine_version,
    measurements.c.x,
    measurements.c.log_value,
)
Index("ix_cells_run", cells.c.run_id)
Index("ix_sigmas_run", sigmas.c.run_id)
Index("ix_runs_engine", runs.c.engine, runs.c.finished_at)


def undecided_v1(conn: Connection) -> None:
    """1 → 2: the undecided outcome has one stored word, `undecided` (run directories: format
    3, `core.migrate`). Rows indexed from older run directories said `inconclusive` for a
    verdict (before their format 2) and for the reason of a rerun of an undecided cell."""
    for column in (arms.c.verdict, cells.c.verdict, measurements.c.reason):
        table = column.table
        conn.execute(
            table.update().where(column == "inconclusive").values({column.name: "undecided"})
        )


#: Version v → the function that takes a store from v to v + 1. Each runs inside the
#: transaction that records the new version.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: undecided_v1}

"""The results store's connection and writes: one code path for SQLite and PostgreSQL
(SQLAlchemy Core; psycopg 3 for PostgreSQL).

Where it is: `--store` (a path or a URL), else `MATRIXRUN_STORE`, else the per-user default
`$XDG_DATA_HOME/matrixrun/store.sqlite` (`~/.local/share/...`). `off` turns recording off. A
plain path is SQLite; `postgresql://…` is PostgreSQL (the driver is psycopg 3 whatever the URL
names). Connecting is bounded (5 s for PostgreSQL, a 5 s busy wait for SQLite) so a store
that is down never holds a run up: `record_run` turns any failure into one sentence.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, delete, event, insert, select
from sqlalchemy.engine import make_url

from matrixrun.core.errors import InputError
from matrixrun.store import schema as t

if TYPE_CHECKING:
    from matrixrun.store.extract import RunRecord

STORE_ENV = "MATRIXRUN_STORE"
OFF = "off"


def default_location() -> Path:
    """The per-user store: $XDG_DATA_HOME/matrixrun/store.sqlite (XDG base directories)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "matrixrun" / "store.sqlite"


def location(given: str | None = None) -> str | None:
    """The store asked for (`--store`, then MATRIXRUN_STORE, then the default); None: off."""
    where = given or os.environ.get(STORE_ENV) or str(default_location())
    return None if where.strip().lower() == OFF else where


def url_of(where: str) -> str:
    """A SQLAlchemy URL: a path becomes sqlite:///ABS, a postgres URL gets the psycopg driver."""
    if "://" not in where:
        return f"sqlite:///{Path(where).expanduser().resolve()}"
    url = make_url(where)
    if url.get_backend_name() in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    elif url.get_backend_name() != "sqlite":
        raise InputError(
            f"results store {shown(where)}: only SQLite (a path or sqlite:///PATH) and "
            "PostgreSQL (postgresql://…) are supported"
        )
    return url.render_as_string(hide_password=False)


def shown(where: str) -> str:
    """The store as messages name it: a URL without its password."""
    if "://" not in where:
        return where
    try:
        return make_url(where).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is named by its scheme alone
        return where.split("://", 1)[0] + "://…"


def _engine(where: str) -> Engine:
    url = make_url(url_of(where))
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 5})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi: Any, _: Any) -> None:  # foreign keys for ON DELETE CASCADE; WAL
            cur = dbapi.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        return engine
    return create_engine(url, connect_args={"connect_timeout": 5}, pool_pre_ping=True)


class Store:
    """One store: its tables made or migrated on opening, one transaction per run."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.engine = _engine(where)
        self._migrate()

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    def _migrate(self) -> None:
        with self.engine.begin() as conn:
            t.metadata.create_all(conn, tables=[t.meta])
            row = conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema")).first()
            version = int(row[0]) if row else 0
            if version > t.SCHEMA_VERSION:
                raise InputError(
                    f"results store {shown(self.where)} has schema version {version}, newer "
                    f"than this matrixrun's ({t.SCHEMA_VERSION}); upgrade matrixrun, or use "
                    "another store (`matrixrun store rebuild` makes one from run directories)"
                )
            if version == t.SCHEMA_VERSION:
                return
            if version == 0:
                t.metadata.create_all(conn)
            else:
                for v in range(version, t.SCHEMA_VERSION):
                    t.MIGRATIONS[v](conn)
            conn.execute(delete(t.meta).where(t.meta.c.key == "schema"))
            conn.execute(insert(t.meta).values(key="schema", value=str(t.SCHEMA_VERSION)))

    def schema_version(self) -> int:
        with self.read() as conn:
            row = conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema")).first()
        return int(row[0]) if row else 0

    def record(self, rec: RunRecord) -> None:
        """The run's rows, replacing any it had, in one transaction: all or nothing."""
        with self.engine.begin() as conn:
            self._write(conn, rec)

    def record_many(self, recs: list[RunRecord]) -> None:
        """Several runs in one transaction (`rebuild`, the benchmark's fill)."""
        with self.engine.begin() as conn:
            for rec in recs:
                self._write(conn, rec)

    def forget(self, run_dir: str) -> bool:
        with self.engine.begin() as conn:
            return bool(conn.execute(delete(t.runs).where(t.runs.c.run_dir == run_dir)).rowcount)

    def clear(self) -> None:
        with self.engine.begin() as conn:
            for table in (t.sigmas, t.cells, t.measurements, t.arms, t.runs):
                conn.execute(delete(table))

    @staticmethod
    def _write(conn: Connection, rec: RunRecord) -> None:
        old = conn.execute(select(t.runs.c.id).where(t.runs.c.run_dir == rec.run_dir)).first()
        if old is not None:
            for table in (t.sigmas, t.cells, t.measurements, t.arms):
                conn.execute(delete(table).where(table.c.run_id == old[0]))
            conn.execute(delete(t.runs).where(t.runs.c.id == old[0]))
        run_id = conn.execute(
            insert(t.runs)
            .values(
                run_dir=rec.run_dir,
                kind=rec.kind,
                experiment=rec.experiment,
                engine=rec.engine,
                client=rec.client,
                simulated=rec.simulated,
                harness_version=rec.harness_version,
                git_sha=rec.git_sha,
                host=rec.host,
                spec_sha256=rec.spec_sha256,
                started_at=rec.started_at,
                finished_at=rec.finished_at,
                primary_metric=rec.primary_metric,
                margin=rec.margin,
                design=rec.design,
                noise_from=rec.noise_from,
                measurements=len(rec.measurements),
                failed=rec.failed,
                analysed=rec.analysed,
            )
            .returning(t.runs.c.id)
        ).scalar_one()
        if rec.arms:
            conn.execute(insert(t.arms), [{"run_id": run_id, **vars(a)} for a in rec.arms])
        if rec.measurements:
            conn.execute(
                insert(t.measurements), [{"run_id": run_id, **vars(m)} for m in rec.measurements]
            )
        if rec.cells:
            conn.execute(insert(t.cells), [{"run_id": run_id, **vars(c)} for c in rec.cells])
        if rec.sigmas:
            conn.execute(
                insert(t.sigmas),
                [
                    {
                        "run_id": run_id,
                        "metric": metric,
                        "fixed_design": s.fixed_design,
                        "record": s.model_dump_json(),
                    }
                    for metric, s in rec.sigmas.items()
                ],
            )


def open_store(given: str | None = None) -> Store | None:
    """The store asked for, opened (tables made or migrated); None where it is off."""
    where = location(given)
    return Store(where) if where is not None else None


def open_required(given: str | None = None) -> Store:
    """The store a command that reads or rebuilds it asked for; off is bad input there."""
    opened = open_store(given)
    if opened is None:
        raise InputError("the results store is off (MATRIXRUN_STORE=off); give --store PATH")
    return opened

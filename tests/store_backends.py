"""The results store's two backends for tests: a SQLite file under tmp_path, and a real
PostgreSQL server (MATRIXRUN_TEST_PG_URL, started by `.ci/postgres.sh start` in CI and
locally). Each PostgreSQL test gets its own schema (search_path in the URL), dropped after.

Without MATRIXRUN_TEST_PG_URL the PostgreSQL cases skip and say why; with
MATRIXRUN_PG_TESTS=require (CI, once the server started) they fail instead, so a broken
server fails CI rather than skipping quietly.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

PG_ENV = "MATRIXRUN_TEST_PG_URL"


def _pg_unavailable(why: str) -> None:
    if os.environ.get("MATRIXRUN_PG_TESTS") == "require":
        pytest.fail(f"MATRIXRUN_PG_TESTS=require but {why}")
    pytest.skip(f"no PostgreSQL server: {why} (start one: bash .ci/postgres.sh start)")


def pg_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        _pg_unavailable(f"{PG_ENV} is not set")
    assert url is not None
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "store.sqlite")
        return
    yield from pg_schema_url()


def pg_schema_url() -> Iterator[str]:
    import psycopg

    url = pg_url()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    except psycopg.OperationalError as exc:
        _pg_unavailable(f"{PG_ENV} cannot be reached ({exc})")
    sep = "&" if "?" in url else "?"
    yield f"{url}{sep}options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")

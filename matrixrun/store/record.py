"""Recording into the results store: `record_run` is the one call `run`, `ingest` and
`compare` make; it never raises, so a store that is down or full costs a sentence, never a
measurement. `run_dirs` finds the run directories `matrixrun store rebuild` indexes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from matrixrun.store.db import location, open_store
from matrixrun.store.extract import extract, is_run_dir


def record_run(run_dir: str | Path, store: str | None = None) -> Exception | None:
    """Index one finished run directory; None when done or off, else why it could not be
    (the run itself is complete either way; the CLI says so in one sentence)."""
    if location(store) is None:
        return None
    try:
        opened = open_store(store)
        assert opened is not None
        try:
            opened.record(extract(run_dir))
        finally:
            opened.close()
    except Exception as exc:  # the store must never cost a run its result
        return exc
    return None


def run_dirs(roots: Iterable[str | Path]) -> list[Path]:
    """Every run directory at or under each root (a run directory is not searched inside)."""
    out: list[Path] = []
    for root in roots:
        base = Path(root)
        if is_run_dir(base):
            out.append(base.resolve())
            continue
        out += sorted(
            p.parent.resolve() for p in base.rglob("settings.json") if is_run_dir(p.parent)
        )
    return list(dict.fromkeys(out))

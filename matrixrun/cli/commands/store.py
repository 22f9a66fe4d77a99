"""`matrixrun store`: index run directories into the results store (`rebuild`: the store is an
index of them, so it can always be recreated), or show where it is and how much it holds
(`status`)."""

from __future__ import annotations

import argparse
import sys

from sqlalchemy import func, select

from matrixrun.cli.exits import EXIT_OK
from matrixrun.core.errors import InputError
from matrixrun.store import schema as t
from matrixrun.store.db import open_required, shown
from matrixrun.store.extract import extract
from matrixrun.store.record import run_dirs


def cmd_store(args: argparse.Namespace) -> int:
    store = open_required(args.store)
    try:
        if args.store_command == "status":
            with store.read() as conn:
                n = conn.execute(select(func.count()).select_from(t.runs)).scalar_one()
                m = conn.execute(select(func.count()).select_from(t.measurements)).scalar_one()
            print(
                f"results store {shown(store.where)}: schema version {store.schema_version()}, "
                f"{n} run(s), {m} measurement(s)"
            )
            return EXIT_OK
        dirs = run_dirs(args.run_dirs)
        if not dirs:
            raise InputError(
                f"no run directory (results.jsonl and settings.json) at or under "
                f"{' '.join(args.run_dirs)}"
            )
        records, skipped = [], []
        for d in dirs:
            try:
                records.append(extract(d))
            except InputError as exc:
                skipped.append(str(exc))
        if args.fresh:
            store.clear()
        store.record_many(records)
        for why in skipped:
            print(f"skipped: {why}", file=sys.stderr)
        print(
            f"indexed {len(records)} run director{'y' if len(records) == 1 else 'ies'} into "
            f"{shown(store.where)}" + (f"; skipped {len(skipped)}" if skipped else "")
        )
        return EXIT_OK
    finally:
        store.close()

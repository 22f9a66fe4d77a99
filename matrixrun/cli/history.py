"""`matrixrun history` and `matrixrun store`: their options and handlers, kept here so that the
main CLI gains two table entries and nothing else. Exit codes as the CLI's: 0 ok, 1 a
regression found by `history --check`, 2 bad input."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from matrixrun.core.errors import InputError

if TYPE_CHECKING:
    from matrixrun.store.db import Store
    from matrixrun.store.queries import ArmKey, Filters

EXIT_OK, EXIT_FAILED = 0, 1


def add_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        metavar="PATH_OR_URL",
        help="the results store: a SQLite file or postgresql://… (default: $MATRIXRUN_STORE, "
        "else $XDG_DATA_HOME/matrixrun/store.sqlite; `off` turns it off)",
    )


def add_history(p: argparse.ArgumentParser) -> None:
    add_store_option(p)
    p.add_argument("--engine", help="only runs of this engine kind (sglang, vllm, command …)")
    p.add_argument("--model", help="only arms whose model path contains this")
    p.add_argument("--gpu", help="only arms whose GPU name contains this")
    p.add_argument("--flag", help="only arms that set this server flag")
    p.add_argument(
        "--arm", help="only this arm; also its primary metric across engine versions (a chart)"
    )
    p.add_argument("--metric", help="with --arm: the metric (default: the runs' primary)")
    p.add_argument("--at", type=float, metavar="X", help="with --arm: the point to chart")
    p.add_argument("--simulated", action="store_true", help="simulated runs instead of real")
    p.add_argument("--limit", type=int, default=20, help="runs listed (default 20)")
    p.add_argument(
        "--spec", metavar="SPEC", help="has each arm of SPEC been measured before, and where"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="with --arm: exit 1 if the newest engine version regressed against the one before",
    )
    p.add_argument(
        "--threshold", default="5%", help="--check: the smallest regression that counts (5%%)"
    )
    p.add_argument("--alpha", type=float, default=0.05, help="--check: the test's α (0.05)")


def add_store(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    rebuild = sub.add_parser(
        "rebuild",
        help="index run directories (and every run directory under a folder) into the store",
    )
    rebuild.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    rebuild.add_argument(
        "--fresh", action="store_true", help="empty the store first (else runs are replaced)"
    )
    add_store_option(rebuild)
    status = sub.add_parser("status", help="where the store is, its schema version and size")
    add_store_option(status)


def _open(store: str | None) -> Store:
    from matrixrun.store.db import open_store

    opened = open_store(store)
    if opened is None:
        raise InputError("the results store is off (MATRIXRUN_STORE=off); give --store PATH")
    return opened


def _filters(args: argparse.Namespace) -> Filters:
    from matrixrun.store.queries import Filters

    return Filters(
        engine=args.engine,
        model=args.model,
        gpu=args.gpu,
        flag=args.flag,
        arm=args.arm,
        simulated=True if args.simulated else None,
    )


def cmd_history(args: argparse.Namespace) -> int:
    from matrixrun.core.metrics import higher_is_better
    from matrixrun.core.units import parse_percent
    from matrixrun.report.wording import history as words
    from matrixrun.store import queries
    from matrixrun.store.regression import check

    if args.check and not args.arm:
        raise InputError("history --check compares one arm across engine versions: add --arm ARM")
    store = _open(args.store)
    try:
        with store.read() as conn:
            if args.spec:
                keys = spec_keys(args.spec)
                sys.stdout.write(
                    words.measured_before_text(keys, queries.measured_before(conn, keys))
                )
                return EXIT_OK
            f = _filters(args)
            total, rows = queries.experiments(conn, f, limit=args.limit)
            sys.stdout.write(words.experiments_table(total, rows))
            if not args.arm:
                return EXIT_OK
            series = queries.arm_series(conn, f, args.metric)
    finally:
        store.close()
    sys.stdout.write("\n" + words.series_table(series))
    chart = words.series_chart(series, args.at)
    sys.stdout.write("\n" + chart if chart else "")
    if not args.check:
        return EXIT_OK

    result = check(
        series.groups,
        higher_is_better(series.metric or ""),
        threshold=parse_percent(args.threshold),
        alpha=args.alpha,
    )
    sys.stdout.write("\n" + words.check_text(series, result))
    return EXIT_FAILED if result.regressed() else EXIT_OK


def spec_keys(spec_path: str) -> list[ArmKey]:
    """Each arm of a spec as the store matches it: engine kind, model, GPUs, flags, points."""
    from matrixrun.plan import expand
    from matrixrun.spec import load_spec
    from matrixrun.store.extract import canonical
    from matrixrun.store.queries import ArmKey

    spec = load_spec(spec_path)
    groups = expand(spec).model_dump(mode="json")["groups"]  # points as plan.json has them
    keys: dict[str, ArmKey] = {}
    for g in groups:
        if g["arm"] in keys:
            continue
        points = frozenset(
            canonical(c["point"]) for gg in groups if gg["arm"] == g["arm"] for c in gg["cells"]
        )
        keys[g["arm"]] = ArmKey(
            arm=g["arm"],
            engine=spec.engine.kind,
            model=str(g["model"]["path"]),
            gpu=str(g["hardware"]["gpu"]),
            gpu_count=int(g["hardware"]["count"]),
            flags=canonical(g["flags"]),
            points=points,
        )
    return list(keys.values())


def cmd_store(args: argparse.Namespace) -> int:
    from matrixrun.store.db import shown
    from matrixrun.store.extract import extract
    from matrixrun.store.record import run_dirs

    store = _open(args.store)
    try:
        if args.store_command == "status":
            from sqlalchemy import func, select

            from matrixrun.store import schema as t

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

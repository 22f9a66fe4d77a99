"""`matrixrun history`: what the results store holds (by engine, model, hardware, flag, arm; an
arm across engine versions; has a spec been measured before) and a regression check with an
exit code: 0 ok, 1 a regression found by `--check`, 2 bad input. Reading the store needs no
analysis: rebuilding it does (`commands/store.py`), so the two commands are two modules."""

from __future__ import annotations

import argparse
import sys

from matrixrun.cli import history_view as words
from matrixrun.cli.exits import EXIT_FAILED, EXIT_OK
from matrixrun.core.errors import InputError
from matrixrun.core.metrics import higher_is_better
from matrixrun.core.units import parse_percent
from matrixrun.plan import expand
from matrixrun.spec import load_spec
from matrixrun.store import queries
from matrixrun.store.db import open_required
from matrixrun.store.queries import ArmKey, Filters
from matrixrun.store.regression import check
from matrixrun.store.schema import canonical


def _filters(args: argparse.Namespace) -> Filters:
    return Filters(
        engine=args.engine,
        model=args.model,
        gpu=args.gpu,
        flag=args.flag,
        arm=args.arm,
        simulated=True if args.simulated else None,
    )


def cmd_history(args: argparse.Namespace) -> int:
    if args.check and not args.arm:
        raise InputError("history --check compares one arm across engine versions: add --arm ARM")
    store = open_required(args.store)
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

    try:
        threshold = parse_percent(args.threshold)
    except ValueError as exc:
        raise InputError(f"--threshold: {exc}") from exc
    result = check(
        series.groups,
        higher_is_better(series.metric or ""),
        threshold=threshold,
        alpha=args.alpha,
    )
    sys.stdout.write("\n" + words.check_text(series, result))
    return EXIT_FAILED if result.regressed() else EXIT_OK


def spec_keys(spec_path: str) -> list[ArmKey]:
    """Each arm of a spec as the store matches it: engine kind, model, GPUs, flags, points."""
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

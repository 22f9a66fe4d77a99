"""`matrixrun validate`: check spec files (the schema, the flags against the engine's own list,
the plan they expand to) and say, per file, what is wrong or what it costs; exit 2 on any error."""

from __future__ import annotations

import argparse
import sys

from matrixrun.cli.exits import EXIT_INPUT, EXIT_OK, print_spec_issues
from matrixrun.core.errors import SpecError
from matrixrun.core.words import plural
from matrixrun.flags import check_file
from matrixrun.plan import expand
from matrixrun.spec import read_spec


def cmd_validate(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.specs:
        try:
            source = read_spec(path)
        except SpecError as exc:
            bad += 1
            print_spec_issues(exc)
            continue
        flags = check_file(source)
        for issue in flags.warnings:
            print(str(issue), file=sys.stderr)
        if flags.errors:
            bad += 1
            print("\n".join(map(str, flags.errors)), file=sys.stderr)
            print(f"{path}: {flags.summary}", file=sys.stderr)
            continue
        spec = source.spec
        plan = expand(spec)
        print(
            f"{path}: ok ({plural(len(spec.arms), 'arm')}, {plural(len(plan.slices), 'slice')}, "
            f"{plural(plan.cost.cells, 'cell')}, {plural(plan.cost.launches, 'launch', 'launches')}"
            f"); {flags.summary}"
        )
    return EXIT_INPUT if bad else EXIT_OK

"""`matrixrun ingest` and `matrixrun compare`: a run directory built from results measured
elsewhere (result files of other clients, `matrixrun.ingest.formats`; or two earlier runs of
one experiment), then analysed, reported and indexed in the results store like any run."""

from __future__ import annotations

import argparse
import shlex
import sys

from matrixrun.cli.exits import EXIT_OK
from matrixrun.cli.finish import gate, record
from matrixrun.ingest.command import ingest
from matrixrun.ingest.compare import compare_runs
from matrixrun.publish.ci import parse_fail_on


def cmd_ingest(args: argparse.Namespace) -> int:
    out = ingest(
        args.files,
        baseline=args.baseline,
        out=args.out,
        threshold=args.threshold,
        noise=args.noise,
        arm_field=args.arm_field,
        axis_field=args.axis_field,
        point_fields=args.point_field or [],
        fresh_server=args.fresh_server,
        server_mode=args.servers,
        argv=sys.argv,
        format=args.format,
        mix_formats=args.mix_formats,
        sweep_serve=args.sweep_serve,
        metrics=args.metrics,
        allow_differences=args.allow_difference or [],
        dry_run=args.dry_run,
        show=print,
    )
    if out is None:
        print("dry run: nothing written")
        return EXIT_OK
    print(f"wrote {out} and its report {out / 'report.md'}")
    record(out, show=True)
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    parse_fail_on(args.fail_on)  # a misspelt gate is refused before anything is written
    out = compare_runs(
        args.run_a,
        args.run_b,
        args.out,
        labels=(args.labels[0], args.labels[1]) if args.labels else None,
        command=shlex.join(["matrixrun", *sys.argv[1:]]),
    )
    print(f"wrote {out} and its report {out / 'report.md'}")
    record(out, show=True)
    return gate(str(out), args.fail_on)

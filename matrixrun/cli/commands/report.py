"""`matrixrun analyse` and `matrixrun report`: judge a run directory by its own settings
(verdict.json), and render its verdict document, with the `--fail-on` gate for CI."""

from __future__ import annotations

import argparse
import sys

from matrixrun.cli.exits import EXIT_OK
from matrixrun.cli.finish import gate, step_summary
from matrixrun.core.redact import redact_file, redact_text
from matrixrun.publish.ci import parse_fail_on
from matrixrun.report import render_run, report_text
from matrixrun.run.outputs import analyse_run


def cmd_analyse(args: argparse.Namespace) -> int:
    print(f"wrote {analyse_run(args.run_dir)}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    parse_fail_on(args.fail_on)  # a misspelt gate is refused before anything is written
    if args.output == "-":
        text = redact_text(report_text(args.run_dir, templates=args.templates))
        sys.stdout.write(text)
    else:
        path = redact_file(render_run(args.run_dir, args.output, templates=args.templates))
        text = path.read_text(encoding="utf-8")
        print(f"wrote {path}")
    step_summary(text)
    return gate(args.run_dir, args.fail_on)

"""`matrixrun bench-client`: measure a running server once with the built-in client and print
the metrics as JSON (load/command.py measures; this prints and picks the exit code)."""

from __future__ import annotations

import argparse
import json
import sys

from matrixrun.cli.exits import EXIT_FAILED, EXIT_OK, say
from matrixrun.load.command import client_warning, failure_summary, short_warning
from matrixrun.load.command import run as run_bench_client


def cmd_bench_client(args: argparse.Namespace) -> int:
    out = run_bench_client(args)
    print(json.dumps(out, indent=2))
    for warning in (client_warning(out), short_warning(out, args.output_len)):
        if warning:
            print(warning, file=sys.stderr)
    failures = failure_summary(out)
    if failures:
        say(failures)
        return EXIT_FAILED
    return EXIT_OK

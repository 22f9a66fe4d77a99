"""`matrixrun post`: a run's verdict, or a spec's proposal, as one pull-request comment each
(updated in place), with the `--fail-on` gate after posting."""

from __future__ import annotations

import argparse

from matrixrun.cli.exits import EXIT_FAILED, EXIT_OK, say
from matrixrun.publish.ci import post


def cmd_post(args: argparse.Namespace) -> int:
    """The verdict of RUN_DIR, or with --plan the proposal of SPEC, as one PR comment each."""
    outcome = post(
        run_dir=args.run_dir,
        plan=args.plan,
        history=args.history or (),
        repo=args.repo,
        number=args.pr,
        experiment=args.experiment,
        token_env=args.token_env,
        api_url=args.api_url,
        dry_run=args.dry_run,
        fail_on=args.fail_on,
    )
    print(outcome.message)
    if outcome.failing:
        which = ", ".join(f"{c} is {v}" for c, v in outcome.failing)
        say(f"--fail-on {args.fail_on}: {which} (see the verdict comment)")
        return EXIT_FAILED
    return EXIT_OK

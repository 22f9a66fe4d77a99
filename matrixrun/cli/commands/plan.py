"""`matrixrun plan`: the server groups, cells and cost of a spec (text, --json, or with
--markdown the proposal comment), and whether its margin can be reached at all."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence

from matrixrun.cli.exits import EXIT_INPUT, EXIT_OK
from matrixrun.cli.finish import step_summary
from matrixrun.cli.history_view import plan_noise_note
from matrixrun.core.redact import redact_json, redact_text
from matrixrun.flags import require_valid_flags
from matrixrun.plan import Plan, expand
from matrixrun.plan.render import plan_text
from matrixrun.publish.proposal import render_proposal
from matrixrun.rundir.settings import analysis_settings
from matrixrun.spec import Spec, read_spec
from matrixrun.store.prior import plan_noise
from matrixrun.verify.chance import narrowest_half_width, runs_for_half_width


def cmd_plan(args: argparse.Namespace) -> int:
    if args.markdown:
        return _plan_markdown(args)
    source = read_spec(args.spec)
    require_valid_flags(source)  # validate's flag check: a plan of a launch that fails
    spec = source.spec
    plan = expand(spec, source.hash)
    if args.json:
        print(json.dumps(redact_json(plan.model_dump(mode="json")), indent=2))
    else:
        noise = plan_noise(spec, plan)
        note = plan_noise_note(spec.engine.kind, noise)
        print(redact_text(plan_text(spec, plan, noise.history, note)))
        if (warning := margin_warning(spec, plan)) is not None:
            print(warning)
    step_summary(_plan_summary(args.spec, args.history or ()))
    return EXIT_OK


def margin_warning(spec: Spec, plan: Plan) -> str | None:
    """Before the run: can the margin be reached at all with the declared noise and
    max_runs? If even the narrowest interval the run can end with is wider than the margin,
    no cell can be called same, and only changes well beyond it better or worse."""
    v = spec.verify
    if v.noise is None or v.max_runs < 1:
        return None
    level = analysis_settings(spec, plan).level
    margin = math.log1p(v.threshold)
    half = narrowest_half_width(v.noise, v.max_runs, level)
    if half < margin:
        return None
    need = runs_for_half_width(v.noise, margin, level)
    return (
        f"warning: with the declared noise (verify.noise {100 * v.noise:g}%) and verify.max_runs "
        f"{v.max_runs}, a cell's interval cannot get narrower than ±{100 * math.expm1(half):.1f}% "
        f"— wider than the ±{100 * v.threshold:g}% margin — so no cell can be called same, and "
        f"only changes beyond about ±{100 * math.expm1(margin + half):.0f}% better or worse; "
        f"raise verify.max_runs to {need} or more, widen verify.threshold, or lower the noise"
    )


def _plan_markdown(args: argparse.Namespace) -> int:
    """The proposal (publish/proposal.py); an invalid spec still gets one, showing its errors,
    exit 2."""
    text, validation, _ = render_proposal(args.spec, args.history or ())
    sys.stdout.write(text)
    step_summary(text)
    for error in validation.errors:
        print(error, file=sys.stderr)
    return EXIT_OK if validation.ok else EXIT_INPUT


def _plan_summary(spec: str, history: Sequence[str]) -> str | None:
    """The proposal for the job summary, only when there is one to write to."""
    if not os.environ.get("GITHUB_STEP_SUMMARY"):
        return None
    return render_proposal(spec, history)[0]

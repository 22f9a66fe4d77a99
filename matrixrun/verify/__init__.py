"""Repeat-to-verify: which cells to run again, why, and where (VERDICTS.md §6). No I/O.

The policy is fixed by the spec's `verify` block before anything runs and its answers are a
function of the measurements so far (the policy object keeps state between calls, named in
`policy`'s docstring, which its calls rebuild from the measurements and the plan), so a
resumed run asks for exactly the reruns the interrupted one would have:

- stage 1 (while a group's server is still up): cells whose |change| exceeds `surprise` get
  one warm rerun of the arm on that server — the test of "first-time JIT compile / warmup";
- stage 2, in at most `max_runs − 1` planned rounds (the analysis spends α over every state a
  cell can stop in, n_b + n_c runs, so whatever this policy re-measures — confident cells
  included — and however often it re-analyses, the verdicts keep their level):
  * surprising cells get a rerun of the candidate on a freshly launched server (tests "this
    server instance was odd"; also the right replicate for σ),
  * cells whose confident verdicts flip sign (crossover brackets) get a fresh replicate of
    both arms while n = 1, so the bracket is not built on single runs,
  * with `bisect`, a bracket's geometric midpoint becomes a new cell of the bracket's groups
    for the baseline and the crossing candidate (`bisect`: the rule; `plan.json` records it),
  * with an `slo` along a load axis, each arm's capacity bracket is narrowed the same way: a
    load within noise of a bound gets more runs of that arm, and a bracket with clear
    adjacent ends gets its midpoint as a new cell of that arm (`capacity`),
  * inconclusive cells get more runs of the arm whose n limits the interval (both when equal),
  * with `aa`, every baseline cell once more on a fresh server in round 1 (A/A: σ without any
    candidate effect);
  groups are batched so each arm is relaunched once per round, in ABBA order across rounds,
  and a round that would exceed the rerun `budget` is trimmed to fit.

`verify.design: fixed` replaces all of this with a fixed design (`fixed`): every cell
`max_runs` times, each run on its own launch, nothing chosen by the data — a calibration run
whose launch noise a later run may pool (`verify.noise_from`). `policy_for` picks the one the
spec asks for; the runner, the Slurm controller and its jobs all construct it through it.

Modules: `policy` (the adaptive policy), `fixed` (the fixed design), `schedule` (the order
of work as work items: the runner, Slurm jobs and the scoring benchmark consume it alike),
`chance` (the futility rule's prediction), `bisect` (crossover bisection), `capacity`
(narrowing capacity brackets under an SLO).
"""

from matrixrun.core.tuning import FUTILITY, MIN_FRESH_DF
from matrixrun.plan import Plan
from matrixrun.spec import Spec
from matrixrun.verify.chance import decide_chance
from matrixrun.verify.fixed import FixedDesign
from matrixrun.verify.policy import Pick, Policy
from matrixrun.verify.schedule import (
    Journal,
    Launch,
    Schedule,
    Unfinished,
    View,
    Work,
    first_pass,
    rounds_done,
)


def policy_for(spec: Spec, plan: Plan) -> Policy:
    """The verify policy the spec asks for: adaptive, or the fixed design."""
    return FixedDesign(spec, plan) if spec.verify.design == "fixed" else Policy(spec, plan)


__all__ = [
    "FUTILITY",
    "MIN_FRESH_DF",
    "FixedDesign",
    "Journal",
    "Launch",
    "Pick",
    "Policy",
    "Schedule",
    "Unfinished",
    "View",
    "Work",
    "decide_chance",
    "first_pass",
    "policy_for",
    "rounds_done",
]

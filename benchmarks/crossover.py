"""Score crossover bisection (`verify.bisect`) on the verify benchmark's simulated worlds.

Why: bisection spends GPU time on cells the spec did not ask for; what it buys must be
measured, not assumed. The worlds, the simulated lab and the policy are `verdicts.py`'s (the
true effect is linear in ln x along the grid, so a midpoint has a known true effect too); the
same matrices and the same noise stream are run with `bisect: 0` and `bisect: 1`, and every
crossover the final verdict reports is scored against the truth:

- bracket width: x_hi / x_lo of the reported bracket (geometric mean over crossovers);
- bracket holds the truth: the true effect is zero somewhere in [x_lo, x_hi];
- interval holds the truth: the same for the printed model-conditional interval;
- cost: runs, launches and GPU time (12-min launch, 4-min cell), and grid cells decided
  correctly (so a gain at the crossover is not paid for elsewhere).

Two kinds of world: `verdicts` (the verify benchmark's own: effects linear along the grid
between two random ends, a quarter of the cells exact ties, so most brackets span undecided
points), and `crossing` (the same noise, but every candidate crosses zero between two
adjacent grid points, its effect a straight line in ln x with a slope of 5–30% per grid step:
the case bisection is for).

    python benchmarks/crossover.py --matrices 200 --seed 2 [--world crossing]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from verdicts import CELL_S, LAUNCH_S, MARGIN, Lab, World, draw_world, spec_for  # noqa: E402

from matrixrun.analysis import analyse  # noqa: E402
from matrixrun.plan import expand  # noqa: E402
from matrixrun.verify import Policy  # noqa: E402

VERIFY = "{{threshold: 3%, surprise: 10%, max_runs: {max_runs}, bisect: {bisect}}}"


def crossing_world(world: World, points: list[int], rng: np.random.Generator) -> None:
    """Make every candidate cross zero between two adjacent grid points (in place)."""
    for arm in world.effect:
        if arm == "base":
            continue
        k = int(rng.integers(0, len(points) - 1))
        at = k + float(rng.uniform(0.15, 0.85))
        slope = float(rng.uniform(0.05, 0.30)) * (1 if rng.random() < 0.5 else -1)
        world.effect[arm] = {
            x: float(np.clip(slope * (i - at), -0.6, 0.6)) for i, x in enumerate(points)
        }


def zero_in(world: World, arm: str, lo: float, hi: float) -> bool:
    """Whether the true effect of `arm` is zero somewhere in [lo, hi]: it is piecewise
    linear in ln x, so checking the ends and the grid points between them is enough."""
    xs = [lo, *(x for x in sorted(world.effect[arm]) if lo < x < hi), hi]
    values = [world.effect_at(arm, x) for x in xs]
    return any(v == 0.0 for v in values) or any(a * b < 0 for a, b in itertools.pairwise(values))


@dataclass
class Tally:
    crossovers: int = 0
    log_width: float = 0.0
    in_bracket: int = 0
    with_interval: int = 0
    log_interval: float = 0.0
    in_interval: int = 0
    added: int = 0
    added_confident: int = 0
    runs: int = 0
    launches: int = 0
    grid_cells: int = 0
    grid_correct: int = 0
    seconds: float = 0.0
    #: (matrix, candidate) -> the brackets reported, for the paired comparison
    brackets: dict[tuple[int, str], list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def gpu_s(self) -> float:
        return self.launches * LAUNCH_S + self.runs * CELL_S


def run_one(
    world: World, points: list[int], cands: list[str], verify: str, t: Tally, key: int
) -> None:
    spec = spec_for(points, cands, verify)
    plan = expand(spec)
    grid = {c.point_id for c in plan.cells()}
    lab = Lab(world)
    policy = Policy(spec, plan)
    lab.run_policy(policy)
    verdict = analyse(lab.ms, policy.settings)
    primary = policy.settings.primary
    for _, cand, cell in verdict.comparisons(primary):
        assert cell.x is not None
        if cell.point_id in grid:
            truth = world.effect_at(cand, cell.x)
            want = "same" if abs(truth) <= MARGIN else "better" if truth > 0 else "worse"
            t.grid_cells += 1
            t.grid_correct += cell.verdict == want
        else:
            t.added += 1
            t.added_confident += cell.confident
    for sl in verdict.slices:
        for cr in sl.candidates:
            metric = next(m for m in cr.metrics if m.metric == primary)
            for series in metric.series:
                for c in series.crossovers:
                    t.crossovers += 1
                    t.log_width += math.log(c.x_hi / c.x_lo)
                    t.brackets.setdefault((key, cr.candidate), []).append((c.x_lo, c.x_hi))
                    t.in_bracket += zero_in(world, cr.candidate, c.x_lo, c.x_hi)
                    if c.estimate_lo is not None and c.estimate_hi is not None:
                        t.with_interval += 1
                        t.log_interval += math.log(c.estimate_hi / c.estimate_lo)
                        t.in_interval += zero_in(world, cr.candidate, c.estimate_lo, c.estimate_hi)
    t.runs += len(lab.ms)
    t.launches += lab.launches


def score(
    matrices: int, seed: int, max_runs: int, settings: list[int], kind: str = "verdicts"
) -> dict[int, Tally]:
    out = {b: Tally() for b in settings}
    for i in range(matrices):
        for b in settings:
            world, points, cands = draw_world(np.random.default_rng([seed, i]))
            if kind == "crossing":
                crossing_world(world, points, np.random.default_rng([seed, i, 77]))
            world.rng = np.random.default_rng([seed, i, 4])  # the same noise for each setting
            t0 = time.perf_counter()
            run_one(world, points, cands, VERIFY.format(max_runs=max_runs, bisect=b), out[b], i)
            out[b].seconds += time.perf_counter() - t0
    return out


def pct(a: float, b: float) -> str:
    return f"{100 * a / b:.1f}%" if b else "—"


def table(scores: dict[int, Tally]) -> str:
    ref = scores[min(scores)]
    lines = [
        "| `bisect` | crossovers reported | bracket width x_hi/x_lo (geometric mean) | "
        "truth inside the bracket | interval width (geometric mean) | truth inside the "
        "interval | midpoints measured (confident) | grid cells decided correctly | runs | "
        "launches | GPU time |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b, t in scores.items():
        width = math.exp(t.log_width / t.crossovers) if t.crossovers else float("nan")
        iw = math.exp(t.log_interval / t.with_interval) if t.with_interval else float("nan")
        lines.append(
            f"| {b} | {t.crossovers} | {width:.2f}× | {pct(t.in_bracket, t.crossovers)} | "
            f"{iw:.2f}× ({t.with_interval} with one) | {pct(t.in_interval, t.with_interval)} | "
            f"{t.added} ({pct(t.added_confident, t.added)}) | "
            f"{pct(t.grid_correct, t.grid_cells)} | {t.runs} | {t.launches} | "
            f"{t.gpu_s / 3600:.0f} h ({pct(t.gpu_s, ref.gpu_s)}) |"
        )
    return "\n".join(lines)


def paired(scores: dict[int, Tally]) -> str:
    """Series that report one crossover under both the first setting and each other one:
    how often the bracket narrowed, stayed or widened (same matrix, same noise)."""
    ref = scores[min(scores)]
    lines = []
    for b, t in scores.items():
        if b == min(scores):
            continue
        both = [
            (ref.brackets[k][0], t.brackets[k][0])
            for k in ref.brackets.keys() & t.brackets.keys()
            if len(ref.brackets[k]) == 1 and len(t.brackets[k]) == 1
        ]
        narrower = sum(1 for r, n in both if n[1] / n[0] < r[1] / r[0])
        wider = sum(1 for r, n in both if n[1] / n[0] > r[1] / r[0])
        only_ref = len(ref.brackets.keys() - t.brackets.keys())
        only_new = len(t.brackets.keys() - ref.brackets.keys())
        lines.append(
            f"- `bisect: {b}` against `bisect: {min(scores)}`, series with one crossover in "
            f"both: {len(both)}; the bracket narrowed in {narrower}, widened in {wider}, "
            f"stayed in {len(both) - narrower - wider}; a crossover reported only without "
            f"bisection in {only_ref} series, only with it in {only_new}."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrices", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--max-runs", type=int, default=3)
    ap.add_argument("--bisect", type=int, action="append", help="settings (default 0 and 1)")
    ap.add_argument("--world", choices=["verdicts", "crossing"], default="verdicts")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    scores = score(args.matrices, args.seed, args.max_runs, args.bisect or [0, 1], args.world)
    print(
        f"{args.world} worlds, {args.matrices} matrices, seed {args.seed}, "
        f"max_runs {args.max_runs}, "
        f"{time.perf_counter() - t0:.0f} s\n"
    )
    print(table(scores))
    print()
    print(paired(scores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How high issue 32's power gate can be reached at all, world by world: the share of the
large cells within the plan's best case (`verdicts13.best_case`) that a procedure deciding
each cell from the plan's full `MAX_RUNS` runs per arm, each on its own launch, would decide
correctly — first with the world's true noise known (the *oracle*: a normal quantile, only
the observed change random), then with the noise estimated on df degrees of freedom (the
estimate's own chance spread, σ̂² ~ σ²·χ²_df/df, and Student's t at that df).

Why this exists: `best_case` admits a cell when the *true* change clears the margin by
z·se, so a cell near that edge is decided about half the time even by the oracle, and the
gate's 90% is a bar on the whole band, not on a policy's skill alone. Where the oracle itself
sits near 90%, no procedure that has to estimate its noise reaches the bar; where it sits
well above, the df a policy must give its cells (from its own runs and a prior) to reach it
are the df row below. No server, no policy: the worlds' draws only (the same seeds, the same
cells as `verdicts13.py` scores), numpy and scipy.

The second table is issue 46's gate: within the cells that best case decides with at
least 90% chance, the share decided at each df, and the least df for 95%.

    python benchmarks/power_ceiling.py --matrices 1000 --seed 7
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verdicts import MARGIN
from verdicts13 import MAX_RUNS, POWERED, WORLDS, best_case, draw

#: The last state's level of the scored policy (`settings.level_at(settings.states)` for
#: verdicts13's POLICY): the level `best_case` and the policy's last look are judged at.
LEVEL = 0.9817906567189614
DFS = (2, 4, 8, 15, 30, 60)
BAR = 0.90
#: Issue 46's gate: within the cells that best case decides with ≥ `POWERED` chance, ≥ 95%.
BAR_46 = 0.95
DFS_46 = (4, 8, 12, 16, 30)


def cells_of(
    world: str, matrices: int, seed: int, power: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """|ln(1 + effect)| and the true standard error of d at max_runs per arm, each run on
    its own launch, of every cell with |effect| ≥ 2m inside the best case (`power`: the
    cells that best case decides with at least that chance)."""
    d, se = [], []
    for i in range(matrices):
        w, points, cands = draw(world, np.random.default_rng([seed, i]))
        for cand in cands:
            for x in points:
                e = w.effect[cand][x]
                if abs(e) < 2 * MARGIN - 1e-12 or not best_case(w, e, x, LEVEL, power):
                    continue
                sw = w.sigma_w_at.get(x, w.sigma_w)
                d.append(abs(math.log1p(e)))
                se.append(math.sqrt(2 * (w.sigma_b**2 + sw**2) / MAX_RUNS))
    return np.array(d), np.array(se)


def oracle(d: np.ndarray, se: np.ndarray) -> float:
    """Decided in the right direction with σ known: P(d̂ − ln(1+m) ≥ z·se), d̂ ~ N(d, se²)
    (the wrong direction needs d̂ below −ln(1+m) − z·se: negligible for |d| ≥ 2m, counted
    as a miss)."""
    z = float(stats.norm.ppf((1 + LEVEL) / 2))
    m = math.log1p(MARGIN)
    return float(np.mean(stats.norm.sf((m + z * se - d) / se)))


def with_df(
    d: np.ndarray, se: np.ndarray, df: float, draws: int, rng: np.random.Generator
) -> float:
    """The same with σ estimated on `df` df: d̂ − ln(1+m) ≥ t_df · ŝe, ŝe = se·√(χ²_df/df)."""
    t = float(stats.t.ppf((1 + LEVEL) / 2, df))
    m = math.log1p(MARGIN)
    hits = 0.0
    for _ in range(draws):
        d_hat = d + rng.normal(0.0, se)
        se_hat = se * np.sqrt(rng.chisquare(df, size=len(se)) / df)
        hits += float(np.mean(d_hat - m >= t * se_hat))
    return hits / draws


def least_df(d: np.ndarray, se: np.ndarray, draws: int, seed: int, bar: float = BAR) -> str:
    """The least df (bisected on a log scale, 1–1000) at which `bar` is reached, or never."""
    if oracle(d, se) < bar:
        return "never (the oracle is below the bar)"
    lo, hi = 1.0, 1000.0
    if with_df(d, se, hi, draws, np.random.default_rng(seed)) < bar:
        return "> 1000"
    for _ in range(12):
        mid = math.sqrt(lo * hi)
        if with_df(d, se, mid, draws, np.random.default_rng(seed)) >= bar:
            hi = mid
        else:
            lo = mid
    return f"{hi:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrices", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--draws", type=int, default=200, help="Monte Carlo draws per df")
    args = ap.parse_args()
    head = " | ".join(f"df {df}" for df in DFS)
    band = f"decided with ≥ {POWERED:.0%} chance: cells, oracle, least df"
    print(f"| world | cells | oracle | {head} | least df for {BAR:.0%} | {band} |")
    print("|---|---:|---:|" + "---:|" * len(DFS) + "---:|---:|")
    for world in WORLDS:
        d, se = cells_of(world, args.matrices, args.seed)
        rng = np.random.default_rng([args.seed, 1])
        by_df = " | ".join(f"{100 * with_df(d, se, df, args.draws, rng):.1f}%" for df in DFS)
        need = least_df(d, se, args.draws, args.seed)
        dp, sp = cells_of(world, args.matrices, args.seed, POWERED)
        powered = (
            f"{len(dp)}, {100 * oracle(dp, sp):.1f}%, {least_df(dp, sp, args.draws, args.seed)}"
        )
        print(f"| {world} | {len(d)} | {100 * oracle(d, se):.1f}% | {by_df} | {need} | {powered} |")
    # issue 46's gate: the powered band, 95%
    head = " | ".join(f"df {df}" for df in DFS_46)
    print(f"\n| world | cells decided with ≥ {POWERED:.0%} chance | oracle | {head} |"
          f" least df for {BAR_46:.0%} |")  # fmt: skip
    print("|---|---:|---:|" + "---:|" * len(DFS_46) + "---:|")
    for world in WORLDS:
        dp, sp = cells_of(world, args.matrices, args.seed, POWERED)
        rng = np.random.default_rng([args.seed, 2])
        by_df = " | ".join(f"{100 * with_df(dp, sp, df, args.draws, rng):.1f}%" for df in DFS_46)
        need = least_df(dp, sp, args.draws, args.seed, BAR_46)
        print(f"| {world} | {len(dp)} | {100 * oracle(dp, sp):.1f}% | {by_df} | {need} |")


if __name__ == "__main__":
    main()

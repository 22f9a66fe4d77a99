"""Issue 46's gate on the verify policy alone, fast, with the cells it misses
(docs/benchmarks.md, "Where `h200`'s power goes").

`verdicts13.py` scores the policy *and* the fixed reference it is matched against, with
bootstrap intervals: the numbers docs/benchmarks.md reports. This script runs the policy only
(same worlds, same matrices, same seeds: `verdicts13.draw`, `NoisyLab`), so a change to the
analysis or the policy can be tried on a tuning seed in a minute or two, and lists every large
cell it leaves undecided and every error at ±m or on a tie, with what the oracle of
`verdicts13.best_case` would have had:

- the gate: cells with |effect| ≥ 2m that the plan's best case decides with ≥ 90% chance
  (`best_case(power=POWERED)`), decided correctly;
- the calibration counts per concurrency band: better/worse on exact ties (≤ 1%), the wrong
  direction at exactly ±m (≤ 3% each side);
- per miss: the runs per arm, d and its interval, the cell's se against the oracle's (3 runs per
  arm, each on its own launch, the world's true σ), the cell's df, and its notes.

Earlier sessions kept this kind of scorer outside the repository and lost it with the
checkout; it lives here now.

    python benchmarks/power46.py --world h200 --seed 4 --matrices 200 --calibration 3
    python benchmarks/power46.py --world h200 --seed 5 --matrices 300 --calibration 3 --misses
    python benchmarks/power46.py --world h200 --seed 4 --matrices 300 --calibration 3 \
        --what-if sigma-known     # the policy handed the world's true σ (or σ_w only)
    python benchmarks/power46.py --world h200 --seed 4 --matrices 300 --calibration 10 \
        --confidence 0.99         # the spec at 99%, a 10-launch calibration run
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import verdicts13 as v13
from verdicts import MARGIN

from matrixrun.analysis import analyse

BANDS = ("1–4", "16–64", "256–1024")


@dataclass(frozen=True)
class Row:
    """One grid cell of one matrix as the policy left it."""

    matrix: int
    cand: str
    x: int
    effect: float
    verdict: str
    powered: bool
    n: tuple[int, int]
    d: float | None
    lo: float | None
    hi: float | None
    se: float | None
    oracle_se: float
    df: float | None
    notes: tuple[str, ...]

    @property
    def want(self) -> str:
        if abs(self.effect) <= MARGIN:
            return "same"
        return "better" if self.effect > 0 else "worse"

    @property
    def at_margin(self) -> bool:
        return v13.band(self.effect) == "at ±m"


#: `--what-if sigma-known` / `sigma-w-known`: the world whose noise the analysis is handed
_TRUTH: list[v13.NoisyWorld] = []
WHAT_IFS = ("sigma-known", "sigma-w-known")


def _sigma_known(what: str) -> None:
    """`--what-if sigma-known`: the analysis's own noise estimate replaced by the world's true
    σ_b and σ_w at each point, on df that make them known (this process and its forked
    workers): what the policy's stopping and levels decide with no σ to estimate.
    `sigma-w-known`: only σ_w per point known, the launch part still estimated (and pooled)."""
    from verdicts import KNOWN_DF

    from matrixrun.analysis import noise
    from matrixrun.core.verdict import Sigma, SigmaAt

    real = noise.estimate_sigma

    def known(ms: Any, metric: str, prior: float | None = None, *rest: Any) -> Sigma:
        own = real(ms, metric, prior, *rest)
        if metric != "output_throughput" or not _TRUTH:
            return own
        w = _TRUTH[-1]
        by_x = [
            SigmaAt(x=float(x), run=w.sigma_w_at.get(x, w.sigma_w), run_df=float(KNOWN_DF))
            for x in sorted(w.effect["base"])
        ]
        update: dict[str, Any] = {"run": w.sigma_w, "run_df": float(KNOWN_DF), "by_x": by_x}
        if what == "sigma-known":
            update |= {
                "launch": w.sigma_b, "launch_df": KNOWN_DF, "launch_var_sd": None, "df": None,
                "value": math.hypot(w.sigma_w, w.sigma_b), "odd_groups": [],
            }  # fmt: skip
        return own.model_copy(update=update)

    noise.estimate_sigma = known  # type: ignore[assignment]


def score_matrix(world_name: str, seed: int, i: int) -> tuple[list[Row], float]:
    """The policy on matrix i (`verdicts13.run_policy`), its cells and GPU time."""
    _TRUTH[:] = [v13.draw(world_name, np.random.default_rng([seed, i]))[0]]
    run = v13.run_policy(world_name, seed, i)
    world, settings = run.world, run.policy.settings
    level = settings.level_at(settings.states)
    rows = []
    for _, cand, cell in analyse(run.lab.ms, settings).comparisons(settings.primary):
        assert cell.x is not None
        x = int(cell.x)
        if x not in world.effect[cand]:
            continue
        eff = world.effect[cand][x]
        sw = world.sigma_w_at.get(x, world.sigma_w)
        rows.append(
            Row(
                matrix=i,
                cand=cand,
                x=x,
                effect=eff,
                verdict=cell.verdict.value,
                powered=v13.best_case(world, eff, x, level, v13.POWERED),
                n=(cell.baseline.n, cell.candidate.n),
                d=cell.d,
                lo=cell.d_lo,
                hi=cell.d_hi,
                se=cell.se,
                oracle_se=math.sqrt(2 * (world.sigma_b**2 + sw**2) / v13.MAX_RUNS),
                df=cell.df,
                notes=tuple(str(n.value) for n in cell.notes),
            )
        )
    return rows, run.gpu_s


def _f(z: float | None) -> str:
    return "—" if z is None else f"{z:+.3f}"


def miss_line(r: Row) -> str:
    se = "—" if r.se is None else f"{r.se:.3f}"
    df = "∞" if r.df is None else f"{r.df:.1f}"
    return (
        f"  matrix {r.matrix} {r.cand} at {r.x}: true {r.effect:+.1%}"
        f" (ln {math.log1p(r.effect):+.3f}),"
        f" {r.verdict} at {r.n[0]}/{r.n[1]}, d {_f(r.d)} [{_f(r.lo)}, {_f(r.hi)}],"
        f" se {se} (oracle {r.oracle_se:.3f}), df {df} {list(r.notes)}"
    )


def report(rows: list[Row], gpu: float, show_misses: bool) -> list[str]:
    out = []
    powered = [r for r in rows if abs(r.effect) >= 2 * MARGIN - 1e-12 and r.powered]
    ok = [r for r in powered if r.verdict == r.want]
    out.append(
        f"gate (large cells the best case decides with ≥ 90% chance, decided correctly): "
        f"{len(ok)}/{len(powered)} = {len(ok) / max(len(powered), 1):.1%}"
    )
    correct = [r for r in rows if r.verdict == r.want and not r.at_margin]
    out.append(
        f"decided correctly (all cells): {len(correct)}/{len(rows)}; GPU seconds per correct "
        f"verdict {gpu / max(len(correct), 1):,.0f}"
    )
    ties = [r for r in rows if r.effect == 0]
    line = [f"ties called better/worse: {sum(r.verdict in ('better', 'worse') for r in ties)}"]
    for band in BANDS:
        t = [r for r in ties if v13.conc_band(r.x) == band]
        a = sum(r.verdict in ("better", "worse") for r in t)
        line.append(f"{band} {a}/{len(t)} ({a / max(len(t), 1):.1%})")
    out.append(", ".join(line))
    for sign, word in ((1, "better at +m"), (-1, "worse at −m")):
        line = [f"{word}:"]
        for band in BANDS:
            g = [
                r
                for r in rows
                if r.at_margin and r.effect * sign > 0 and v13.conc_band(r.x) == band
            ]
            w = sum(r.verdict == ("better" if sign > 0 else "worse") for r in g)
            line.append(f"{band} {w}/{len(g)} ({w / max(len(g), 1):.1%})")
        out.append(" ".join(line))
    if show_misses:
        out.append("large cells missed:")
        out += [miss_line(r) for r in powered if r.verdict != r.want]
        out.append("ties and ±m cells called the wrong way:")
        out += [
            miss_line(r)
            for r in rows
            if (r.effect == 0 and r.verdict in ("better", "worse"))
            or (r.at_margin and r.verdict == ("better" if r.effect > 0 else "worse"))
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", choices=v13.WORLDS, default="h200")
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--matrices", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--calibration",
        type=int,
        help="an earlier calibration run (fixed design, this many launches per arm) as the prior",
    )
    ap.add_argument("--misses", action="store_true", help="list the cells missed and the errors")
    ap.add_argument(
        "--what-if",
        choices=WHAT_IFS,
        help="the analysis handed the world's true noise: measures what σ estimation costs",
    )
    ap.add_argument("--confidence", type=float, help="the policy's confidence (default 0.95)")
    args = ap.parse_args(argv)
    if args.confidence:
        v13.set_confidence(args.confidence)
    if args.what_if:
        _sigma_known(args.what_if)
    if args.calibration:
        v13.HISTORY[:] = [True]
        v13.CALIBRATION[:] = [args.calibration]
    t0 = time.perf_counter()
    n = args.matrices
    if args.jobs <= 1:
        got = [score_matrix(args.world, args.seed, i) for i in range(n)]
    else:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
            got = list(
                pool.map(score_matrix, [args.world] * n, [args.seed] * n, range(n), chunksize=4)
            )
    rows = [r for rs, _ in got for r in rs]
    gpu = sum(g for _, g in got)
    prior = f"calibration prior ({args.calibration} launches)" if args.calibration else "no prior"
    prior += f", confidence {args.confidence:g}" if args.confidence else ""
    print(
        f"{args.world}, seed {args.seed}, {n} matrices, {prior}: {time.perf_counter() - t0:.0f} s"
    )
    print("\n".join(report(rows, gpu, args.misses)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

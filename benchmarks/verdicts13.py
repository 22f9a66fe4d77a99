"""Issue 13's scoring: the verify policy in four noise worlds, by |effect| band and
concurrency band, with cluster-bootstrap intervals, the calibration gate and the efficiency
target at matched error (docs/benchmarks.md, "Noise worlds").

Worlds (drawn per matrix, seeded; effects as in `verdicts.draw_world` but a fifth of the cells
at exactly ±margin, so the gate can be measured there):

- ``today``: run noise σ_w 1–8%, launch spread σ_b = σ_w·U(0, 1) (the older benchmark's);
- ``launch``: launch-dominant, σ_b 1–4%, σ_w 0.1–0.5%;
- ``hetero``: σ_w 1–8% scaled from ×0.25 at concurrency 1 to ×3 at 1024 (log-linear),
  σ_b = 1%·U(0, 1);
- ``h200``: fitted to shared/data (one H200, transformers serve, 3 launches): σ_w by
  concurrency 12%, 9%, 9%, 6%, 4%, 4% at 1, 4, 16, 64, 256, 1024 (the within-launch spread of
  its second passes, interpolated), σ_b 3%, and a first pass on a new server 30–70% slower at
  concurrency 4 and 16 for every arm (its +36%/+109% warm-up at new batch shapes; on the
  lent H200, `benchmarks/gpu/warmup.sh`, a warm-up of one wave at the cell's own
  concurrency and lengths does not remove it, an unmeasured copy of the cell —
  `warmup_requests: cell` — removes most of it: docs/benchmarks.md).

Calibration gate (issue 13), every world and concurrency band: at true effect exactly ±margin
the wrong verdicts — better at +m, worse at −m, same at either — ≤ 3% each; on exact ties
better/worse ≤ 1%. Efficiency at matched error: against fixed 3 runs per cell on one server
with its confidence raised until its wrong-decisive and tie false-alarm shares are at or below
the policy's, the policy decides ≥ 2.0 points more cells correctly at ≤ 0.75× its GPU time
per correct verdict (launches counted). Power gate (issue 32): cells with |effect| ≥ 2m that
the plan could decide at its best (`best_case`) decided correctly at ≥ 90%.

    python benchmarks/verdicts13.py --matrices 200 --seed 2      # tuning seed
    python benchmarks/verdicts13.py --matrices 1000 --seed 7 --write docs/benchmarks.md
    python benchmarks/verdicts13.py --matrices 1000 --seed 7 --history   # verify.noise_from
    python benchmarks/verdicts13.py --matrices 1000 --seed 7 --history --calibration 3
    python benchmarks/verdicts13.py --matrices 400 --seed 7 --history --calibration 10 \
        --confidence 0.99 --world h200    # the owner's option (b), docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import re
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verdicts import (
    CELL_S,
    CONCURRENCY,
    LAUNCH_S,
    MARGIN,
    Lab,
    World,
    spec_for,
)

from matrixrun.analysis import analyse
from matrixrun.core.measurement import Measurement, Reason
from matrixrun.core.verdict import Sigma
from matrixrun.plan import Cell, expand
from matrixrun.rundir.settings import analysis_settings
from matrixrun.verify import Policy, policy_for

WORLDS = ("today", "launch", "hetero", "h200")
H200_SIGMA_W = {1: 0.12, 4: 0.09, 16: 0.09, 64: 0.06, 256: 0.04, 1024: 0.04}
POLICY = "{threshold: 3%, surprise: 10%, max_runs: 3}"
MAX_RUNS = 3  # the policy's max_runs: what `best_case` assumes
#: The chance at which `best_case(power=…)` counts a cell as one the best case decides
#: reliably (the second power line: a band a power calculation would plan for).
POWERED = 0.9
#: Confidence levels the reference is tried at, to match the policy's error rates.
REF_LEVELS = (0.95, 0.98, 0.99, 0.995, 0.999, 0.9999)
BANDS = ("tie", "below m", "at ±m", "m–2m", "2m–5m", "> 5m")
#: `--history`: the policy pools in the noise of an earlier run of the same matrix
#: (`verify.noise_from`): that run is the same world measured again with its own noise, by the
#: same policy; its GPU time is not counted (it was spent on another day, for its own answer).
HISTORY: list[bool] = []
#: `--calibration L` (with `--history`): the earlier run is a calibration run, `verify.design:
#: fixed` with max_runs L (every cell L times, each on its own launch), whose launch variance
#: the scored run pools too; its GPU time is not counted either (once per engine and node kind).
CALIBRATION: list[int] = []
CONC_BANDS = {"1–4": (1, 4), "16–64": (16, 64), "256–1024": (256, 1024)}


def set_confidence(level: float) -> None:
    """`--confidence`: the policy's spec at another confidence than its default 95% (the
    plan's best case, and so the gate's band, are judged at it too)."""
    global POLICY
    POLICY = POLICY.removesuffix("}") + f", confidence: {level:g}}}"


@dataclass
class NoisyWorld(World):
    """`verdicts.World` with run noise per concurrency and a warm-up on every arm."""

    sigma_w_at: dict[int, float] = field(default_factory=dict)
    warmup_at: dict[int, float] = field(default_factory=dict)


class NoisyLab(Lab):
    def measure(self, group, inst, cell, reason):  # type: ignore[no-untyped-def]
        w = self.world
        assert isinstance(w, NoisyWorld)
        x = int(cell.point["concurrency"])
        saved = w.sigma_w
        w.sigma_w = w.sigma_w_at.get(x, saved)
        cold = cell.cell_id not in inst.seen
        super().measure(group, inst, cell, reason)
        w.sigma_w = saved
        if cold and x in w.warmup_at:
            m = self.ms[-1]
            assert m.metrics is not None
            slow = m.metrics.model_copy(
                update={"output_throughput": m.metrics.output_throughput * (1 - w.warmup_at[x])}
            )
            self.ms[-1] = m.model_copy(update={"metrics": slow})


def draw(world: str, rng: np.random.Generator) -> tuple[NoisyWorld, list[int], list[str]]:
    points = CONCURRENCY[: int(rng.integers(3, 7))]
    candidates = ["cand_a"] if rng.random() < 0.7 else ["cand_a", "cand_b"]
    effect: dict[str, dict[int, float]] = {"base": dict.fromkeys(points, 0.0)}
    for cand in candidates:
        lo, hi = rng.uniform(-0.6, 0.6, size=2)
        row = {}
        for i, x in enumerate(points):
            u = rng.random()
            if u < 0.25:
                row[x] = 0.0
            elif u < 0.45:
                row[x] = MARGIN if rng.random() < 0.5 else -MARGIN
            else:
                row[x] = float(lo + (hi - lo) * i / (len(points) - 1))
        effect[cand] = row
    sw_at: dict[int, float] = {}
    warm: dict[int, float] = {}
    if world == "today":
        sw = float(rng.uniform(0.01, 0.08))
        sb = sw * float(rng.uniform(0, 1))
    elif world == "launch":
        sw = float(rng.uniform(0.001, 0.005))
        sb = float(rng.uniform(0.01, 0.04))
    elif world == "hetero":
        sw = float(rng.uniform(0.01, 0.08))
        sb = 0.01 * float(rng.uniform(0, 1))
        for x in points:
            t = math.log(x) / math.log(1024)
            sw_at[x] = sw * math.exp(math.log(0.25) + t * (math.log(3) - math.log(0.25)))
    else:
        sw, sb = 0.06, 0.03
        sw_at = {x: H200_SIGMA_W[x] for x in points}
        warm = {x: float(rng.uniform(0.3, 0.7)) for x in (4, 16) if x in points}
    w = NoisyWorld(effect, sw, sb, None, 0.0, rng, sigma_w_at=sw_at, warmup_at=warm)
    return w, points, candidates


def band(effect: float) -> str:
    a = abs(effect)
    if a == 0:
        return "tie"
    if math.isclose(a, MARGIN):
        return "at ±m"
    if a < MARGIN:
        return "below m"
    if a <= 2 * MARGIN:
        return "m–2m"
    return "2m–5m" if a <= 5 * MARGIN else "> 5m"


def conc_band(x: float) -> str:
    return next(k for k, (lo, hi) in CONC_BANDS.items() if lo <= x <= hi)


@dataclass
class Tally:
    """Counts of one strategy on one matrix (the bootstrap's unit)."""

    cells: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # → [n, correct]
    gate: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # → [n, wrong-dir, same]
    ties: dict[str, list[int]] = field(default_factory=dict)  # conc band → [n, alarms]
    n: int = 0
    correct: int = 0
    wrong: int = 0
    tie_n: int = 0
    tie_alarm: int = 0
    gpu_s: float = 0.0
    #: cells with |effect| ≥ 2m: [n, correct]; and those within the plan's best case
    #: (`best_case`): [n, correct]
    large: list[int] = field(default_factory=lambda: [0, 0])
    large_best: list[int] = field(default_factory=lambda: [0, 0])
    #: those the best case decides with ≥ `POWERED` chance (`best_case(power=POWERED)`)
    large_powered: list[int] = field(default_factory=lambda: [0, 0])
    #: GPU time of the earlier run `--history` borrowed from (not in `gpu_s`: another day's)
    prior_s: float = 0.0


def tally(verdicts: Iterable[tuple[float, float, str, bool, bool]], gpu_s: float) -> Tally:
    t = Tally(gpu_s=gpu_s)
    for true, x, v, best, powered in verdicts:
        b, cb = band(true), conc_band(x)
        want = "same" if abs(true) <= MARGIN else "better" if true > 0 else "worse"
        ok = v == want and b != "at ±m"
        t.n += 1
        t.correct += ok
        t.wrong += v != "undecided" and v != want and b != "at ±m"
        row = t.cells.setdefault((b, cb), [0, 0])
        row[0] += 1
        row[1] += ok
        if abs(true) >= 2 * MARGIN - 1e-12:
            t.large[0] += 1
            t.large[1] += ok
            if best:
                t.large_best[0] += 1
                t.large_best[1] += ok
            if powered:
                t.large_powered[0] += 1
                t.large_powered[1] += ok
        if b == "at ±m":
            g = t.gate.setdefault(("+m" if true > 0 else "−m", cb), [0, 0, 0])
            g[0] += 1
            g[1] += v == ("better" if true > 0 else "worse")
            g[2] += v == "same"
        if b == "tie":
            tr = t.ties.setdefault(cb, [0, 0])
            tr[0] += 1
            tr[1] += v in ("better", "worse")
            t.tie_n += 1
            t.tie_alarm += v in ("better", "worse")
    return t


def best_case(world: World, effect: float, x: int, level: float, power: float = 0.5) -> bool:
    """Whether the plan could decide this cell at its best: `MAX_RUNS` runs per arm, each on
    its own launch, judged at the last state's `level` with the world's true noise known
    (normal quantile) and the observed change equal to the truth. A cell outside it is one
    no run of this plan decides but by luck; the power gate counts the cells inside it.

    `power` above 0.5: the cell is decided with at least that chance by that best case (its
    true change clears the margin by (z + Φ⁻¹(power))·se, the textbook power calculation)
    — at 0.5, the edge of the default, even the best case decides a cell half the time."""
    sw = world.sigma_w_at.get(x, world.sigma_w) if isinstance(world, NoisyWorld) else world.sigma_w
    se = math.sqrt(2 * (world.sigma_b**2 + sw**2) / MAX_RUNS)
    z = float(stats.norm.ppf((1 + level) / 2)) + float(stats.norm.ppf(power))
    return abs(math.log1p(effect)) - math.log1p(MARGIN) >= z * se


def verdicts_of(  # type: ignore[no-untyped-def]
    ms: list[Measurement], settings, world: World
) -> list[tuple[float, float, str, bool, bool]]:
    """(true effect, x, verdict, within the best case, decided there with ≥ `POWERED`
    chance) of every grid cell. Cells bisection
    added are not scored (the reference has none; their GPU time is counted), so both
    strategies are judged on the same cells."""
    out = []
    level = settings.level_at(settings.states)
    for _, cand, cell in analyse(ms, settings).comparisons(settings.primary):
        assert cell.x is not None
        if int(cell.x) not in world.effect[cand]:
            continue
        eff = world.effect[cand][int(cell.x)]
        best = best_case(world, eff, int(cell.x), level)
        powered = best_case(world, eff, int(cell.x), level, POWERED)
        out.append((eff, cell.x, cell.verdict.value, best, powered))
    return out


@dataclass
class PolicyRun:
    """The scored policy on one matrix: its world, what it measured, its settings (the earlier
    run's noise pooled in under `--history`) and that earlier run's GPU time."""

    world: NoisyWorld
    lab: NoisyLab
    policy: Policy
    prior_s: float

    @property
    def gpu_s(self) -> float:
        return self.lab.launches * LAUNCH_S + len(self.lab.ms) * CELL_S


def run_policy(world_name: str, seed: int, i: int) -> PolicyRun:
    """The policy on matrix i (also `power46.py`'s, which scores it alone)."""
    world, points, cands = draw(world_name, np.random.default_rng([seed, i]))
    spec = spec_for(points, cands, POLICY)
    plan = expand(spec)
    world.rng = np.random.default_rng([seed, i, 4])
    lab = NoisyLab(world)
    policy = Policy(spec, plan)
    prior_s = 0.0
    if HISTORY:
        earlier, prior_s = _earlier_noise(world_name, seed, i)
        policy.settings = policy.settings.model_copy(
            update={"noise_history": earlier, "noise_from": "earlier"}
        )
    lab.run_policy(policy)
    return PolicyRun(world, lab, policy, prior_s)


def run_matrix(world_name: str, seed: int, i: int) -> tuple[Tally, dict[float, Tally]]:
    """The policy, and the one-server fixed-3 reference at each of `REF_LEVELS`."""
    run = run_policy(world_name, seed, i)
    pol = tally(verdicts_of(run.lab.ms, run.policy.settings, run.world), run.gpu_s)
    pol.prior_s = run.prior_s
    world, points, cands = draw(world_name, np.random.default_rng([seed, i]))
    world.rng = np.random.default_rng([seed, i, 99])
    ref_spec = spec_for(points, cands, "{threshold: 3%, max_runs: 1}")
    ref_plan = expand(ref_spec)
    lab = NoisyLab(world)
    for g in ref_plan.groups:
        queue: list[tuple[Cell, Reason]] = [
            (c, "first" if k == 0 else "manual") for c in g.cells for k in range(3)
        ]
        lab.run_cells(g, queue)
    gpu = lab.launches * LAUNCH_S + len(lab.ms) * CELL_S
    base = analysis_settings(ref_spec, ref_plan)
    refs = {
        level: tally(verdicts_of(lab.ms, base.model_copy(update={"confidence": level}), world), gpu)
        for level in REF_LEVELS
    }
    return pol, refs


def _earlier_noise(world_name: str, seed: int, i: int) -> tuple[dict[str, Sigma], float]:
    """The noise an earlier run of matrix i found: the same world (same noise, same effects)
    measured by the same policy with noise drawn independently of the scored run's; with
    `--calibration L`, by a fixed design instead (every arm launched L times, every cell once
    on each launch: no stopping, so its launch variance is not selected by its own verdicts).
    Returns its σ records and the GPU time it took (reported, not charged)."""
    world, points, cands = draw(world_name, np.random.default_rng([seed, i]))
    world.rng = np.random.default_rng([seed, i, 7777])
    verify = f"{{design: fixed, max_runs: {CALIBRATION[0]}}}" if CALIBRATION else POLICY
    spec = spec_for(points, cands, verify)
    plan = expand(spec)
    lab = NoisyLab(world)
    policy = policy_for(spec, plan)
    lab.run_policy(policy)
    gpu = lab.launches * LAUNCH_S + len(lab.ms) * CELL_S
    return {s.metric: s for s in analyse(lab.ms, policy.settings).sigma}, gpu


def _sum(ts: list[Tally], idx: np.ndarray | None = None) -> Tally:
    pick = ts if idx is None else [ts[k] for k in idx]
    out = Tally()
    for t in pick:
        out.n += t.n
        out.correct += t.correct
        out.wrong += t.wrong
        out.tie_n += t.tie_n
        out.tie_alarm += t.tie_alarm
        out.gpu_s += t.gpu_s
        for k in (0, 1):
            out.large[k] += t.large[k]
            out.large_best[k] += t.large_best[k]
            out.large_powered[k] += t.large_powered[k]
        out.prior_s += t.prior_s
        for src, dst in ((t.cells, out.cells), (t.gate, out.gate), (t.ties, out.ties)):
            for k, v in src.items():
                row = dst.setdefault(k, [0] * len(v))  # type: ignore[arg-type]
                for j, c in enumerate(v):
                    row[j] += c
    return out


def _ci(values: list[float]) -> str:
    lo, hi = np.quantile(values, [0.025, 0.975])
    return f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def _prior_cost(p: Tally, per_r: float) -> str:
    """What the earlier run `--history` borrowed from cost, against the reference, and how
    many experiments must share it before the 0.75× target holds with it charged."""
    if not p.prior_s or not p.correct:
        return ""
    charged = (p.gpu_s + p.prior_s) / p.correct / per_r
    room = 0.75 * per_r * p.correct - p.gpu_s
    share = (
        f"; shared by k experiments it stays ≤ 0.75× from k ≥ {math.ceil(p.prior_s / room)}"
        if room > 0
        else "; no number of experiments sharing it brings the ratio to 0.75×"
    )
    return (
        f" The earlier run (not charged) cost {p.prior_s / p.gpu_s:.2f}× the policy's GPU "
        f"time; charged in full to this run the ratio would be {charged:.2f}×{share}."
    )


def report(world: str, pols: list[Tally], refs: list[dict[float, Tally]], boots: int) -> str:
    rng = np.random.default_rng(13)
    p = _sum(pols)
    n = len(pols)
    idxs = [rng.integers(0, n, n) for _ in range(boots)]
    lines = [f"### World `{world}` ({n} matrices, {p.n} candidate cells)", ""]
    # matched-error reference: the lowest confidence whose error rates are ≤ the policy's —
    # chosen again inside every bootstrap resample, since at error rates of a few events in
    # thousands of cells the matched level is itself decided by one or two events
    chosen, matched = _matched(p, [_sum([x[lv] for x in refs]) for lv in REF_LEVELS])
    p_wrong = p.wrong / max(p.n, 1)
    p_alarm = p.tie_alarm / max(p.tie_n, 1)
    r = _sum([x[chosen] for x in refs])
    gain = (p.correct / p.n - r.correct / r.n) * 100
    per_p = p.gpu_s / max(p.correct, 1)
    per_r = r.gpu_s / max(r.correct, 1)
    boot_gain = []
    boot_ratio = []
    boot_level: dict[float, int] = {}
    for idx in idxs:
        bp = _sum(pols, idx)
        level, _ = _matched(bp, [_sum([refs[k][lv] for k in idx]) for lv in REF_LEVELS])
        boot_level[level] = boot_level.get(level, 0) + 1
        br = _sum([refs[k][level] for k in idx])
        boot_gain.append(bp.correct / bp.n - br.correct / br.n)
        boot_ratio.append((bp.gpu_s / max(bp.correct, 1)) / (br.gpu_s / max(br.correct, 1)))
    spread = ", ".join(
        f"{100 * lv:g}% in {100 * c / len(idxs):.0f}%" for lv, c in sorted(boot_level.items())
    )
    lines += [
        f"Policy: {100 * p.correct / p.n:.1f}% decided correctly (cells at exactly ±m "
        f"excluded from 'correct': no verdict is right there), wrong-decisive "
        f"{100 * p_wrong:.2f}%, better/worse on ties {100 * p_alarm:.2f}%. Reference (fixed 3 "
        f"runs, one server) "
        + (
            f"matched at {100 * chosen:g}% confidence: "
            if matched
            else f"cannot be matched (its errors stay above the policy's even at "
            f"{100 * chosen:g}%, shown): "
        )
        + f"{100 * r.correct / r.n:.1f}% correct, wrong {100 * r.wrong / r.n:.2f}%, ties "
        f"{100 * r.tie_alarm / max(r.tie_n, 1):.2f}%. Gain {gain:+.1f} points "
        f"{_ci(boot_gain)}; GPU time per correct verdict {per_p / per_r:.2f}× "
        f"[{np.quantile(boot_ratio, 0.025):.2f}, {np.quantile(boot_ratio, 0.975):.2f}] "
        f"(target ≥ +2.0 points at ≤ 0.75×: "
        f"{'met' if matched and gain >= 2.0 and per_p / per_r <= 0.75 else 'not met'}"
        f"{'' if matched else ', no matched reference'}). Matched level across the "
        f"resamples: {spread}.{_prior_cost(p, per_r)}",
        "",
        "| |" + "|".join(f" {cb} " for cb in CONC_BANDS) + "|",
        "|---|" + "---:|" * len(CONC_BANDS),
    ]
    for b in BANDS:
        if b == "at ±m":
            continue
        row = [f"| correct, {b} "]
        for cb in CONC_BANDS:
            c = p.cells.get((b, cb), [0, 0])
            vals = [
                (s.cells.get((b, cb), [0, 0])[1] / max(s.cells.get((b, cb), [0, 0])[0], 1))
                for s in (_sum(pols, idx) for idx in idxs[: max(boots // 4, 20)])
            ]
            row.append(f" {pct(c[1], c[0])} {_ci(vals) if c[0] else ''} (n={c[0]}) ")
        lines.append("|".join(row) + "|")
    gate_ok = True
    sums = [_sum(pols, idx) for idx in idxs]
    for side in ("+m", "−m"):
        for j, what in ((1, "better" if side == "+m" else "worse"), (2, "same")):
            row = [f"| gate: {what} at {side} (≤ 3%) "]
            for cb in CONC_BANDS:
                g = p.gate.get((side, cb), [0, 0, 0])
                rate = g[j] / g[0] if g[0] else 0.0
                gate_ok = gate_ok and rate <= 0.03
                vals = [
                    b.gate.get((side, cb), [0, 0, 0])[j] / max(b.gate.get((side, cb), [1])[0], 1)
                    for b in sums
                ]
                row.append(f" {pct(g[j], g[0])} {_ci(vals) if g[0] else ''} (n={g[0]}) ")
            lines.append("|".join(row) + "|")
    row = ["| gate: better/worse on ties (≤ 1%) "]
    for cb in CONC_BANDS:
        tr = p.ties.get(cb, [0, 0])
        gate_ok = gate_ok and (tr[1] / tr[0] if tr[0] else 0.0) <= 0.01
        vals = [b.ties.get(cb, [0, 0])[1] / max(b.ties.get(cb, [1])[0], 1) for b in sums]
        row.append(f" {pct(tr[1], tr[0])} {_ci(vals) if tr[0] else ''} (n={tr[0]}) ")
    lines.append("|".join(row) + "|")
    power = p.large_best[1] / max(p.large_best[0], 1)
    pw = [b.large_best[1] / max(b.large_best[0], 1) for b in sums]
    powered = p.large_powered[1] / max(p.large_powered[0], 1)
    pp = [b.large_powered[1] / max(b.large_powered[0], 1) for b in sums]
    lines += [
        "",
        f"Calibration gate (point estimates against the bars): {'met' if gate_ok else 'not met'}.",
        f"Power gate (|effect| ≥ 2m decided correctly, ≥ 90% of the cells within the plan's "
        f"best case): {100 * power:.1f}% {_ci(pw)} of {p.large_best[0]} "
        f"({'met' if power >= 0.9 else 'not met'}); of all {p.large[0]} cells ≥ 2m "
        f"{pct(p.large[1], p.large[0])}.",
        f"The same within the cells that best case decides with ≥ {POWERED:.0%} chance (their "
        f"true change clears the margin by (z + {stats.norm.ppf(POWERED):.2f})·se; not the "
        f"issue's bar, the band a power calculation would plan for): {100 * powered:.1f}% "
        f"{_ci(pp)} of {p.large_powered[0]}.",
        "",
    ]
    return "\n".join(lines)


def _matched(p: Tally, refs: list[Tally]) -> tuple[float, bool]:
    """The lowest of `REF_LEVELS` at which the reference's wrong-decisive and tie false-alarm
    shares are both at or below the policy's (`refs` in the order of `REF_LEVELS`); the
    highest level, unmatched, when none is."""
    p_wrong = p.wrong / max(p.n, 1)
    p_alarm = p.tie_alarm / max(p.tie_n, 1)
    for level, r in zip(REF_LEVELS, refs, strict=True):
        if r.wrong / max(r.n, 1) <= p_wrong and r.tie_alarm / max(r.tie_n, 1) <= p_alarm:
            return level, True
    return REF_LEVELS[-1], False


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "—"


def _matrices(world: str, seed: int, n: int, jobs: int) -> list[tuple[Tally, dict[float, Tally]]]:
    """`run_matrix` for matrices 0..n−1, in `jobs` forked processes when > 1 (each matrix is
    seeded by its own index, so the results do not depend on the split)."""
    if jobs <= 1:
        return [run_matrix(world, seed, i) for i in range(n)]
    ctx = multiprocessing.get_context("fork")  # inherits the patched spending and the imports
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        return list(pool.map(run_matrix, [world] * n, [seed] * n, range(n), chunksize=8))


def use_power_spending() -> None:
    """`--spending power` (tuning only, never in the product): the information-fraction
    states spent by the Kim–DeMets function α·t² instead of O'Brien–Fleming's."""
    from matrixrun.core.verdict import AnalysisSettings

    def level_at(self: AnalysisSettings, look: int) -> float:
        total = 2 * self.looks
        if self.spending != "information" or self.looks == 1:
            return self.confidence if self.looks == 1 else 1 - (1 - self.confidence) / self.looks
        alpha = 1 - self.confidence
        k = min(max(look, 1), total - 1)
        t_k, t_prev = (k + 1) / total, k / total
        return 1 - alpha * (t_k * t_k - (t_prev * t_prev if k > 1 else 0.0))

    AnalysisSettings.level_at = level_at  # type: ignore[method-assign]


def _group_sequential() -> None:
    """`--what-if group-sequential`: patch `AnalysisSettings.level_at` (this process and its
    forked workers only) so each state's level is the exact group-sequential one."""
    from sequential import state_levels

    from matrixrun.core.verdict import AnalysisSettings

    real = AnalysisSettings.level_at

    def level_at(self: AnalysisSettings, look: int) -> float:
        if self.spending != "information" or self.looks == 1:
            return real(self, look)
        levels = state_levels(self.states, self.confidence)
        return levels[min(max(look, 1), len(levels)) - 1]

    AnalysisSettings.level_at = level_at  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrices", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--world", action="append", choices=WORLDS)
    ap.add_argument("--boots", type=int, default=400)
    ap.add_argument("--write", type=Path)
    ap.add_argument("--spending", choices=["information", "power"])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (results identical)")
    ap.add_argument(
        "--history",
        action="store_true",
        help="the policy pools in the noise of an earlier run of each matrix (verify.noise_from)",
    )
    ap.add_argument(
        "--what-if",
        choices=["group-sequential"],
        help="judge each state at exact Lan–DeMets levels (benchmarks/sequential.py), not the "
        "analysis's Bonferroni shares: measures the slack, is not a result",
    )
    ap.add_argument(
        "--calibration",
        type=int,
        help="with --history: the earlier run is a "
        "fixed design of this many launches per arm, its launch variance pooled",
    )
    ap.add_argument(
        "--gs-df", type=float, help="with --what-if group-sequential: only at df ≥ this"
    )
    ap.add_argument("--confidence", type=float, help="the policy's confidence (default 0.95)")
    args = ap.parse_args(argv)
    if args.confidence:
        set_confidence(args.confidence)
    if args.spending == "power":
        use_power_spending()
    if args.history:
        HISTORY[:] = [True]
    if args.calibration:
        CALIBRATION[:] = [args.calibration]
    if args.what_if == "group-sequential":
        _group_sequential()
    out = []
    t0 = time.perf_counter()
    for world in args.world or WORLDS:
        pols, refs = [], []
        for pt, rt in _matrices(world, args.seed, args.matrices, args.jobs):
            pols.append(pt)
            refs.append(rt)
        text = report(world, pols, refs, args.boots)
        print(text, flush=True)
        out.append(text)
    head = (
        f"`python benchmarks/verdicts13.py --matrices {args.matrices} --seed {args.seed}`: "
        f"{time.perf_counter() - t0:.0f} s, policy `{POLICY}`, intervals: 95% cluster "
        f"bootstrap over matrices ({args.boots} resamples)."
    )
    if args.write:
        section = "## Noise worlds (issue 13)\n\n" + head + "\n\n" + "\n".join(out)
        old = args.write.read_text()
        pattern = re.compile(r"## Noise worlds \(issue 13\)\n.*?(?=\n## |\Z)", re.S)
        new = pattern.sub(section, old) if pattern.search(old) else old.rstrip() + "\n\n" + section
        args.write.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The results store at scale: 10,000 runs, and how fast `matrixrun history` answers.

Why: the store is meant to hold every run a team or a fleet makes; `history` and the
automatic noise prior (`verify.noise_from: auto`, asked at every run's start) must stay
quick as it fills. A timed unit test would prove nothing about a full store, so this fills
one and times the questions (docs/benchmarks.md records the numbers).

The runs are one real H200 run directory (reports/runs/h200_transformers_cb-7: 10
measurements with every metric, 4 judged cells, its σ records) recorded again under 10,000
names, spread over 3 engine kinds, 20 engine versions, 2 GPUs and 50 experiments whose
candidate arms have their own names and flags; every run's baseline is named `baseline`
(the worst case for `--arm baseline`: every run matches). Values are scaled per version so
the version table and the check have something to find.

Timed (best of 5, each a fresh connection, in this process; and the whole CLI, best of 5, as a
subprocess, Python start included; benchmarks/cli_startup.py times it under /usr/bin/time):
- `history` (the newest 20 runs), `history --engine sglang --gpu H200 --flag …`,
- `history --arm cand7` (1/50 of runs) and `--arm baseline` (all of them) with the version
  table, chart and `--check`,
- `history --spec` (has it been measured before),
- the automatic prior's lookup for a spec (`store.prior.auto_history`).

    python benchmarks/store.py                                   # SQLite under /tmp
    python benchmarks/store.py --store postgresql://…/db         # PostgreSQL
    python benchmarks/store.py --runs 1000                       # a smaller store
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from sqlalchemy import text

from matrixrun.cli.main import main
from matrixrun.store.db import Store, shown
from matrixrun.store.extract import ArmRow, MeasurementRow, RunRecord, extract
from matrixrun.store.schema import canonical

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "reports" / "runs" / "h200_transformers_cb-7"
ENGINES = ["sglang", "vllm", "command"]
GPUS = ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]


def synthetic(base: RunRecord, i: int) -> RunRecord:
    """Run i: the real run's rows under another name, engine, version, GPU and experiment."""
    engine = ENGINES[i % 3]
    version = f"{engine} 0.{i % 20 // 2}.{i % 2}"
    exp = i % 50
    scale = 1.0 - 0.01 * (i % 20)
    gpu = GPUS[i // 3 % 2]
    cand = f"cand{exp}"
    arms = [
        ArmRow("baseline", True, f"/models/m{exp % 5}", gpu, 1, version, canonical({}), None),
        ArmRow(
            cand,
            False,
            f"/models/m{exp % 5}",
            gpu,
            1,
            version,
            canonical({f"flag_{exp}": True}),
            "better",
        ),
    ]
    names = {base.arms[0].arm: "baseline", base.arms[1].arm: cand}
    ms: list[MeasurementRow] = [
        replace(
            m,
            arm=names.get(m.arm, m.arm),
            engine_version=version,
            value=m.value * scale if m.value is not None else None,
            started_at=f"2026-{1 + i * 11 // 10000:02d}-01T00:00:00.000Z",
        )
        for m in base.measurements
    ]
    cells = [replace(c, candidate=cand) for c in base.cells]
    stamp = f"2026-{1 + i * 11 // 10000:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00.000Z"
    return replace(
        base,
        run_dir=f"/runs/exp{exp}/run{i:05d}",
        experiment=f"exp{exp}",
        engine=engine,
        started_at=stamp,
        finished_at=stamp,
        arms=arms,
        measurements=ms,
        cells=cells,
    )


def fill(store: Store, runs: int) -> float:
    base = extract(SOURCE)
    start = time.perf_counter()
    batch: list[RunRecord] = []
    for i in range(runs):
        batch.append(synthetic(base, i))
        if len(batch) == 500:
            store.record_many(batch)
            batch = []
    if batch:
        store.record_many(batch)
    return time.perf_counter() - start


def spec_file(tmp: Path) -> Path:
    """The committed H200 spec on model /models/m2 (experiments 2, 7, 12 …): its baseline
    matches stored runs, so `--spec` and the prior have something to find."""
    text_ = (ROOT / "spec" / "h200_transformers_cb.yaml").read_text()
    text_ = text_.replace("{path: /tmp/llama-0.8b}", "{path: /models/m2}")
    text_ = text_.replace("noise_from: ../reports/runs/h200_transformers_cb_calibration", "")
    path = tmp / "spec.yaml"
    path.write_text(text_)
    return path


def timed(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def quiet(args: list[str]) -> Callable[[], int]:
    def go() -> int:
        with contextlib.redirect_stdout(io.StringIO()):
            return main(args)

    return go


def measure(where: str, runs: int) -> list[tuple[str, float]]:
    store = Store(where)
    store.clear()
    filled = fill(store, runs)
    with store.read() as conn:
        if where.endswith(".sqlite"):
            conn.execute(text("ANALYZE"))
        n = conn.execute(text("SELECT count(*) FROM measurements")).scalar_one()
    store.close()
    rows: list[tuple[str, float]] = [(f"fill {runs} runs ({n} measurements)", filled)]
    with tempfile.TemporaryDirectory() as tmp:
        spec = spec_file(Path(tmp))
        s = ["--store", where]
        asks = {
            "history (newest 20)": ["history", *s],
            "history --engine sglang --gpu H200 --flag flag-7": [
                "history", *s, "--engine", "sglang", "--gpu", "H200", "--flag", "flag-7",
            ],
            "history --arm cand7 --check (1/50 of runs)": [
                "history", *s, "--arm", "cand7", "--check",
            ],
            "history --arm baseline --check (every run)": [
                "history", *s, "--arm", "baseline", "--check",
            ],
            "history --spec SPEC": ["history", *s, "--spec", str(spec)],
        }  # fmt: skip
        for name, args in asks.items():
            rows.append((name, timed(quiet(args))))
        from matrixrun.plan import expand
        from matrixrun.spec import load_spec
        from matrixrun.store.prior import auto_history

        loaded = load_spec(spec)
        plan = expand(loaded)
        loaded = loaded.model_copy(
            update={"engine": loaded.engine.model_copy(update={"kind": "sglang"})}
        )
        rows.append(("noise prior lookup (auto)", timed(lambda: auto_history(loaded, plan, where))))
        walls, cpus = [], []
        for _ in range(5):  # best of 5, like the in-process questions
            start, cpu = time.perf_counter(), _child_cpu()
            subprocess.run(  # noqa: S603 - fixed argv, no shell
                [sys.executable, "-m", "matrixrun", "history", *s, "--arm", "cand7", "--check"],
                capture_output=True,
                check=False,
            )
            walls.append(time.perf_counter() - start)
            cpus.append(_child_cpu() - cpu)
        rows.append(("whole CLI: history --arm cand7 --check, wall", min(walls)))
        rows.append(("whole CLI: the same, CPU (user + system)", min(cpus)))
    return rows


def _child_cpu() -> float:
    """CPU seconds of finished child processes: the CLI's own cost, apart from the machine's
    load (the wall time of a subprocess on a shared machine is mostly waiting)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def table(backend: str, rows: list[tuple[str, float]]) -> str:
    lines = [f"| {backend} | seconds |", "|---|---|"]
    lines += [f"| {name} | {secs:.3f} |" for name, secs in rows]
    return "\n".join(lines)


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", action="append", help="a store (repeatable; default SQLite)")
    ap.add_argument("--runs", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = args.store or [str(Path(tmp) / "bench.sqlite")]
        out = {}
        for where in stores:
            backend = "PostgreSQL" if "://" in where else "SQLite"
            rows = measure(where, args.runs)
            out[backend] = {name: round(secs, 4) for name, secs in rows}
            print(table(f"{backend} ({shown(where) if '://' in where else 'a file'})", rows))
            print()
        print(json.dumps(out, indent=1), file=sys.stderr)
        worst = max(v for b in out.values() for k, v in b.items() if k.startswith("history"))
        print(
            f"slowest history answer: {worst:.3f} s; median of all: "
            f"{statistics.median(v for b in out.values() for v in b.values()):.3f} s"
        )


if __name__ == "__main__":
    main_()

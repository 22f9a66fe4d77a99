"""`vllm bench sweep serve` output directories: many `--save-result` runs, laid out by combination.

Facts from vLLM's `benchmarks/sweep/serve.py` (0.33) and a sweep run against the simulator:
the sweep launches the server once per *serve combination* (a `--serve-params` entry) and,
on that server, runs `vllm bench serve` for every *bench combination* (`--bench-params`),
`--num-runs` times. Each run is written to `EXPERIMENT/SERVE--<serve>-BENCH--<bench>/run=N.json`
(N from 0; `SERVE--` is left out without serve params, `-BENCH--...` without bench params;
`<serve>` is the entry's key when the params file is a dict, else `key=value-key=value`). A run
file is the `--save-result` object plus `run_number` and the combination's parameters as
top-level keys. Beside them: `summary.json` per combination (the same runs again, as a list),
`warmup.json` (with `--warmup-num-prompts`), `run=N.failure.json` for a run that failed (with
`--continue-on-error`), and `summary.csv` of the whole sweep.

Ingest reads the `run=N.json` files only (the summaries repeat them; warm-up runs are not
measurements) and counts the failure files. Repeats (`run=0`, `run=1`, ...) are repeats on one
server launch. Serve combinations are arms by default (`serve="arms"`: each its own launch, so
its runs are warm repeats on that launch); `serve="launches"` says the combinations are the
same configuration launched again, so they become server launches of one arm (named by the
runs' label), and runs across them are fresh-server repeats.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Literal

from matrixrun.core.errors import InputError
from matrixrun.ingest.formats.run import Run
from matrixrun.ingest.formats.vllm import load_json, parse_result

__all__ = ["SweepServe", "combination", "failures", "is_sweep_dir", "read_dir"]

SweepServe = Literal["arms", "launches"]
_RUN = re.compile(r"run=(\d+)\.json")
_HINT = "is this a directory written by `vllm bench sweep serve`?"


def _run_files(path: Path) -> list[Path]:
    return [p for p in path.rglob("run=*.json") if _RUN.fullmatch(p.name)]


def is_sweep_dir(path: Path) -> bool:
    return path.is_dir() and bool(_run_files(path))


def failures(path: Path) -> list[Path]:
    """The runs (and server combinations) the sweep recorded as failed."""
    return sorted(path.rglob("*failure.json"))


def combination(directory: str) -> tuple[str | None, str | None]:
    """(serve, bench) combination names from a run directory's name."""
    serve: str | None = None
    bench: str | None = None
    rest = directory
    if rest.startswith("SERVE--"):
        serve, _, tail = rest[len("SERVE--") :].partition("-BENCH--")
        bench = tail or None
    elif rest.startswith("BENCH--"):
        bench = rest[len("BENCH--") :]
    return serve, bench


def read_dir(path: str | Path, *, serve: SweepServe = "arms") -> list[Run]:
    """Every measured run of a sweep, ordered by combination directory then run number."""
    root = Path(path)
    files = _run_files(root)
    if not files:
        raise InputError(f"{root}: no run=N.json files in it; {_HINT}")

    def order(p: Path) -> tuple[str, int]:
        match = _RUN.fullmatch(p.name)
        return (str(p.parent), int(match.group(1)) if match else 0)

    runs: list[Run] = []
    for file in sorted(files, key=order):
        serve_name, _ = combination(file.parent.name)
        run = parse_result(load_json(file, _HINT), source=str(file), format="vllm_sweep")
        label = run.record.tag
        if serve == "arms" and serve_name is not None:
            # Each serve combination is an arm with its own server launch.
            run = replace(run, record=run.record.model_copy(update={"tag": serve_name}))
            run = replace(run, server=serve_name)
        else:
            arm = label or (file.parent.parent.name if file.parent.parent != root else root.name)
            run = replace(run, record=run.record.model_copy(update={"tag": arm}))
            run = replace(run, server=serve_name or "default")
        runs.append(run)
    return runs

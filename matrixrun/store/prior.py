"""Noise priors from the results store (`verify.noise_from: auto`, the default): the noise that
earlier real runs of the same engine, model and hardware measured, pooled with a new run's by
df through the same machinery as a hand-named `noise_from` (`analysis.prior.with_history`).

Which runs: analysed, real (never a simulator's: its noise is its profile's, not an
engine's), of this spec's engine kind, with every server group's model, GPU and GPU count
among their arms, whose run directory still exists; the `MAX_RUNS` newest. Their *own* noise
is pooled (`store.extract` keeps each run's noise without what it borrowed), so no run's df is
counted twice. A calibration run (`verify.design: fixed`) among them goes first, so its
launch part is pooled by df as a hand-named one would be; an adaptive run's launch part is
never pooled into another's (docs/verdicts.md, "Noise from an earlier run", says why).
Only the newest few: the prior is worth the df it was measured on only while the noise is the
same, and an engine build or a node changes it; a bound on how far back it reaches bounds how
long a change goes unnoticed. The engine version of the new run is not known before it
launches, so the report names the versions the prior was measured on.

A rehearsal borrows nothing automatically (a rehearsal previews what a real run would do with
no simulator history behind it); `noise_from: none` turns the lookup off.

The choice is made once, when a run starts, and written into the run directory (`prior.json`):
a resumed run, a Slurm job and a re-analysis read it there, never the store again, so a run's
prior does not change under it as other runs are recorded.

`prior_from_runs` is pure, for the scoring benchmark (benchmarks/verdicts.py): earlier runs'
noise in, the pooled prior out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matrixrun.analysis.prior import with_history
from matrixrun.core.verdict import AnalysisSettings, Sigma
from matrixrun.plan import Plan, expand
from matrixrun.plan.history import PRIOR_FILE, NoiseHistory, StoredPrior, noise_history
from matrixrun.spec import Spec
from matrixrun.store.db import open_store
from matrixrun.store.lookup import EarlierNoise, earlier_noise

#: The newest earlier runs pooled (see the module docstring for why a bound).
MAX_RUNS = 3
AUTO, NONE = "auto", "none"

__all__ = ["EarlierNoise", "auto_history", "prepare", "prior_from_runs", "with_prior"]


def prior_from_runs(
    earlier: Sequence[EarlierNoise], max_runs: int = MAX_RUNS
) -> tuple[dict[str, Sigma], list[EarlierNoise]] | None:
    """The pooled prior per metric from the newest `max_runs` runs (a calibration run first),
    and the runs it used; None where there are none. Pure."""
    newest = sorted(earlier, key=lambda e: e.finished_at or "", reverse=True)[:max_runs]
    if not newest:
        return None
    used = sorted(newest, key=lambda e: not e.fixed_design)  # stable: recency within each
    pooled: dict[str, Sigma] = {}
    for e in used:
        for metric, s in e.sigmas.items():
            pooled[metric] = with_history(pooled[metric], s, e.run_dir) if metric in pooled else s
    return pooled, used


def _shown(path: str) -> str:
    p = Path(path)
    return os.path.relpath(p) if p.is_relative_to(Path.cwd()) else path


def with_prior(
    settings: AnalysisSettings, earlier: Sequence[EarlierNoise], max_runs: int = MAX_RUNS
) -> AnalysisSettings:
    """`settings` with the prior the store would give a run whose earlier runs are `earlier`
    (unchanged where there are none): what a run under `verify.noise_from: auto` is judged
    by, for the scoring benchmark. Pure."""
    got = prior_from_runs(earlier, max_runs)
    if got is None:
        return settings
    sigmas, used = got
    return settings.model_copy(update={"noise_history": sigmas, "noise_from": label_of(used)})


def label_of(used: Sequence[EarlierNoise]) -> str:
    """How the report names the prior: the store, the engine version(s) it was measured on,
    and each run."""
    versions = list(dict.fromkeys(e.engine_version or "version unknown" for e in used))
    runs = ", ".join(_shown(e.run_dir) for e in used)
    return f"the results store ({'; '.join(versions)}): {runs}"


def auto_history(
    spec: Spec, plan: Plan, store: str | None = None, exclude: Path | None = None
) -> NoiseHistory | None:
    """The prior the store gives a real run of `spec`; None where it holds no matching run.
    Store errors propagate (the caller words them)."""
    got = _auto(spec, plan, store, exclude)
    return got[0] if got is not None else None


def _auto(
    spec: Spec, plan: Plan, store: str | None, exclude: Path | None
) -> tuple[NoiseHistory, list[EarlierNoise]] | None:
    opened = open_store(store)
    if opened is None:
        return None
    try:
        wanted = {(g.model.path, g.hardware.gpu, g.hardware.count) for g in plan.groups}
        earlier = [
            e
            for e in earlier_noise(opened, spec.engine.kind, wanted)
            if Path(e.run_dir).is_dir() and (exclude is None or Path(e.run_dir) != exclude)
        ]
    finally:
        opened.close()
    got = prior_from_runs(earlier)
    if got is None:
        return None
    sigmas, used = got
    return NoiseHistory(sigmas, label_of(used), simulated=False), used


def write_prior(run_dir: Path, history: NoiseHistory, used: Sequence[EarlierNoise]) -> Path:
    """prior.json, written whole (a temporary file renamed over it)."""
    path = run_dir / PRIOR_FILE
    run_dir.mkdir(parents=True, exist_ok=True)
    record = StoredPrior(
        label=history.label,
        runs=[e.run_dir for e in used],
        versions=[e.engine_version for e in used],
        sigmas=dict(history.sigmas),
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _with(spec: Spec, value: str) -> Spec:
    return spec.model_copy(update={"verify": spec.verify.model_copy(update={"noise_from": value})})


def from_run_dir(spec: Spec, run_dir: Path) -> Spec:
    """`auto` as a run directory already decided it: its prior.json, else nothing (a Slurm
    job, a resumed run that started without one)."""
    if spec.verify.noise_from != AUTO:
        return spec
    path = run_dir / PRIOR_FILE
    return _with(spec, str(path.resolve()) if path.is_file() else NONE)


@dataclass(frozen=True)
class PlanNoise:
    """What `plan` shows of the noise a real run would borrow."""

    history: NoiseHistory | None
    looked: bool = False  # auto: the store was asked
    error: BaseException | None = None  # the store could not be read


def plan_noise(spec: Spec, plan: Plan) -> PlanNoise:
    """The history a hand-named `noise_from` lends, or the one `auto` would find now."""
    borrowed = spec.verify.noise_dir()
    if borrowed is not None:
        return PlanNoise(noise_history(spec, plan, borrowed))
    if spec.verify.noise_from != AUTO:
        return PlanNoise(None)
    try:
        return PlanNoise(auto_history(spec, plan), looked=True)
    except Exception as exc:  # the plan is still shown
        return PlanNoise(None, looked=True, error=exc)


def prepare(
    spec: Spec, run_dir: Path, rehearse: bool, store: str | None = None
) -> tuple[Spec, Exception | None]:
    """`verify.noise_from: auto` decided for a run about to start in `run_dir`: the store's
    prior written to prior.json and named in the spec, or `none`; and the error where the
    store could not be read (the run goes on without a prior; the caller words it)."""
    if spec.verify.noise_from != AUTO:
        return spec, None
    if rehearse:
        return _with(spec, NONE), None
    if (run_dir / PRIOR_FILE).is_file() or (run_dir / "settings.json").is_file():
        return from_run_dir(spec, run_dir), None
    try:
        got = _auto(spec, expand(spec), store, exclude=run_dir.resolve())
    except Exception as exc:  # any store failure: the run must still happen
        return _with(spec, NONE), exc
    if got is None:
        return _with(spec, NONE), None
    path = write_prior(run_dir, *got)
    return _with(spec, str(path.resolve())), None

"""Times from earlier run directories (`plan --markdown --history DIR`): the medians of real
(never simulated) launches and cells of the same engine, model and hardware, so a proposal's
cost rests on what such runs took rather than on a guess."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from ruamel.yaml import YAML

from matrixrun.core import migrate
from matrixrun.core.errors import InputError
from matrixrun.core.format_version import FORMAT_FILE
from matrixrun.core.verdict import AnalysisSettings, Sigma, Verdict
from matrixrun.plan import Plan, expand
from matrixrun.spec import Spec


@dataclass(frozen=True)
class HistoryEstimate:
    """Medians over earlier run directories with the same engine, model and hardware."""

    launch_s: float | None
    cell_s: float | None
    launches: int
    cells: int
    run_dirs: list[str]


def _group_key(engine: str, group: Mapping[str, Any]) -> tuple[str, str, str, int]:
    model = group.get("model") or {}
    hw = group.get("hardware") or {}
    return (engine, str(model.get("path")), str(hw.get("gpu")), int(hw.get("count") or 1))


def _engine_kind(spec_file: Path) -> str | None:
    try:
        data = YAML(typ="safe").load(spec_file.read_text(encoding="utf-8"))
    except Exception:  # an unreadable old spec: that run directory is skipped
        return None
    if not isinstance(data, dict):
        return None
    engine = data.get("engine") or {}
    return str(engine.get("kind", "sglang")) if isinstance(engine, dict) else None


def _seconds(start: Any, end: Any) -> float | None:
    try:
        a = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        b = datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    except ValueError:
        return None
    s = (b - a).total_seconds()
    return s if s > 0 else None


def _run_dirs(roots: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        base = Path(root)
        if not base.is_dir():
            raise InputError(
                f"--history {root}: no such directory; give a directory holding earlier run "
                "directories (e.g. runs/)"
            )
        out += sorted({p.parent for p in base.rglob("plan.json")})
    return out


def history_estimate(spec: Spec, plan: Plan, roots: Sequence[str | Path]) -> HistoryEstimate:
    """Launch and cell times measured by earlier, real (not simulated) runs whose server groups
    have this spec's engine kind, model path, GPU and GPU count.

    Launch: each server's `startup_s` (start to healthy, env.json). Cell: each measurement's
    wall time (started_at to finished_at, results.jsonl), failed ones included — a failure
    costs GPU time too. Run directories that cannot be read are skipped, not fatal: history is
    a hint for the estimate, never an input to a verdict.
    """

    wanted = {_group_key(spec.engine.kind, g.model_dump(mode="json")) for g in plan.groups}
    launches: list[float] = []
    cells: list[float] = []
    used: list[str] = []
    for rd in _run_dirs(roots):
        engine = _engine_kind(rd / "spec.yaml") if (rd / "spec.yaml").exists() else None
        try:
            old = json.loads((rd / "plan.json").read_text(encoding="utf-8"))
            env = (
                json.loads((rd / "env.json").read_text(encoding="utf-8"))
                if (rd / "env.json").exists()
                else {}
            )
        except (OSError, ValueError):
            continue
        if engine is None or not isinstance(old, dict) or env.get("simulated"):
            continue
        groups = {
            str(g.get("group_id")): _group_key(engine, g)
            for g in old.get("groups") or []
            if isinstance(g, dict)
        }
        ours = {gid for gid, key in groups.items() if key in wanted}
        if not ours:
            continue
        before = len(launches) + len(cells)
        for server in (env.get("servers") or {}).values():
            if isinstance(server, dict) and server.get("group") in ours:
                startup = server.get("startup_s")
                if isinstance(startup, int | float) and startup > 0:
                    launches.append(float(startup))
        results = rd / "results.jsonl"
        lines = results.read_text(encoding="utf-8").splitlines() if results.exists() else []
        for line in lines:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if isinstance(m, dict) and m.get("group_id") in ours and not m.get("simulated"):
                s = _seconds(m.get("started_at"), m.get("finished_at"))
                if s is not None:
                    cells.append(s)
        if len(launches) + len(cells) > before:
            used.append(str(rd))
    return HistoryEstimate(
        launch_s=statistics.median(launches) if launches else None,
        cell_s=statistics.median(cells) if cells else None,
        launches=len(launches),
        cells=len(cells),
        run_dirs=used,
    )


@dataclass(frozen=True)
class NoiseHistory:
    """The noise an earlier run measured, per metric, for `verify.noise_from`."""

    sigmas: dict[str, Sigma]
    label: str  # how the report names it: the directory, and SIMULATED where it was
    simulated: bool


#: The file in a run directory that holds the prior the results store gave it.
PRIOR_FILE = "prior.json"


class StoredPrior(BaseModel):
    """prior.json (`store.prior`): the prior a run was given from the results store under
    `verify.noise_from: auto`, and where it came from."""

    label: str
    runs: list[str] = Field(description="The earlier run directories pooled, in pooling order.")
    versions: list[str | None] = Field(default_factory=list)
    sigmas: dict[str, Sigma]


def read_prior(path: Path) -> NoiseHistory:
    record = StoredPrior.model_validate_json(path.read_text(encoding="utf-8"))
    return NoiseHistory(dict(record.sigmas), record.label, simulated=False)


def noise_history(spec: Spec, plan: Plan, run_dir: str | Path) -> NoiseHistory:
    """The per-metric noise in an earlier run's verdict.json, after checking that its server
    groups have this spec's engine kind, model, GPU and GPU count (another engine's or node's
    noise says nothing about this one's). One sentence on what does not fit."""
    rd = Path(run_dir)
    if rd.name == "settings.json":  # a run directory's own spec copy (`spec.loader`)
        return _borrowed_by(spec, plan, rd)
    if rd.name == PRIOR_FILE:  # what the results store gave it (`store.prior`)
        try:
            return read_prior(rd)
        except (OSError, ValueError) as exc:
            raise InputError(
                f"verify.noise_from {rd}: cannot read the prior the results store gave this "
                f"run ({exc}); delete it to run without one"
            ) from None
    try:
        # an earlier matrixrun's files through the migrations (core.migrate), as RunDir reads
        # them: this module sits below rundir
        names = ("verdict.json", "plan.json", "env.json", "settings.json", FORMAT_FILE)
        files = {
            n: json.loads((rd / n).read_text(encoding="utf-8")) for n in names if (rd / n).exists()
        }
        files = migrate.migrate(files)
        verdict = Verdict.model_validate(files["verdict.json"])
        old = files["plan.json"]
        env = files.get("env.json", {})
    except (OSError, ValueError, KeyError, ValidationError, InputError) as exc:
        raise InputError(
            f"verify.noise_from {rd}: cannot read its verdict.json and plan.json ({exc}); run "
            "`matrixrun analyse` there, or point at another run directory"
        ) from None
    _check_groups(spec, plan, rd, old)
    simulated = bool(env.get("simulated"))
    # named as the user would type it from here, not as the absolute path the loader made
    shown = os.path.relpath(rd) if rd.is_relative_to(Path.cwd()) else str(rd)
    label = shown + (" (SIMULATED)" if simulated else "")
    return NoiseHistory({s.metric: s for s in verdict.sigma}, label, simulated)


def _borrowed_by(spec: Spec, plan: Plan, settings_file: Path) -> NoiseHistory:
    """What a run borrowed (its settings.json's records and their label), for that run's own
    spec copy: resuming or reproducing it uses the same prior it had."""
    rd = settings_file.parent
    try:
        data = json.loads(settings_file.read_text(encoding="utf-8")).get("analysis") or {}
        settings = AnalysisSettings.model_validate(data)
        old = json.loads((rd / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError) as exc:
        raise InputError(
            f"verify.noise_from of {rd}/spec.yaml: cannot read what that run borrowed from "
            f"{settings_file} ({exc}); run the original spec instead"
        ) from None
    if not settings.noise_history or settings.noise_from is None:
        raise InputError(
            f"verify.noise_from of {rd}/spec.yaml: {settings_file} records no borrowed noise; "
            "run the original spec, or point verify.noise_from at an earlier run directory"
        )
    _check_groups(spec, plan, rd, old)
    simulated = settings.noise_from.endswith("(SIMULATED)")
    return NoiseHistory(dict(settings.noise_history), settings.noise_from, simulated)


def _check_groups(spec: Spec, plan: Plan, rd: Path, old: Mapping[str, Any]) -> None:
    """The earlier run must have this spec's engine kind, model, GPU and GPU count in its
    server groups (another engine's or node's noise says nothing about this one's)."""
    engine = _engine_kind(rd / "spec.yaml") if (rd / "spec.yaml").exists() else None
    theirs = {_group_key(engine or "?", g) for g in old.get("groups") or [] if isinstance(g, dict)}
    ours = {_group_key(spec.engine.kind, g.model_dump(mode="json")) for g in plan.groups}
    missing = sorted(ours - theirs)
    if missing:
        e, model, gpu, count = missing[0]
        raise InputError(
            f"verify.noise_from {rd}: that run has no server group of engine {e}, model "
            f"{model} on {count}× {gpu}; its noise says nothing about this one's: point at a "
            "run of the same engine, model and hardware, or remove verify.noise_from"
        )


def refuse_simulated_noise(spec: Spec, rehearse: bool) -> None:
    """A run on real servers never borrows a simulator's noise (`verify.noise_from`): checked
    before any launch, so nothing is spent on a run whose verdicts would rest on it."""
    borrowed = spec.verify.noise_dir()
    if rehearse or borrowed is None:
        return

    if noise_history(spec, expand(spec), borrowed).simulated:
        raise InputError(
            f"verify.noise_from {spec.verify.noise_from} is a SIMULATED run: its noise is the "
            "simulator's, not this engine's; point at a real run, or rehearse (--rehearse)"
        )


# ------------------------------------------------------------------------------ commands

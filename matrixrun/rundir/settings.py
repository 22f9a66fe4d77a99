"""settings.json: what a run was judged by and what its report states, fixed when it starts.

The run directory is the interface between stages (docs/architecture.md): `run` and `ingest`
write settings.json, `run.outputs.analyse_run` reads it beside results.jsonl to write
verdict.json, and `report.render_run` reads it beside verdict.json, plan.json and env.json.
So analysing and rendering never parse a spec (and still work when the spec copy is gone), and
the statistics' parameters — margins, α and its spending over the looks, the correctness gate's
outcome — are written down once, where anyone can read them. An older settings.json (or none,
from a run older than the file) is brought forward by `core.migrate`.

`analysis_settings` is the one translation of a spec's verify block into statistics settings,
shared by the runner, the verify policy and its scoring benchmark.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from matrixrun.core.errors import InputError
from matrixrun.core.format_version import SETTINGS_VERSION
from matrixrun.core.verdict import AnalysisSettings
from matrixrun.plan.history import noise_history
from matrixrun.plan.rehearsal import blind_pairs, rehearsal_setup
from matrixrun.rundir.results import RunDir
from matrixrun.spec.points import output_len_given

if TYPE_CHECKING:
    from pathlib import Path

    from matrixrun.plan import Plan
    from matrixrun.spec import Spec

SETTINGS_SCHEMA = SETTINGS_VERSION
"""settings.json's format. Raised when a field changes meaning, with a step in
`core.migrate` that brings an older file forward: readers see only the current format."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkloadFacts(_Model):
    """The spec's workload as the report states it."""

    dataset: str
    range_ratio: float
    input_len: int
    output_len: int
    request_rate: float | None = Field(description="Requests per second; None = all at once.")
    num_prompts: int | None = None
    duration: float | None = None
    prompts_per_concurrency: int | None = None
    min_prompts: int | None = None
    warmup_requests: int | Literal["cell"] = 0
    seed: int = 0
    prompt_format: str = Field("token_ids", description="token_ids or text (engine.prompt_format).")
    strict_openai: bool = False
    # the dataset's own description (absent from files written before it was recorded, whose
    # report then names the kind only)
    path: str | None = Field(None, description="sharegpt, trace: the file, as the spec names it.")
    time_scale: float | None = Field(None, description="trace: its time offsets times this.")
    shared_prefix: list[int] | None = Field(
        None, description="shared_prefix: groups, prompts per group, system_len, question_len."
    )
    fixed_output: bool = Field(False, description="sharegpt: output_len replaces reply lengths.")


class SloBound(_Model):
    """One service-level bound from the spec's `slo:` (a metric and its max and/or min)."""

    metric: str
    max: float | None = None
    min: float | None = None


class RehearsalFacts(_Model):
    """A rehearsal's profile and seed, and the candidates its profile could not tell from the
    baseline (the report says so beside SIMULATED; `Reproduce` names the seed)."""

    profile: str
    bundled: bool = Field(description="The spec gave no profile: the simulator's default one.")
    seed: str = Field(description="rehearsal.seed, else the experiment: each launch's seed.")
    blind: list[str] = Field(
        default_factory=list, description="Candidates the profile runs as the baseline."
    )


class SpecFacts(_Model):
    """What the report says about the experiment beyond plan.json (which holds the models,
    hardware, arms' merged flags, launch prefixes and environments per server group)."""

    hypothesis: str | None = None
    notes: str | None = Field(None, description="The author's notes, rendered as written.")
    slo: list[SloBound] = Field(default_factory=list, description="The spec's slo: bounds.")
    engine: str
    client: str
    launch: list[str] | None = Field(None, description="engine.launch, the default prefix.")
    check_hardware: bool = True
    workload: WorkloadFacts
    sweep: dict[str, list[Any]] = Field(description="Swept axes (more than one value) in order.")
    engine_arg_keys: list[str] = Field(
        default_factory=list, description="engine.args keys, in order: part of the common args."
    )
    arm_flag_keys: list[str] = Field(
        default_factory=list, description="Every arm's flag keys, first seen first."
    )
    asked: list[str] = Field(
        default_factory=list,
        description="Server args the spec sets on purpose (arm flags, server axes, hardware "
        "args): an effective arg that differs between arms is only worth a warning otherwise.",
    )
    max_runs: int = 1
    stream_interval: int | None = Field(None, description="rehearsal.stream_interval")
    rehearsal_note: str | None = None
    spec_sha256: str | None = None
    spec_path: str | None = Field(
        None, description="The spec as `run` was given it (what Reproduce prints)."
    )
    rehearsal: RehearsalFacts | None = Field(None, description="What a rehearsal ran on.")


class RunSettings(_Model):
    """settings.json."""

    schema_version: int = Field(SETTINGS_SCHEMA, description="settings.json's format.")
    analysis: AnalysisSettings
    rehearsal: bool = Field(False, description="Run with --rehearse (on the simulator).")
    time_scale: float = Field(1.0, description="The simulator's speed-up, converted back.")
    spec: SpecFacts | None = Field(None, description="None for a run built by `ingest`.")


def rounds(spec: Spec) -> int:
    """Stage-2 rounds fixed by the plan: one per extra run a cell may get."""
    return max(spec.verify.max_runs - 1, 0)


def looks(spec: Spec) -> int:
    """Times the data are judged with the power to stop: after stage 1 and after each round;
    once, at the end, in a fixed design (nothing stops it early)."""
    return 1 if spec.verify.design == "fixed" else 1 + rounds(spec)


def analysis_settings(
    spec: Spec, plan: Plan, correctness: dict[str, float] | None = None
) -> AnalysisSettings:
    """Analysis settings implied by the spec: what the runner writes into settings.json, and
    what the verify policy (and its scoring benchmark) judge the measurements so far by."""
    v = spec.verify
    history = None
    borrowed = v.noise_dir()
    if borrowed is not None:
        history = noise_history(spec, plan, borrowed)
    return AnalysisSettings(
        noise_history=history.sigmas if history else {},
        noise_from=history.label if history else None,
        baseline=plan.baseline,
        candidates=plan.candidates,
        primary=spec.metrics.primary,
        secondary=list(spec.metrics.secondary),
        margin=v.threshold,
        margins=spec.metrics.margins(),
        surprise=v.surprise,
        noise=v.noise,
        confidence=v.confidence,
        looks=looks(spec),
        # α is spent over every state a cell can stop in (its runs n_b + n_c), Lan–DeMets
        # O'Brien–Fleming on the information fraction (AnalysisSettings.level_at): valid by
        # Bonferroni whatever the policy re-measures or re-analyses.
        spending="information" if looks(spec) > 1 else "equal",
        failure_limit=v.failure_rate,
        design=v.design,
        axis=plan.axis,
        correctness=dict(correctness or {}),
        correctness_min=spec.correctness.floor,
    )


def _dataset_facts(spec: Spec) -> dict[str, Any]:
    """What the report needs to name the dataset a run sent (file, schedule, shape): the
    spec's lengths describe a random workload only, so without these the Setup of a ShareGPT
    or trace run would state lengths nothing sent."""
    w = spec.workload
    if w.dataset in ("sharegpt", "trace"):
        facts: dict[str, Any] = {"path": w.path}
        if w.dataset == "trace":
            facts["time_scale"] = w.time_scale or 1.0
        else:
            facts["fixed_output"] = output_len_given(spec)
        return facts
    if w.dataset == "shared_prefix":
        return {"shared_prefix": list(w.shared_prefix_shape())}
    return {}


def spec_facts(spec: Spec, spec_sha256: str | None = None) -> SpecFacts:
    """What the report states about the spec, taken once when the run starts, so rendering
    never needs the spec (plan.json carries the rest)."""
    w = spec.workload
    note = spec.rehearsal.note
    asked = {k for arm in spec.arms.values() for k in arm.flags}
    asked |= set(spec.sweep.server)
    asked |= {k for hw in spec.hardwares for k in hw.args}
    return SpecFacts(
        hypothesis=" ".join(spec.hypothesis.split()) if spec.hypothesis else None,
        notes=spec.notes.strip() if spec.notes else None,
        slo=[SloBound(metric=b.metric, max=b.max, min=b.min) for b in spec.slo],
        engine=spec.engine.kind,
        client=spec.engine.client,
        launch=list(spec.engine.launch) if spec.engine.launch else None,
        check_hardware=spec.engine.check_hardware,
        workload=WorkloadFacts(
            dataset=w.dataset,
            range_ratio=w.range_ratio,
            input_len=w.input_len,
            output_len=w.output_len,
            request_rate=None if math.isinf(w.request_rate) else w.request_rate,
            num_prompts=w.num_prompts,
            duration=w.duration,
            prompts_per_concurrency=w.prompts_per_concurrency,
            min_prompts=w.min_prompts,
            warmup_requests=w.warmup_requests,
            seed=w.seed,
            prompt_format=spec.engine.prompt_format,
            strict_openai=spec.engine.strict_openai,
            **_dataset_facts(spec),
        ),
        sweep={
            axis: values
            for axis, values in spec.axis_values().items()
            if len(values) > 1 and axis not in ("model", "hardware")
        },
        engine_arg_keys=list(spec.engine.args),
        arm_flag_keys=list(dict.fromkeys(k for arm in spec.arms.values() for k in arm.flags)),
        asked=sorted(asked),
        max_runs=spec.verify.max_runs,
        stream_interval=spec.rehearsal.stream_interval,
        rehearsal_note=note.strip() if note else None,
        spec_sha256=spec_sha256,
    )


def run_settings(
    spec: Spec,
    plan: Plan,
    *,
    rehearsal: bool = False,
    time_scale: float = 1.0,
    spec_sha256: str | None = None,
    correctness: dict[str, float] | None = None,
    spec_path: str | None = None,
) -> RunSettings:
    """settings.json of a spec-driven run."""
    facts = spec_facts(spec, spec_sha256).model_copy(update={"spec_path": spec_path})
    if rehearsal:
        facts = facts.model_copy(update=rehearsal_facts(spec, plan))
    return RunSettings(
        analysis=analysis_settings(spec, plan, correctness),
        rehearsal=rehearsal,
        time_scale=time_scale,
        spec=facts,
    )


def write_settings(rd: RunDir, settings: RunSettings) -> Path:
    return rd.write_text("settings.json", settings.model_dump_json(indent=2) + "\n")


def read_settings(rd: RunDir) -> RunSettings:
    """settings.json, or one sentence saying why it cannot be used."""
    path = rd.path / "settings.json"
    if not rd.has("settings.json"):
        raise InputError(
            f"{rd.path} has no settings.json: give a directory written by `matrixrun run` or "
            "`matrixrun ingest`"
        )
    data = rd.read_json("settings.json")  # an older file through core.migrate
    try:
        return RunSettings.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"{path}: not the settings of this matrixrun version ({exc.error_count()} "
            f"problem(s)); `matrixrun run SPEC --resume {rd.path}` rewrites it"
        ) from exc


def rehearsal_facts(spec: Spec, plan: Plan) -> dict[str, Any]:
    """The SpecFacts fields a rehearsal adds: its profile, seed, blind candidates, and the
    stream interval it really used (chosen for a spec without a profile)."""
    setup = rehearsal_setup(spec)
    seed = spec.rehearsal.seed if spec.rehearsal.seed is not None else spec.experiment
    return {
        "stream_interval": setup.stream_interval,
        "rehearsal": RehearsalFacts(
            profile=setup.profile.name,
            bundled=setup.bundled,
            seed=str(seed),
            blind=[b.candidate for b in blind_pairs(plan, setup)],
        ),
    }

"""The experiment spec's pydantic models: what a `spec/*.yaml` may say, key by key.

A spec is reviewed in a PR like code, so every mistake must point at its line and say what to
do. Models use `extra="forbid"`, so a misspelt key is an error (with a did-you-mean), never a
silently ignored setting or a new sweep axis. Field descriptions are the editor help of
`spec/schema.json` (`schema.py`); the loader (`loader.py`) turns validation errors into
`path:line: key: message`; checks across fields are `checks.py`.

Axes: `model` and `hardware` (one or a list), the arms (the compared backends), server-side
sweep axes (`server.<flag>`: each value another launch) and client-side ones (concurrency,
input/output length, request rate). Comparisons are always arm vs baseline at equal values of
all other axes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from matrixrun.core.metrics import MetricName
from matrixrun.core.profile import Profile
from matrixrun.core.units import Duration, Percent, Rate
from matrixrun.spec.base import FlagValue, StrictModel
from matrixrun.spec.design import fixed_design_rules
from matrixrun.spec.engine import EngineSpec

Slug = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=80)]

#: Client-side sweep axes, in the order they nest (the first swept one is the table's rows).
CLIENT_AXES = ("concurrency", "input_len", "output_len", "request_rate")


def _one_or_list(value: Any) -> Any:
    """`model: {...}` and `model: [{...}, {...}]` both mean a list of entries."""
    return [value] if isinstance(value, dict) else value


class ModelSpec(StrictModel):
    """The served model. Several models make a model axis (each another launch)."""

    path: str = Field(description="--model-path: a local directory or a hub id.")
    name: Slug | None = Field(None, description="Short label for reports; default: last path part.")
    quantization: str | None = Field(
        None,
        description="Documentary, e.g. nvfp4 (pass the engine "
        "flag in engine.args if the engine needs it).",
    )
    tokenizer: str | None = Field(
        None,
        description="A local tokenizer.json (or its folder): text prompts and datasets are "
        "tokenized with it, and the vocabulary read from it; default: model.path.",
    )
    vocab_size: int | None = Field(
        None,
        ge=2,
        description="Tokens in the model's vocabulary, where neither model.path nor "
        "model.tokenizer has a readable config.json or tokenizer: token-id prompts are drawn "
        "within it (SGLang does not check input ids; one out of range kills the server).",
    )

    @property
    def label(self) -> str:
        return self.name or Path(self.path.rstrip("/")).name or self.path


class HardwareSpec(StrictModel):
    """A hardware configuration. Several make a hardware axis (each another launch)."""

    gpu: str = Field(description="GPU name as nvidia-smi prints it, e.g. NVIDIA H200.")
    count: int = Field(1, ge=1, description="GPUs the server uses.")
    name: Slug | None = Field(None, description="Short label; default: '<count>x<gpu>'.")
    compute_capability: str | None = None
    node: str | None = Field(None, description="Cluster node type or Slurm constraint, if any.")
    args: dict[str, FlagValue] = Field(
        default_factory=dict,
        description="Server flags that belong to this hardware configuration, e.g. {tp: 4}.",
    )

    @property
    def label(self) -> str:
        return self.name or f"{self.count}x {self.gpu}"


class ArmSpec(StrictModel):
    """One compared configuration. Written either as a plain mapping of server flags, or with
    `flags:` plus `launch`/`env` when arms differ by build (another venv or image)."""

    flags: dict[str, FlagValue] = Field(default_factory=dict)
    launch: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    description: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if data is None:
            return {"flags": {}}
        if isinstance(data, dict) and "flags" not in data:
            return {"flags": data}
        return data


class SweepSpec(StrictModel):
    """Sweep axes. Client-side axes vary the load on one server; `server.<flag>` axes vary a
    server flag, each value another launch. Write server axes as `server.chunked_prefill_size:
    [4096, 8192]` or nested under `server:`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"patternProperties": {r"^server\.[a-z0-9_]+$": {"type": "array"}}},
    )

    concurrency: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [1], min_length=1, description="--max-concurrency values."
    )
    input_len: list[Annotated[int, Field(ge=1)]] | None = Field(None, min_length=1)
    output_len: list[Annotated[int, Field(ge=1)]] | None = Field(None, min_length=1)
    request_rate: list[Rate] | None = Field(None, min_length=1)
    server: dict[str, Annotated[list[FlagValue], Field(min_length=1)]] = Field(
        default_factory=dict, description="Server flag -> values; each value another launch."
    )
    axis: Literal["concurrency", "input_len", "output_len", "request_rate"] | None = Field(
        None,
        description="The axis shown as table rows; default: the first client axis with "
        "more than one value.",
    )

    @model_validator(mode="before")
    @classmethod
    def _dotted_server_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        server: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(key, str) and key.startswith("server."):
                server[key.removeprefix("server.")] = value
            else:
                out[key] = value
        if server:
            nested = out.get("server")
            out["server"] = {**(nested if isinstance(nested, dict) else {}), **server}
        return out

    @field_validator("concurrency", "input_len", "output_len")
    @classmethod
    def _unique(cls, values: list[int] | None) -> list[int] | None:
        if values is not None and len(set(values)) != len(values):
            raise ValueError("values must not repeat")
        return values


class WorkloadSpec(StrictModel):
    """What each cell sends. Sizing: `prompts_per_concurrency` (with `min_prompts`), or
    `num_prompts`, or `duration` — exactly one."""

    dataset: Literal["random", "sharegpt", "shared_prefix", "trace"] = Field(
        "random",
        description="random: token-id prompts of input_len tokens from `seed`; sharegpt: a "
        "local ShareGPT-format JSON (`path`), first human turn as the prompt; shared_prefix: "
        "SGLang's generated shared prefix (groups x prompts_per_group, system_len + "
        "question_len); trace: a Mooncake-format JSONL (`path`) replayed on its schedule. "
        "Identical for every arm; text datasets need the model's tokenizer.",
    )
    path: str | None = Field(
        None, description="sharegpt and trace: the local file (never downloaded)."
    )
    input_len: int = Field(512, ge=1)
    output_len: int = Field(
        128,
        ge=1,
        description="Output tokens per request; with sharegpt, given here or swept, it "
        "replaces each reply's length.",
    )
    range_ratio: float = Field(
        1.0,
        gt=0,
        le=1,
        description="random and shared_prefix: lengths uniform in [ratio x len, len] (SGLang's "
        "--random-range-ratio); 1: every prompt exactly input_len.",
    )
    length_filter: Literal["sglang", "vllm"] = Field(
        "sglang",
        description="sharegpt: which client's filter drops conversations. sglang: prompt or "
        "output under 2 tokens, and prompt + output above context_len when given; vllm: "
        "under 4 tokens (the output check skipped when output_len is fixed), prompt above "
        "1024, prompt + output above 2048.",
    )
    context_len: int | None = Field(
        None, ge=2, description="sharegpt, sglang filter: drop prompt + output above this."
    )
    groups: int | None = Field(None, ge=1, description="shared_prefix: groups (default 64).")
    prompts_per_group: int | None = Field(
        None, ge=1, description="shared_prefix: prompts sharing one system prompt (default 16)."
    )
    system_len: int | None = Field(
        None, ge=1, description="shared_prefix: shared system prompt tokens (default 2048)."
    )
    question_len: int | None = Field(
        None, ge=1, description="shared_prefix: question tokens per prompt (default 128)."
    )
    time_scale: float | None = Field(
        None,
        gt=0,
        description="trace: multiplies the trace's time offsets (2: half the rate, as SGLang's "
        "--mooncake-slowdown-factor).",
    )
    request_rate: Rate = Field(
        math.inf, description="Requests/s (Poisson, or gamma with burstiness) or inf."
    )
    burstiness: float = Field(
        1.0,
        gt=0,
        description="Arrivals at a finite request_rate: gamma gaps of this shape (vLLM's "
        "--burstiness); 1 is Poisson, below 1 burstier, above 1 more regular.",
    )
    prompts_per_concurrency: int | None = Field(None, ge=1)
    min_prompts: int = Field(1, ge=1)
    num_prompts: int | None = Field(None, ge=1)
    duration: Duration | None = Field(
        None, gt=0, description="Send requests for this long (at most 64 per concurrency slot)."
    )
    warmup_requests: Annotated[int, Field(ge=0)] | Literal["cell"] = Field(
        1,
        description="Unmeasured requests before each cell (outputs capped at 32 tokens), or "
        "`cell`: an unmeasured copy of the cell (as many requests, at its own concurrency and "
        "lengths, other prompts) — what removes a first pass's warm-up on engines whose first "
        "work at a batch shape is slow even after one wave of it.",
    )
    seed: int = Field(1, description="Same seed -> identical prompts for every arm.")
    processes: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto",
        description="Client processes to spread each cell's requests over (merged results, "
        "same metric definitions). auto: one per 256 of concurrency, at most the usable cores "
        "minus one.",
    )

    @model_validator(mode="after")
    def _one_sizing(self) -> WorkloadSpec:
        given = [
            n
            for n in ("prompts_per_concurrency", "num_prompts", "duration")
            if getattr(self, n) is not None
        ]
        if len(given) > 1:
            raise ValueError(
                f"give one of prompts_per_concurrency, num_prompts, duration, not "
                f"{' and '.join(given)}"
            )
        if not given:
            self.prompts_per_concurrency = 4
        if self.warmup_requests == "cell" and self.duration is not None:
            raise ValueError(
                "warmup_requests: cell copies the cell's requests, and a duration-sized cell "
                "has no fixed count: give warmup_requests a number"
            )
        return self

    def shared_prefix_shape(self) -> tuple[int, int, int, int]:
        """(groups, prompts_per_group, system_len, question_len), SGLang's bench_serving
        defaults where the spec leaves one out."""
        return (
            self.groups or 64,
            self.prompts_per_group or 16,
            self.system_len or 2048,
            self.question_len or 128,
        )

    def prompts_for(self, concurrency: int) -> int:
        """Number of measured prompts at a concurrency. With `duration` sizing this is an
        upper bound (64 per concurrency slot): the client stops sending when the time is up."""
        if self.num_prompts is not None:
            return self.num_prompts
        if self.duration is not None:
            return max(64 * concurrency, self.min_prompts)
        per = self.prompts_per_concurrency or 4
        return max(per * concurrency, self.min_prompts)


class MetricOptions(StrictModel):
    """Per-metric settings (issue 13): tail latencies need a wider margin than throughput."""

    margin: Percent | None = Field(
        None, description="This metric's practical margin (default: verify.threshold)."
    )


_METRICS_KEYS = ("primary", "secondary", "options")


def _metric_keys_schema(schema: dict[str, Any]) -> None:
    """JSON Schema of the shorthand `metrics: {p99_ttft_ms: {margin: 10%}}`: other keys take
    the same options as `options` entries, and `secondary` may be a mapping."""
    props = schema.get("properties", {})
    options = props.get("options", {}).get("additionalProperties")
    if options is not None:
        schema["additionalProperties"] = options
        secondary = props.get("secondary")
        if secondary is not None:
            props["secondary"] = {"anyOf": [secondary, {"type": "object"}]}


class MetricsSpec(StrictModel):
    """Primary and secondary metrics. Per-metric options may be given three ways: `options:
    {p99_ttft_ms: {margin: 10%}}`, `secondary` as a mapping instead of a list, or directly
    as a key, `metrics: {p99_ttft_ms: {margin: 10%}}` (such a metric is also a secondary
    one unless it is the primary). The list form stays valid."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_metric_keys_schema)

    primary: MetricName = "output_throughput"
    secondary: list[MetricName] = Field(default_factory=list)
    options: dict[MetricName, MetricOptions] = Field(
        default_factory=dict, description="Per-metric options, e.g. {p99_ttft_ms: {margin: 10%}}."
    )

    @model_validator(mode="before")
    @classmethod
    def _per_metric(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        options = dict(data.get("options") or {})
        secondary = data.get("secondary")
        if isinstance(secondary, dict):
            options.update({k: v for k, v in secondary.items() if v is not None})
            data["secondary"] = list(secondary)
        primary = data.get("primary", "output_throughput")
        for key in [k for k in data if k not in _METRICS_KEYS]:
            if isinstance(data[key], dict):
                options[key] = data.pop(key)
                listed = list(data.get("secondary") or [])
                if key != primary and key not in listed:
                    data["secondary"] = [*listed, key]
        if options:
            data["options"] = options
        return data

    def margins(self) -> dict[str, float]:
        """Metric → its own margin, for those that set one."""
        return {k: o.margin for k, o in self.options.items() if o.margin is not None}


#: The most runs of one cell per arm a spec may allow (verify.max_runs): past it, repetition is
#: no longer what resolves a change (report.wording.verdicts.RUNS_WORTH_RUNNING).
MAX_RUNS = 20


class VerifySpec(StrictModel):
    """Repeat-to-verify policy (VERDICTS.md). Fixed before the run; never moved after it."""

    threshold: Percent = Field(0.03, description="Practical margin: smaller changes are 'same'.")
    surprise: Percent = Field(0.10, description="|change| above this gets an explanation check.")
    noise: Percent | None = Field(
        None,
        description="Declared spread of one run (relative σ): a floor on the noise that a "
        "few df of measured repeats cannot shrink.",
    )
    noise_from: str | None = Field(
        "auto",
        description="Noise measured before, pooled with this run's by degrees of freedom, so "
        "few runs here are not judged as if nothing were known about the noise. auto (the "
        "default): the newest earlier real runs of the same engine, model and hardware in "
        "the results store (a rehearsal borrows nothing); none (or null): nothing; else an "
        "earlier run directory of the same engine, model and hardware (path relative to the "
        "spec). Its launch-to-launch part too where the earlier run is a calibration run "
        "(design: fixed). Only as good as that run's noise is this one's: same engine build, "
        "same kind of node.",
    )
    max_runs: int = Field(
        3,
        ge=1,
        le=MAX_RUNS,
        description="Most runs of one cell per arm, not counting warm runs set aside.",
    )
    budget: Duration | None = Field(None, description="GPU time the reruns may spend.")
    warm_rerun: bool = Field(True, description="Rerun surprising cells on the still-warm server.")
    fresh_server: bool = Field(True, description="Rerun on a freshly launched server when needed.")
    aa: bool = Field(False, description="A/A: rerun the baseline on a fresh server to measure σ.")
    bisect: int = Field(
        1,
        ge=0,
        le=4,
        description="Midpoints the policy may add between the grid points enclosing a "
        "crossover bracket (adjacent confident cells of opposite sign, no point between "
        "them): each is a new cell at the bracket's geometric midpoint for the baseline and "
        "the crossing candidate, run twice on a stage-2 relaunch of their groups, within "
        "max_runs' rounds and the budget. 0: off.",
    )
    design: Literal["adaptive", "fixed"] = Field(
        "adaptive",
        description="adaptive: the policy reruns what the data leave open. fixed: a "
        "calibration run, every cell exactly max_runs times, each run on its own launch, "
        "nothing chosen by the data (no warm reruns, checks or bisection) and judged once at "
        "the end. A later run's verify.noise_from pools a fixed design's launch-to-launch "
        "noise too, which it cannot do with an adaptive run's (its stopping leaves that "
        "estimate biased low).",
    )
    confidence: Percent = Field(
        0.95, description="Confidence of every verdict and finding, above 50% and below 100%."
    )
    failure_rate: Percent = Field(
        0.01,
        description="An arm failing more requests than this cannot be called better in that cell.",
    )

    @model_validator(mode="after")
    def _fixed_design(self) -> VerifySpec:
        return fixed_design_rules(self)

    def noise_dir(self) -> str | None:
        """The earlier run `noise_from` names, or None for `auto` (decided when a run starts,
        `store.prior`), `none` and null."""
        return None if self.noise_from in (None, "auto", "none") else self.noise_from


class LimitsSpec(StrictModel):
    startup_timeout: Duration = Field(1800.0, gt=0)
    cell_timeout: Duration = Field(1200.0, gt=0)
    request_timeout: Duration = Field(600.0, gt=0)


class EstimateSpec(StrictModel):
    """Optional time estimates for the plan's cost line."""

    launch: Duration | None = Field(None, description="Server start to healthy.")
    cell: Duration | None = Field(None, description="One cell measured once.")


class CorrectnessSpec(StrictModel):
    """Before measuring, every arm answers the same seeded prompts greedily; agreement with the
    baseline below `floor` marks the arm suspect."""

    enabled: bool = True
    prompts: int = Field(8, ge=1)
    input_len: int = Field(64, ge=1)
    max_new_tokens: int = Field(32, ge=1)
    floor: Percent = Field(0.9, description="Share of identical tokens required.")


class RehearsalSpec(StrictModel):
    """How `--rehearse` simulates this experiment."""

    profile: Profile | str | None = Field(
        None, description="A simulator profile, inline or a file path relative to the spec."
    )
    time_scale: float = Field(
        1.0,
        ge=1,
        le=1000,
        description="Simulator runs this much faster; "
        "measured times are converted back (the report says so).",
    )
    stream_interval: int | None = Field(
        None,
        ge=1,
        description="Tokens per streamed event on the simulator (keeps the client "
        "off the critical path at high dilated rates; the report says so).",
    )
    note: str | None = Field(None, description="Where the profile's numbers come from.")
    seed: int | str | None = Field(
        None,
        description="Seed of the simulator's noise draws (default: the experiment name); the "
        "same spec and seed draw the same noise, another seed another sample of it.",
    )


class SloSpec(StrictModel):
    """A service-level bound: the report gives each arm's best throughput at the points where
    its mean meets every bound (e.g. mean_tpot_ms max 200 is 5 tok/s per user)."""

    metric: MetricName
    max: float | None = Field(None, description="Upper bound, in the metric's unit.")
    min: float | None = Field(None, description="Lower bound, in the metric's unit.")

    @model_validator(mode="after")
    def _a_bound(self) -> SloSpec:
        if self.max is None and self.min is None:
            raise ValueError("give max or min")
        return self


Combination = dict[str, Any]


class Spec(StrictModel):
    """An experiment proposal."""

    model_config = ConfigDict(extra="forbid", title="matrixrun experiment spec")

    experiment: Slug
    title: str
    hypothesis: str | None = None
    notes: str | None = Field(
        None, description="Your explanation and next steps: the report shows them as written."
    )
    slo: list[SloSpec] = Field(
        default_factory=list,
        description="Service-level bounds; each must be the primary or a secondary metric.",
    )
    model: Annotated[list[ModelSpec], BeforeValidator(_one_or_list), Field(min_length=1)]
    hardware: Annotated[list[HardwareSpec], BeforeValidator(_one_or_list), Field(min_length=1)]
    engine: EngineSpec = Field(default_factory=EngineSpec)
    arms: dict[Slug, ArmSpec] = Field(
        min_length=2, description="Arm name -> server flags; the first arm is the baseline."
    )
    baseline: str | None = Field(None, description="Baseline arm; default: the first arm.")
    sweep: SweepSpec = Field(default_factory=SweepSpec)

    @field_validator("sweep", mode="before")
    @classmethod
    def _sweep_not_empty(cls, data: Any) -> Any:
        # as `concurrency: []` is refused: a written-out empty sweep is a mistake, not 1 cell
        if isinstance(data, dict) and not data:
            raise ValueError(
                "is empty: name at least one axis, e.g. `sweep: {concurrency: [1, 64]}` (leave "
                "sweep out for the one point concurrency 1)"
            )
        return data

    exclude: list[Combination] = Field(
        default_factory=list,
        description="Combinations to drop, e.g. {concurrency: 1024, "
        "hardware: 4xH100} (keys: axes, model, hardware; all named keys must match).",
    )
    include: list[Combination] = Field(
        default_factory=list,
        description="Combinations to add outside the product; unnamed axes take their only value.",
    )
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    metrics: MetricsSpec = Field(default_factory=MetricsSpec)
    verify: VerifySpec = Field(default_factory=VerifySpec)
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    estimate: EstimateSpec = Field(default_factory=EstimateSpec)
    correctness: CorrectnessSpec = Field(default_factory=CorrectnessSpec)
    rehearsal: RehearsalSpec = Field(default_factory=RehearsalSpec)

    @property
    def models(self) -> list[ModelSpec]:
        return self.model

    @property
    def hardwares(self) -> list[HardwareSpec]:
        return self.hardware

    @property
    def baseline_arm(self) -> str:
        return self.baseline or next(iter(self.arms))

    @property
    def candidate_arms(self) -> list[str]:
        return [a for a in self.arms if a != self.baseline_arm]

    def axis_values(self) -> dict[str, list[Any]]:
        """Every axis with its values: model/hardware labels, server.<flag>, client axes
        (an unswept client axis has the workload's single value)."""
        axes: dict[str, list[Any]] = {
            "model": [m.label for m in self.models],
            "hardware": [h.label for h in self.hardwares],
        }
        for flag, values in self.sweep.server.items():
            axes[f"server.{flag}"] = list(values)
        for axis in CLIENT_AXES:
            values = getattr(self.sweep, axis)
            if values is None:
                values = [getattr(self.workload, axis)] if axis != "concurrency" else [1]
            axes[axis] = list(values)
        return axes

    def main_axis(self) -> str:
        if self.sweep.axis:
            return self.sweep.axis
        for axis in CLIENT_AXES:
            values = getattr(self.sweep, axis)
            if values is not None and len(values) > 1:
                return axis
        return "concurrency"

"""Performance profiles for the simulator: pure data and arithmetic, no clocks or I/O.

A profile is a base `Curve` plus rules keyed by server-flag values, so an arm's flags select its
behaviour exactly as they would on a real server (`moe_runner_backend: flashinfer_cutedsl` picks
the CuteDSL curve). Profiles are YAML/JSON files or inline mappings in a spec's `rehearsal` block.

    name: demo
    base:
      step_ms: [[1, 20], [64, 30], [256, 60]]   # decode step time vs running batch size
      prefill_ms_per_token: 0.02
      noise: 0.01                               # relative sd of each step (seeded)
    rules:
      - when: {moe_runner_backend: flashinfer_cutedsl}
        set: {step_ms: [[1, 18], [64, 40], [256, 120]]}
"""

from __future__ import annotations

import bisect
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from ruamel.yaml import YAML

FlagScalar = str | int | float | bool | None

#: Names the simulator reads under another (SGLang's and vLLM's spellings of one setting): a
#: launch's `--tensor-parallel-size 8` is `tp_size`, and so is a rule's `when: {tp: 8}`.
ALIASES = {
    "tp": "tp_size",
    "tensor_parallel_size": "tp_size",
    "dp": "dp_size",
    "data_parallel_size": "dp_size",
    "ep": "ep_size",
    "expert_parallel_size": "ep_size",
    "pp": "pp_size",
    "pipeline_parallel_size": "pp_size",
    "model": "model_path",
}


class Curve(BaseModel):
    """How long one engine iteration takes, as a function of the running batch."""

    model_config = ConfigDict(extra="forbid")

    step_ms: list[tuple[float, float]] = Field(
        default_factory=lambda: [(1.0, 20.0), (256.0, 60.0)],
        description="Decode step time (ms) at running batch sizes: piecewise-linear points "
        "(batch, ms), sorted by batch; flat below the first point, linear past the last.",
    )
    prefill_ms_per_token: float = Field(
        0.0, ge=0, description="Prefill cost per prompt token, added to the step that admits it."
    )
    prefill_base_ms: float = Field(0.0, ge=0, description="Fixed cost of a step that prefills.")
    noise: float = Field(0.0, ge=0, description="Relative sd of each step time (log-normal).")
    instance_noise: float = Field(
        0.0, ge=0, description="Relative sd of a per-launch speed factor (server-to-server spread)."
    )
    compile_penalty_ms: float = Field(
        0.0,
        ge=0,
        description="One-off cost the first time a batch-size bucket (power of two) "
        "is seen: models first-time JIT compilation.",
    )
    chunked_prefill_size: int | None = Field(
        None,
        ge=1,
        description="Most prompt tokens one iteration admits (as SGLang's "
        "--chunked-prefill-size; the server flag overrides; a longer prompt is admitted alone). "
        "None: no limit.",
    )
    max_running_requests: int | None = Field(
        None, ge=1, description="Requests beyond this wait in a queue (as --max-running-requests)."
    )

    @field_validator("step_ms")
    @classmethod
    def _sorted_points(cls, pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if not pts:
            raise ValueError("needs at least one (batch, ms) point")
        if any(b <= 0 or ms <= 0 for b, ms in pts):
            raise ValueError("batch sizes and step times must be positive")
        xs = [b for b, _ in pts]
        if xs != sorted(xs) or len(set(xs)) != len(xs):
            raise ValueError("points must be sorted by strictly increasing batch size")
        return pts

    def step_time_ms(self, batch: int) -> float:
        """Decode step time for `batch` running requests, before noise."""
        pts = self.step_ms
        if batch <= pts[0][0] or len(pts) == 1:
            return pts[0][1]
        xs = [b for b, _ in pts]
        i = bisect.bisect_left(xs, batch)
        if i >= len(pts):  # extrapolate along the last segment
            (x0, y0), (x1, y1) = pts[-2], pts[-1]
        else:
            (x0, y0), (x1, y1) = pts[i - 1], pts[i]
        return max(y0 + (y1 - y0) * (batch - x0) / (x1 - x0), 1e-3)

    def prefill_time_ms(self, prompt_tokens: int) -> float:
        return (
            self.prefill_base_ms + self.prefill_ms_per_token * prompt_tokens
            if prompt_tokens
            else 0.0
        )


class Rule(BaseModel):
    """Overrides applied when every `when` flag equals the server's value for it."""

    model_config = ConfigDict(extra="forbid")

    when: dict[str, FlagScalar]
    set: dict[str, Any]


class Effects(BaseModel):
    """Failure modes to rehearse how the harness copes (all off by default)."""

    model_config = ConfigDict(extra="forbid")

    slow_start_s: float = Field(
        0.0, ge=0, description="Seconds before /health_generate answers 200."
    )
    crash_after_s: float | None = Field(None, gt=0, description="Process exits after this.")
    hang_after_s: float | None = Field(None, gt=0, description="Stops emitting tokens after this.")
    error_rate: float = Field(0.0, ge=0, le=1, description="Share of requests answered 500.")
    hold_rate: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of requests read and never answered (no byte until the client "
        "goes away): requests lost as stale keep-alive connections lost them on the H200.",
    )
    malformed_rate: float = Field(0.0, ge=0, le=1, description="Share of streams with bad JSON.")
    diverge_after_tokens: int | None = Field(
        None,
        ge=0,
        description="Greedy output departs from the reference tokens after this many: "
        "models an arm that computes something else (the correctness gate must catch it).",
    )
    abort_rate: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of requests the scheduler aborts after their first token: SGLang's "
        'normal-looking last event with finish_reason {"type": "abort"}, then [DONE].',
    )
    stream_error_rate: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of streams that end after their first token in SGLang's in-stream "
        'error event, data: {"error": {...}}, then [DONE].',
    )
    flush_refusals: int = Field(
        0,
        ge=0,
        description="The first N /flush_cache calls answer 400 as a busy server does (a "
        "server still aborting a capped cell's requests); the harness must retry or say so.",
    )
    health_check_s: float = Field(
        1.0,
        ge=0,
        description="How long /health_generate takes to say 200 once ready: SGLang's handler "
        "sleeps 1 s before it looks (modelled seconds, divided by the time scale).",
    )


class Profile(BaseModel):
    """A simulated engine: base curve, flag-keyed rules, effects."""

    model_config = ConfigDict(extra="forbid")

    name: str = "default"
    base: Curve = Field(default_factory=Curve)
    rules: list[Rule] = Field(default_factory=list)
    effects: Effects = Field(default_factory=Effects)
    effect_rules: list[Rule] = Field(
        default_factory=list, description="Like rules, but override fields of `effects`."
    )
    stream_interval: int = Field(
        1, ge=1, description="Tokens per SSE event unless the server flag --stream-interval is set."
    )

    @model_validator(mode="after")
    def _rules_apply(self) -> Profile:
        # Catch a typo'd or invalid override when the profile loads, not when an arm whose
        # flags happen to match it launches (each rule is checked applied alone to the base).
        for kind, rules, model, base in (
            ("rules", self.rules, Curve, self.base.model_dump()),
            ("effect_rules", self.effect_rules, Effects, self.effects.model_dump()),
        ):
            for i, rule in enumerate(rules):
                unknown = sorted(set(rule.set) - set(model.model_fields))
                if unknown:
                    raise ValueError(
                        f"{kind}[{i}].set: unknown field(s) {', '.join(unknown)}; "
                        f"known: {', '.join(model.model_fields)}"
                    )
                try:
                    model.model_validate({**base, **rule.set})
                except ValidationError as e:
                    raise ValueError(f"{kind}[{i}].set: {e.errors()[0]['msg']}") from e
        return self

    def resolve(self, flags: dict[str, Any]) -> tuple[Curve, Effects]:
        """The curve and effects for a server launched with `flags` (names in snake_case)."""
        curve = self.base.model_dump()
        for rule in self.rules:
            if _matches(rule.when, flags):
                curve.update(rule.set)
        effects = self.effects.model_dump()
        for rule in self.effect_rules:
            if _matches(rule.when, flags):
                effects.update(rule.set)
        return Curve.model_validate(curve), Effects.model_validate(effects)


def _norm(v: Any) -> str:
    """Compare flag values as a command line would spell them: `8`, `8.0` and `"8"` are equal,
    booleans and strings ignore case."""
    if isinstance(v, bool):
        return str(v).lower()
    try:
        return repr(float(v))
    except (TypeError, ValueError):
        return str(v).lower()


def _matches(when: dict[str, FlagScalar], flags: dict[str, Any]) -> bool:
    """Every `when` flag (dashes or underscores) is set to the given value."""
    for key, val in when.items():
        name = key.replace("-", "_")
        name = ALIASES.get(name, name)
        if name not in flags or _norm(flags[name]) != _norm(val):
            return False
    return True


def bundled() -> Profile:
    """The profile a rehearsal uses when its spec brings none (`sim/profiles/default.yaml`,
    the simulator's own default too): a mid-size MoE on one node, with noise, so a rehearsal
    without a profile still has run-to-run spread to measure. Reading a packaged file is the
    one I/O here."""
    text = (
        resources.files("matrixrun.sim")
        .joinpath("profiles/default.yaml")
        .read_text(encoding="utf-8")
    )
    return Profile.model_validate(YAML(typ="safe").load(text))


def as_launched(flags: dict[str, Any]) -> dict[str, Any]:
    """A spec's flags as the simulator reads them off the command line: snake_case names
    through `ALIASES`, `false`/None omitted (the launch renders no flag for them)."""
    out = {}
    for key, value in flags.items():
        if value is False or value is None:
            continue
        name = str(key).replace("-", "_")
        out[ALIASES.get(name, name)] = value
    return out


#: SGLang flags the simulator acts on by itself, with no profile rule (their defaults): arms
#: that differ in one of them behave differently (docs/simulator.md, the prefix cache).
NATIVE_FLAGS: dict[str, object] = {
    "schedule_policy": "fcfs",
    "disable_radix_cache": False,
    "max_total_tokens": None,
    "page_size": 1,
    "max_running_requests": None,
}


def same_behaviour(profile: Profile, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when servers launched with the spec flags `a` and `b` get the same curve and
    effects and the same native flags: the simulator cannot tell them apart, so a rehearsal
    measures only noise."""
    la, lb = as_launched(a), as_launched(b)
    if any(la.get(k, d) != lb.get(k, d) for k, d in NATIVE_FLAGS.items()):
        return False
    return profile.resolve(la) == profile.resolve(lb)

"""The simulator's pure performance model: curves, rules keyed by flags, effects, validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from matrixrun.core.profile import Curve, Effects, Profile, Rule


def curve(*pts: tuple[float, float], **kw: float) -> Curve:
    return Curve.model_validate({"step_ms": [list(p) for p in pts], **kw})


@pytest.mark.parametrize(
    ("batch", "ms"),
    [
        (1, 20.0),  # at the first point
        (0, 20.0),  # flat below it
        (32, 20 + 10 * 31 / 63),  # along the first segment
        (64, 30.0),  # exactly a point
        (160, 45.0),  # second segment
        (256, 60.0),
        (512, 100.0),  # linear past the last point, along the last segment
    ],
)
def test_step_time_is_piecewise_linear(batch: int, ms: float) -> None:
    assert curve((1, 20), (64, 30), (256, 60)).step_time_ms(batch) == pytest.approx(ms)


def test_single_point_curve_is_flat_and_extrapolation_stays_positive() -> None:
    assert curve((1, 12)).step_time_ms(1000) == 12
    falling = curve((1, 50), (2, 10))
    assert falling.step_time_ms(100) == pytest.approx(1e-3)


def test_prefill_cost() -> None:
    c = curve((1, 10), prefill_ms_per_token=0.5, prefill_base_ms=3)
    assert c.prefill_time_ms(0) == 0
    assert c.prefill_time_ms(100) == pytest.approx(53)


@pytest.mark.parametrize(
    "pts",
    [[], [[2, 10], [1, 20]], [[1, 10], [1, 20]], [[0, 10]], [[1, -5]]],
)
def test_bad_curves_are_rejected(pts: list[list[float]]) -> None:
    with pytest.raises(ValidationError):
        Curve.model_validate({"step_ms": pts})


def demo() -> Profile:
    return Profile.model_validate(
        {
            "name": "demo",
            "base": {"step_ms": [[1, 20], [256, 60]], "noise": 0.01},
            "rules": [
                {"when": {"moe_runner_backend": "flashinfer_cutedsl"}, "set": {"noise": 0.05}},
                {
                    "when": {"moe_runner_backend": "flashinfer_cutedsl", "tp_size": 8},
                    "set": {"step_ms": [[1, 18], [256, 120]]},
                },
                {"when": {"enable-dp-attention": True}, "set": {"max_running_requests": 64}},
            ],
            "effect_rules": [
                {"when": {"attention_backend": "bad"}, "set": {"diverge_after_tokens": 3}}
            ],
            "stream_interval": 4,
        }
    )


def test_resolve_without_matching_flags_is_the_base() -> None:
    c, e = demo().resolve({"moe_runner_backend": "cutlass", "tp_size": 8})
    assert c == demo().base and e == Effects()


def test_rules_apply_in_order_and_all_when_keys_must_match() -> None:
    p = demo()
    c, _ = p.resolve({"moe_runner_backend": "flashinfer_cutedsl", "tp_size": 4})
    assert c.noise == 0.05 and c.step_ms == [(1, 20), (256, 60)]
    c, _ = p.resolve({"moe_runner_backend": "flashinfer_cutedsl", "tp_size": 8})
    assert c.noise == 0.05 and c.step_ms == [(1, 18), (256, 120)]


@pytest.mark.parametrize(
    "flags",
    [
        {"moe_runner_backend": "FlashInfer_CuteDSL", "tp_size": "8"},  # case, string number
        {"moe_runner_backend": "flashinfer_cutedsl", "tp_size": 8.0},  # float spelling
    ],
)
def test_flag_values_compare_as_a_command_line_spells_them(flags: dict[str, object]) -> None:
    c, _ = demo().resolve(flags)
    assert c.step_ms == [(1, 18), (256, 120)]


def test_dashed_when_keys_match_snake_case_flags_and_bare_flags_are_true() -> None:
    c, _ = demo().resolve({"enable_dp_attention": True})
    assert c.max_running_requests == 64
    c, _ = demo().resolve({"enable_dp_attention": "true"})
    assert c.max_running_requests == 64


def test_effect_rules_override_effects() -> None:
    _, e = demo().resolve({"attention_backend": "bad"})
    assert e.diverge_after_tokens == 3 and e.error_rate == 0


def test_unknown_or_invalid_rule_fields_fail_at_load() -> None:
    with pytest.raises(ValidationError, match="unknown field"):
        Profile(rules=[Rule(when={"a": 1}, set={"step_time": 3})])
    with pytest.raises(ValidationError, match="effect_rules"):
        Profile(effect_rules=[Rule(when={"a": 1}, set={"error_rate": 2})])
    with pytest.raises(ValidationError, match="rules"):
        Profile(rules=[Rule(when={"a": 1}, set={"step_ms": [[2, 1], [1, 1]]})])


def test_profile_round_trips_through_json() -> None:
    p = demo()
    assert Profile.model_validate_json(p.model_dump_json()) == p


def test_bundled_default_profile_loads() -> None:
    from matrixrun.sim.cli import load_profile

    p = load_profile(None, None)
    assert p.name == "default"
    fast, _ = p.resolve({"moe_runner_backend": "flashinfer_cutedsl"})
    assert fast.step_time_ms(1) < p.base.step_time_ms(1)
    assert fast.step_time_ms(1024) > p.base.step_time_ms(1024)

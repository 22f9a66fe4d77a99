"""Spec loading: valid specs load; every mistake is reported as `path:line: key: message`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from matrixrun.core.errors import SpecError
from matrixrun.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
# the example spec without its estimate and rehearsal blocks (the cases below edit the rest)
EXAMPLE = (ROOT / "spec" / "glm5_cutedsl.yaml").read_text().split("\nestimate:")[0] + "\n"


def test_example_spec_loads_with_units_parsed() -> None:
    spec = load_spec(ROOT / "spec" / "glm5_cutedsl.yaml")
    assert spec.baseline_arm == "flashinfer_cutlass"
    assert spec.candidate_arms == ["flashinfer_cutedsl"]
    assert spec.arms["flashinfer_cutedsl"].flags == {"moe_runner_backend": "flashinfer_cutedsl"}
    assert spec.verify.threshold == pytest.approx(0.03)
    assert spec.verify.surprise == pytest.approx(0.10)
    assert spec.limits.startup_timeout == 1800
    assert math.isinf(spec.workload.request_rate)
    assert spec.workload.prompts_for(1) == 8  # min_prompts wins
    assert spec.workload.prompts_for(64) == 256
    assert spec.main_axis() == "concurrency"
    assert [m.label for m in spec.models] == ["GLM-5-NVFP4"]


def test_multi_axis_spec() -> None:
    spec = load_spec(ROOT / "tests" / "specs" / "multi.yaml")
    assert [h.label for h in spec.hardwares] == ["h200x8", "h200x4"]
    assert spec.sweep.server == {"chunked_prefill_size": [4096, 8192]}
    assert spec.verify.budget == 3600


def test_server_axis_nested_form_equals_dotted_form() -> None:
    dotted = EXAMPLE.replace(
        "sweep: {concurrency: [1, 10, 64, 256, 1024]}",
        "sweep: {concurrency: [1], server.chunked_prefill_size: [1, 2]}",
    )
    nested = EXAMPLE.replace(
        "sweep: {concurrency: [1, 10, 64, 256, 1024]}",
        "sweep: {concurrency: [1], server: {chunked_prefill_size: [1, 2]}}",
    )
    assert parse_spec(dotted).sweep == parse_spec(nested).sweep


def test_arm_long_form_with_launch_and_env() -> None:
    text = EXAMPLE.replace(
        "flashinfer_cutedsl: {moe_runner_backend: flashinfer_cutedsl}",
        "flashinfer_cutedsl: {flags: {moe_runner_backend: flashinfer_cutedsl}, "
        "launch: [/opt/other/bin/python, -m, sglang.launch_server], env: {A: '1'}}",
    )
    arm = parse_spec(text).arms["flashinfer_cutedsl"]
    assert arm.launch == ["/opt/other/bin/python", "-m", "sglang.launch_server"]
    assert arm.env == {"A": "1"} and arm.flags["moe_runner_backend"] == "flashinfer_cutedsl"


# (replace this, with that) -> the one expected message (line, key, fragment)
CASES = [
    ("workload:", "workoad:", 14, "workoad", "did you mean 'workload'?"),
    ("max_runs", "max_run", 17, "verify.max_run", "did you mean 'max_runs'?"),
    ("threshold: 3%", "threshold: three", 17, "verify.threshold", "not a percentage"),
    (
        "sweep: {concurrency",
        "sweep: {concurency",
        13,
        "sweep.concurency",
        "did you mean 'concurrency'?",
    ),
    ("kind: sglang", "kind: sglng", 9, "engine.kind", "did you mean 'sglang'?"),
    ("kind: sglang", "kind: sim", 9, "engine.kind", "sim is not an engine: keep the engine"),
    ("args: {tp: 8}", "args: {tp: 8}, tp: 8", 9, "engine.tp", "goes under engine.args"),
    ("count: 8", "cout: 8", 8, "hardware.cout", "did you mean 'count'?"),
    (
        "{path: /models/GLM-5-NVFP4, quantization: nvfp4}",
        "{quantization: nvfp4}",
        7,
        "model.path",
        "required key is missing",
    ),
    (
        "  flashinfer_cutedsl: {moe_runner_backend: flashinfer_cutedsl}\n",
        "",
        10,
        "arms",
        "at least one candidate arm",
    ),
    ("min_prompts: 8", "num_prompts: 8", 14, "workload", "give one of"),
    (
        "startup_timeout: 30m",
        "startup_timeout: 30 minutes",
        18,
        "limits.startup_timeout",
        "not a duration",
    ),
    (
        "primary: output_throughput",
        "primary: output_throughputt",
        16,
        "metrics.primary",
        "did you mean 'output_throughput'?",
    ),
    (
        "limits:",
        "exclude: [{concurency: 1024}]\nlimits:",
        18,
        "exclude.0.concurency",
        "did you mean 'concurrency'?",
    ),
    (
        "limits:",
        "exclude: [{concurrency: 7}]\nlimits:",
        18,
        "exclude.0.concurrency",
        "excludes nothing",
    ),
    ("limits:", "baseline: cutlass\nlimits:", 18, "baseline", "not one of the arms"),
    (
        "flashinfer_cutedsl: {moe_runner_backend: flashinfer_cutedsl}",
        "flashinfer_cutedsl: {flags: {moe_runner_backend: x}, lanch: [x]}",
        12,
        "arms.flashinfer_cutedsl.lanch",
        "did you mean 'launch'?",
    ),
    (
        "sweep: {concurrency: [1, 10, 64, 256, 1024]}",
        "sweep:\n  concurrency: [1]\n  server.chunked_prefill_size: 4096",
        15,
        "sweep.server.chunked_prefill_size",
        "expected a list of values",
    ),
    (
        "limits:",
        "rehearsal: {profile: {bse: {}}}\nlimits:",
        18,
        "rehearsal.profile.bse",
        "did you mean 'base'?",
    ),
    (
        "sweep: {concurrency: [1, 10, 64, 256, 1024]}",
        "sweep: {concurrency: [1, 1]}",
        13,
        "sweep.concurrency",
        "must not repeat",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "fragment"), CASES, ids=[c[3] for c in CASES]
)
def test_error_messages_name_file_line_and_key(
    old: str, new: str, line: int, key: str, fragment: str
) -> None:
    assert old in EXAMPLE
    with pytest.raises(SpecError) as info:
        parse_spec(EXAMPLE.replace(old, new, 1), "spec/x.yaml")
    issues = info.value.issues
    assert len(issues) == 1, [str(i) for i in issues]
    text = str(issues[0])
    assert text.startswith(f"spec/x.yaml:{line}: {key}: "), text
    assert fragment in text


def test_bad_yaml_syntax_has_line() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(EXAMPLE.replace("arms:", "arms: {"), "spec/x.yaml")
    assert str(info.value).startswith("spec/x.yaml:12: YAML syntax error")


def test_duplicate_key_is_an_error() -> None:
    with pytest.raises(
        SpecError, match=r"spec/x.yaml:3: YAML syntax error: duplicate key .experiment."
    ):
        parse_spec(EXAMPLE.replace("title:", "experiment: x\ntitle:"), "spec/x.yaml")


def test_several_errors_all_reported_in_line_order() -> None:
    text = EXAMPLE.replace("max_runs", "max_run").replace("count: 8", "cout: 8")
    with pytest.raises(SpecError) as info:
        parse_spec(text, "s.yaml")
    assert [i.line for i in info.value.issues] == [8, 17]


def test_second_list_entry_located() -> None:
    text = EXAMPLE.replace(
        'hardware: {gpu: NVIDIA RTX PRO 6000 Blackwell, count: 8, compute_capability: "12.0"}',
        "hardware:\n  - {gpu: H100, count: 8}\n  - {gpu: H200, cont: 8}",
    )
    with pytest.raises(SpecError) as info:
        parse_spec(text, "s.yaml")
    assert str(info.value).startswith("s.yaml:10: hardware.1.cont: unknown key")


def test_missing_file_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read the spec"):
        load_spec(tmp_path / "nope.yaml")


def test_profile_file_relative_to_spec(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("name: p\nbase: {step_ms: [[1, 10], [8, 20]]}\n")
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(EXAMPLE.replace("limits:", "rehearsal: {profile: p.yaml}\nlimits:"))
    spec = load_spec(spec_path)
    assert not isinstance(spec.rehearsal.profile, str)
    assert spec.rehearsal.profile is not None and spec.rehearsal.profile.name == "p"


def test_warmup_cell_is_a_copy_of_the_cell_and_not_with_duration() -> None:
    """`warmup_requests: cell` parses; with duration sizing (no fixed request count) it is one
    sentence that says what to give instead; other strings are refused."""
    base = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()
    spec = parse_spec(base.replace("warmup_requests: 1", "warmup_requests: cell"))
    assert spec.workload.warmup_requests == "cell"
    sized = "num_prompts: 8, warmup_requests: 1"
    timed = base.replace(sized, "duration: 30s, warmup_requests: cell")
    with pytest.raises(SpecError, match=r"warmup_requests: cell copies .*give .* a number"):
        parse_spec(timed)
    with pytest.raises(SpecError, match="warmup_requests"):
        parse_spec(base.replace("warmup_requests: 1", "warmup_requests: wave"))


def test_a_null_string_inside_an_inline_profile_is_located(tmp_path: Path) -> None:
    """Found by tests/test_robust_cli.py's fuzzing: `profile: {name: }` was dropped as if it were
    the `str` branch of `Profile | str`, and validate exited 2 without a word."""
    text = (Path(__file__).parent / "specs" / "tiny.yaml").read_text()
    path = tmp_path / "s.yaml"
    path.write_text(text.replace("    name: tiny\n", "    name: \n"))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    (issue,) = err.value.issues
    assert issue.key == "rehearsal.profile.name" and issue.line == 20


# one rule for every percentage key: `10%` or `0.10`; a plain number of 1 or more is refused
PERCENT_KEYS = [
    ("threshold: 3%", "threshold: 10", 17, "verify.threshold", "write 10% or 0.10"),
    ("surprise: 10%", "surprise: 1.5", 17, "verify.surprise", "1.5% or 0.015"),
    ("threshold: 3%", "threshold: 3%, confidence: 95", 17, "verify.confidence", "95% or 0.95"),
    ("threshold: 3%", "threshold: 3%, noise: 2", 17, "verify.noise", "write 2% or 0.02"),
    ("threshold: 3%", "threshold: 3%, failure_rate: 1", 17, "verify.failure_rate", "(or 100%)"),
    ("limits:", "correctness: {floor: 90}\nlimits:", 18, "correctness.floor", "90% or 0.90"),
    (
        "primary: output_throughput",
        "primary: output_throughput, p99_ttft_ms: {margin: 10}",
        16,
        "metrics.p99_ttft_ms.margin",
        "write 10% or 0.10",
    ),
    (
        "secondary: [mean_tpot_ms, mean_itl_ms, p99_ttft_ms]",
        "secondary: {mean_tpot_ms: null, p99_ttft_ms: {margin: 150%}}",
        16,
        "metrics.secondary.p99_ttft_ms.margin",
        "150% is out of range",
    ),
    ("threshold: 3%", "threshold: 3%, confidence: 40%", 17, "verify.confidence", "above 50%"),
]


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "fragment"), PERCENT_KEYS, ids=[c[3] for c in PERCENT_KEYS]
)
def test_percentages_one_rule_for_every_key(
    old: str, new: str, line: int, key: str, fragment: str
) -> None:
    test_error_messages_name_file_line_and_key(old, new, line, key, fragment)


@pytest.mark.parametrize(
    ("written", "fraction"),
    [("10%", 0.10), ("0.10", 0.10), ("1.5%", 0.015), ("0.5", 0.5), ("95%", 0.95)],
)
def test_percentages_percent_sign_or_fraction(written: str, fraction: float) -> None:
    text = EXAMPLE.replace("threshold: 3%", "threshold: 3%, confidence: 95%").replace(
        "primary: output_throughput",
        f"primary: output_throughput, p99_ttft_ms: {{margin: {written}}}",
    )
    spec = parse_spec(text)
    assert spec.metrics.margins()["p99_ttft_ms"] == pytest.approx(fraction)
    assert spec.verify.confidence == pytest.approx(0.95)

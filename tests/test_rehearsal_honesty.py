"""Issue 33: a rehearsal says what it can show before it runs. A profile that cannot tell the
arms apart is named (plan, run, report), a misspelt rule key is refused like any misspelt
flag, a spec without a profile runs faster than real time and `plan` says how long it takes,
the seed is recorded and Reproduce names the real spec path, and a vLLM rehearsal shows vLLM's
flags. The end-to-end test runs the real simulator and the real CLI in a scratch directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from matrixrun.engines.sim import launch_seed, rehearsal_engine
from matrixrun.plan import expand
from matrixrun.plan.rehearsal import blind_pairs, rehearsal_setup, wall_seconds
from matrixrun.plan.render import plan_text
from matrixrun.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent

OWN = """\
experiment: vllm-mnbt
title: max_num_batched_tokens 2048 vs 8192 on vLLM
model: {path: /models/llama}
hardware: {gpu: NVIDIA H200, count: 1}
engine: {kind: vllm, args: {tp: 1}}
arms:
  mnbt2048: {max_num_batched_tokens: 2048}
  mnbt8192: {max_num_batched_tokens: 8192}
sweep: {concurrency: [1, 16, 64, 256]}
workload: {dataset: random, input_len: 512, output_len: 128, num_prompts: 256}
metrics: {primary: output_throughput, secondary: [p99_ttft_ms]}
verify: {threshold: 3%, max_runs: 3}
"""

RULE = """\
rehearsal:
  profile:
    base: {step_ms: [[1, 20], [256, 60]], noise: 0.02}
    rules:
      - when: {KEY: 8192}
        set: {step_ms: [[1, 19], [256, 50]]}
"""


def mr(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "MATRIXRUN_FLAGS": "shipped", "PYTHONPATH": str(ROOT)},
    )


def test_plan_warns_when_the_profile_cannot_tell_the_arms_apart() -> None:
    spec = parse_spec(OWN)
    text = plan_text(spec, expand(spec))
    assert "warning: the bundled profile has no rule that tells mnbt8192 from mnbt2048" in text
    assert "(they differ in max_num_batched_tokens)" in text
    assert "- when: {max_num_batched_tokens: 8192}" in text  # the rule to write
    ruled = parse_spec(OWN + RULE.replace("KEY", "max_num_batched_tokens"))
    assert blind_pairs(expand(ruled), rehearsal_setup(ruled)) == []
    assert "warning" not in plan_text(ruled, expand(ruled)).split("rehearsal (--rehearse)")[1]
    example = load_spec(ROOT / "spec" / "glm5_cutedsl.yaml")
    assert blind_pairs(expand(example), rehearsal_setup(example)) == []


def test_parallelism_aliases_are_one_setting_for_a_rule() -> None:
    spec = parse_spec(
        OWN.replace("mnbt2048: {max_num_batched_tokens: 2048}", "tp1: {tp: 1}")
        .replace("mnbt8192: {max_num_batched_tokens: 8192}", "tp2: {tp: 2}")
        .replace("engine: {kind: vllm, args: {tp: 1}}", "engine: {kind: vllm}")
        + RULE.replace("KEY", "tensor_parallel_size").replace("8192", "2")
    )
    assert blind_pairs(expand(spec), rehearsal_setup(spec)) == []


def test_a_spec_without_a_profile_runs_faster_and_says_how_long(tmp_path: Path) -> None:
    spec = parse_spec(OWN)
    setup = rehearsal_setup(spec)
    assert setup.bundled and setup.profile.name == "default" and setup.profile.base.noise > 0
    assert setup.time_scale > 1 and setup.stream_interval == 4
    wall = wall_seconds(spec, expand(spec), setup)
    assert 30 < wall.first_pass_s < wall.most_s
    line = plan_text(spec, expand(spec)).split("rehearsal (--rehearse): ")[1].splitlines()[0]
    assert f"{setup.time_scale:g}× faster than modelled" in line and "about " in line
    # the spec's own choice is kept, and a matrix the client cannot follow slows it down
    assert rehearsal_setup(parse_spec(OWN + "rehearsal: {time_scale: 1}")).time_scale == 1
    small = parse_spec(OWN.replace("[1, 16, 64, 256]", "[1, 32]"))
    big = parse_spec(
        OWN.replace("[1, 16, 64, 256]", "[1, 1024]").replace(
            "num_prompts: 256", "num_prompts: 1024"
        )
    )
    assert rehearsal_setup(big).time_scale < rehearsal_setup(small).time_scale
    # with a profile of its own, a spec runs at its own time scale (default real time)
    own = parse_spec(OWN + RULE.replace("KEY", "max_num_batched_tokens"))
    assert rehearsal_setup(own).time_scale == 1 and not rehearsal_setup(own).bundled


def test_a_misspelt_rule_key_is_refused_with_file_line_and_did_you_mean(tmp_path: Path) -> None:
    spec = tmp_path / "x.yaml"
    spec.write_text(OWN + RULE.replace("KEY", "max_num_batched_tokns"))
    res = mr("validate", str(spec))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{spec}:17: rehearsal.profile.rules.0.when.max_num_batched_tokns:" in res.stderr
    assert "did you mean 'max_num_batched_tokens'" in res.stderr
    # in a profile file: located at the spec's rehearsal.profile, naming the rule in the file
    (tmp_path / "p.yaml").write_text(
        "rules:\n  - when: {max_num_batched_tokns: 8192}\n    set: {noise: 0.01}\n"
    )
    spec.write_text(OWN + "rehearsal: {profile: p.yaml}\n")
    res = mr("validate", str(spec))
    assert res.returncode == 2 and "p.yaml: rules[0].when.max_num_batched_tokns" in res.stderr
    # a real flag no launch sets: the rule never applies, a warning
    spec.write_text(OWN + RULE.replace("KEY", "max_num_seqs"))
    res = mr("validate", str(spec))
    assert res.returncode == 0 and "no launch of this spec sets 'max_num_seqs'" in res.stderr


def test_identical_arms_warn_and_an_empty_sweep_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "x.yaml"
    spec.write_text(OWN.replace("{max_num_batched_tokens: 8192}", "{max_num_batched_tokens: 2048}"))
    res = mr("validate", str(spec))  # a warning: an A/A pair can be meant (verify.aa is the way)
    assert res.returncode == 0
    assert f"{spec}:8: arms.mnbt8192: warning: has the same flags" in res.stderr
    spec.write_text(OWN.replace("sweep: {concurrency: [1, 16, 64, 256]}", "sweep: {}"))
    res = mr("validate", str(spec))
    assert res.returncode == 2 and f"{spec}:9: sweep: is empty" in res.stderr


def test_the_seed_is_the_spec_s_and_fixes_every_launch_s_draws() -> None:
    spec = parse_spec(OWN)
    group = expand(spec).groups[0]
    first = rehearsal_engine(spec, spec.experiment).launch(group, "127.0.0.1", 1)
    again = rehearsal_engine(spec, spec.experiment).launch(group, "127.0.0.1", 1)
    seed = first.argv[first.argv.index("--seed") + 1]
    assert seed == again.argv[again.argv.index("--seed") + 1]
    assert int(seed) == launch_seed("vllm-mnbt", group.group_id, 1)
    other = parse_spec(OWN + "rehearsal: {seed: 7}")
    moved = rehearsal_engine(other, other.experiment).launch(group, "127.0.0.1", 1)
    assert moved.argv[moved.argv.index("--seed") + 1] == str(launch_seed("7", group.group_id, 1))
    # a vLLM rehearsal renders vLLM's spelling, as `plan` and a GPU node do
    assert "--tensor-parallel-size" in first.argv and "--tp-size" not in first.argv


TINY_OWN = (
    OWN.replace("[1, 16, 64, 256]", "[1, 4]")
    .replace(
        "input_len: 512, output_len: 128, num_prompts: 256",
        "input_len: 16, output_len: 8, num_prompts: 8",
    )
    .replace(
        "verify: {threshold: 3%, max_runs: 3}",
        "verify: {threshold: 3%, max_runs: 1}\ncorrectness: {enabled: false}",
    )
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_own_spec_rehearsal_says_what_it_cannot_show(tmp_path: Path) -> None:
    (tmp_path / "myspec").mkdir()
    (tmp_path / "myspec" / "x.yaml").write_text(TINY_OWN)
    res = mr("run", "myspec/x.yaml", "--rehearse", "--out", "runs/r", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    err = res.stderr
    assert err.index("warning: the bundled profile has no rule") < err.index("launching")
    assert not (tmp_path / "reports").exists()  # the committed reports are left alone
    assert not (tmp_path / "runs" / "x.rehearsal.md").exists()  # --out DIR: everything in DIR
    doc = (tmp_path / "runs" / "r" / "report.md").read_text()
    head = doc[: doc.index("**Verdict on")]  # said before the verdict, on the first screen
    assert "**No rule of the simulator's profile tells `mnbt8192` from `mnbt2048`" in head
    assert "Profile: the bundled 'default' (the spec gives none)." in doc
    assert "nox -s matrix -- myspec/x.yaml --rehearse" in doc  # the real path, not spec/x.yaml
    assert "`rehearsal.seed`: `vllm-mnbt`" in doc and "draws the same noise again" in doc
    assert "--tensor-parallel-size" in doc and "--tp-size" not in doc
    settings = json.loads((tmp_path / "runs" / "r" / "settings.json").read_text())
    facts = settings["spec"]["rehearsal"]
    assert facts == {
        "profile": "default",
        "bundled": True,
        "seed": "vllm-mnbt",
        "blind": ["mnbt8192"],
    }
    assert settings["time_scale"] > 1 and settings["spec"]["spec_path"] == "myspec/x.yaml"


def test_the_readme_worked_example_validates_and_its_profile_tells_the_arms_apart(
    tmp_path: Path,
) -> None:
    """The README's own spec is what a newcomer copies first: it must validate, and its
    rehearsal must be able to show the change (no blind-profile warning)."""
    readme = (ROOT / "README.md").read_text()
    head = readme.split("## Your own spec", 1)[1]
    text = head.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "myspec").mkdir()
    (tmp_path / "myspec" / "mnbt.yaml").write_text(text)
    res = mr("validate", "myspec/mnbt.yaml", cwd=tmp_path)
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr
    plan = mr("plan", "myspec/mnbt.yaml", cwd=tmp_path)
    assert plan.returncode == 0 and "has no rule that tells" not in plan.stdout
    assert "rehearsal (--rehearse): the spec's profile, 5× faster than modelled" in plan.stdout

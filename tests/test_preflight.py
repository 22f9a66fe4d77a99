"""Before anything launches (issues 28 and 33): `run` and `plan` run `validate`'s flag check,
values included (type and choices from the engine's own declarations), and a missing engine is
one error, not one failed cell after another. Real CLI runs in subprocesses; no engine is
installed here, which is exactly the missing-engine case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(120)


def mr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
        env={**os.environ, "MATRIXRUN_FLAGS": "shipped", **(env or {})},
    )


def spec(tmp_path: Path, engine: str, arms: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        "experiment: t\ntitle: flags\nmodel: {path: /m, vocab_size: 32000}\n"
        "hardware: {gpu: NVIDIA H200, count: 1}\n"
        f"engine: {engine}\narms:\n{arms}"
        "sweep: {concurrency: [1, 2]}\nworkload: {input_len: 8, output_len: 4}\n"
    )
    return path


BAD_VLLM = "  a: {max_num_batched_tokens: lots}\n  b: {attention_backend: FLASH_ATTNN}\n"


@pytest.mark.parametrize("command", ["validate", "plan", "run"])
def test_bad_flag_values_are_refused_before_any_launch(tmp_path: Path, command: str) -> None:
    path = spec(tmp_path, "{kind: vllm}", BAD_VLLM)
    args = [command, str(path)] + (["--out", str(tmp_path / "run")] if command == "run" else [])
    res = mr(*args)
    assert res.returncode == 2, res.stderr
    assert f"{path}:7: arms.a.max_num_batched_tokens: --max-num-batched-tokens: 'lots' is not an " \
        "integer (nor a size such as 8k" in res.stderr  # fmt: skip
    assert f"{path}:8: arms.b.attention_backend: --attention-backend: 'FLASH_ATTNN' is not one " \
        "of its choices (did you mean 'FLASH_ATTN'?): auto, FLASH_ATTN," in res.stderr  # fmt: skip
    assert not (tmp_path / "run").exists()  # nothing started, nothing written


def test_good_values_pass_and_case_does_not_matter_where_the_engine_folds_it(
    tmp_path: Path,
) -> None:
    arms = "  a: {max_num_batched_tokens: 8k, attention_backend: flash_attn}\n  b: {}\n"
    res = mr("validate", str(spec(tmp_path, "{kind: vllm}", arms)))
    assert res.returncode == 0, res.stderr
    assert "NOT checked" not in res.stdout


def test_the_ok_line_says_which_values_were_not_checked(tmp_path: Path) -> None:
    """`served_model_name` takes any string: its name is checked, its value cannot be, and
    "flags checked" alone would claim more than was done."""
    arms = "  a: {served_model_name: x}\n  b: {}\n"
    res = mr("validate", str(spec(tmp_path, "{kind: sglang}", arms)))
    assert res.returncode == 0, res.stderr
    assert "flags checked against sglang 0.5.23" in res.stdout
    assert "the values of --served-model-name NOT checked" in res.stdout


def test_a_missing_engine_is_one_error_before_any_launch(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-venv" / "bin" / "vllm"
    engine = f"{{kind: vllm, launch: [{missing}, serve]}}"
    path = spec(tmp_path, engine, "  a: {}\n  b: {enforce_eager: true}\n")
    res = mr("run", str(path), "--out", str(tmp_path / "run"), "--ignore-hardware")
    assert res.returncode == 2, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, res.stderr
    assert (
        f"nothing launched: engine.launch [{missing} serve]: {missing} is not on PATH" in (lines[0])
        or f"{missing} does not exist" in lines[0]
    )
    assert "measured" not in res.stdout


def test_a_python_without_the_engine_module_is_named(tmp_path: Path) -> None:
    from matrixrun.engines.preflight import problem

    assert problem([sys.executable, "-m", "sglang.launch_server"]) == (
        f"{sys.executable} has no module 'sglang' (`-m sglang.launch_server`)"
    )
    assert problem([sys.executable, "-m", "matrixrun.sim"]) is None
    assert problem(["no-such-binary-anywhere", "serve"]) == "no-such-binary-anywhere is not on PATH"

"""The command engine: any OpenAI-compatible server from an argv with placeholders.

End to end it launches the simulator through `engine.kind: command` with `--strict-openai`,
which refuses fields outside OpenAI's completions API with 422 the way `transformers serve`
does, and sends text prompts made with a real `tokenizers` tokenizer.json built here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_runner import mr, read_results
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit

from matrixrun.core.errors import InputError
from matrixrun.engines import for_spec
from matrixrun.engines.command import CommandEngine, fill
from matrixrun.load.apis import request_body
from matrixrun.load.text_prompts import text_prompts
from matrixrun.plan import expand
from matrixrun.spec import EngineSpec, Spec, SpecError, load_spec

SIM_ARGV = [
    sys.executable, "-m", "matrixrun.sim", "--model-path", "{model}",
    "--host", "{host}", "--port={port}", "--strict-openai",
]  # fmt: skip


def word_tokenizer(path: Path, words: int = 3000) -> Path:
    """A real tokenizer.json: word-level, whitespace split, with [UNK]/[BOS] at the low end."""
    vocab = {"[UNK]": 0, "[BOS]": 1, **{f"w{i}": i + 2 for i in range(words)}}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = WhitespaceSplit()
    tok.add_special_tokens(["[UNK]", "[BOS]"])
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return path


def engine_block(strict: bool = True) -> str:
    return f"""
  kind: command
  launch: {json.dumps(SIM_ARGV)}
  ready_path: /health
  version_command: [{sys.executable}, -c, "print('sim-9.9')"]
  prompt_format: text
  strict_openai: {str(strict).lower()}"""


def spec_text(model_dir: Path, engine: str | None = None) -> str:
    return f"""
experiment: command-tiny
title: command engine against the simulator
model: {{path: {model_dir}}}
hardware: {{gpu: NVIDIA H200, count: 1}}
engine: {engine or engine_block()}
arms:
  serial: {{max_running_requests: 1}}
  batched: {{max_running_requests: 8}}
sweep: {{concurrency: [4]}}
workload: {{input_len: 12, output_len: 6, num_prompts: 8, warmup_requests: 1, seed: 3}}
metrics: {{primary: output_throughput}}
verify: {{threshold: 3%, max_runs: 1, noise: 2%}}
limits: {{startup_timeout: 60s, cell_timeout: 60s, request_timeout: 30s}}
correctness: {{enabled: true, prompts: 2, input_len: 8, max_new_tokens: 4}}
"""


def test_placeholders_fill_inside_arguments_and_leave_json_alone() -> None:
    out = fill(["--port={port}", '{"a": 1}', "{model}"], {"port": "7", "model": "/m"})
    assert out == ["--port=7", '{"a": 1}', "/m"]


def test_launch_renders_argv_then_arm_flags(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(spec_text(tmp_path / "model"))
    spec = load_spec(path)
    engine = for_spec(spec.engine)
    assert isinstance(engine, CommandEngine)
    group = expand(spec, "h").groups[1]
    launch = engine.launch(group, "127.0.0.1", 4321)
    assert launch.argv[:4] == [sys.executable, "-m", "matrixrun.sim", "--model-path"]
    assert launch.argv[4] == str(tmp_path / "model")
    assert "--port=4321" in launch.argv
    assert launch.argv[-2:] == ["--max-running-requests", "8"]
    assert launch.base_url == "http://127.0.0.1:4321"
    assert engine.health_path == "/health" and engine.api == "openai"
    assert engine.version({}) == "sim-9.9"
    assert engine.version({"version": "1.2"}) == "sim-9.9"  # the spec's command wins
    assert CommandEngine(EngineSpec(kind="command")).version({"version": "1.2"}) == "1.2"


def test_version_command_that_fails_is_unknown_not_guessed() -> None:
    engine = CommandEngine(
        EngineSpec(kind="command", launch=["x", "{port}"], version_command=["/no/such/bin"])
    )
    assert engine.version({}) is None


@pytest.mark.parametrize(
    ("engine_yaml", "message"),
    [
        ("{kind: command}", "kind command needs engine.launch"),
        ("{kind: command, launch: [srv, --port, '8000']}", "no {port} placeholder"),
    ],
)
def test_command_spec_without_a_usable_launch_is_refused(
    tmp_path: Path, engine_yaml: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(spec_text(tmp_path, engine_yaml))
    with pytest.raises(SpecError, match=message.replace("{", r"\{").replace("}", r"\}")):
        load_spec(path)


def test_text_prompts_have_exact_token_counts_and_are_reproducible(tmp_path: Path) -> None:
    model = word_tokenizer(tmp_path / "tok")
    ids = [[1000 + 37 * i + j for j in range(50)] for i in range(5)]
    first = text_prompts(str(model), ids, 20)
    assert [n for _, n in first] == [20] * 5
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    for text, _ in first:
        encoded = tok.encode(text, add_special_tokens=False).ids
        assert len(encoded) == 20 and min(encoded) >= 2  # no special token in a prompt
    assert text_prompts(str(model / "tokenizer.json"), ids, 20) == first


def test_text_prompts_without_a_tokenizer_say_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"tokenizer\.json.*model\.tokenizer"):
        text_prompts(str(tmp_path), [[1, 2, 3]], 3)


def test_strict_body_carries_only_openai_fields() -> None:
    body = json.loads(request_body("openai", "w1 w2", 4, "m", strict_openai=True))
    assert "ignore_eos" not in body and body["prompt"] == "w1 w2"
    assert json.loads(request_body("openai", [1, 2], 4, "m"))["ignore_eos"] is True


def _run(tmp_path: Path, text: str) -> tuple[int, str, Path]:
    spec = tmp_path / "cmd.yaml"
    spec.write_text(text)
    run_dir = tmp_path / "run"
    res = mr("run", str(spec), "--out", str(run_dir), "--report", str(tmp_path / "r.md"))
    return res.returncode, res.stderr, run_dir


@pytest.mark.slow
def test_command_engine_runs_a_strict_server_end_to_end(tmp_path: Path) -> None:
    model = word_tokenizer(tmp_path / "model")
    code, err, run_dir = _run(tmp_path, spec_text(model))
    assert code == 0, err[-3000:]
    ms = read_results(run_dir)
    assert {m.arm for m in ms} == {"serial", "batched"}
    assert all(m.error is None and m.metrics is not None for m in ms)
    assert all(m.metrics.completed == 8 for m in ms if m.metrics)
    records = [
        json.loads(line)
        for line in (run_dir / ms[0].requests_file).read_text().splitlines()  # type: ignore[operator]
    ]
    assert {r["in"] for r in records} == {12} and {r["out"] for r in records} == {6}
    env = json.loads((run_dir / "env.json").read_text())
    assert {s["version"] for s in env["servers"].values()} == {"sim-9.9"}  # the command's
    gates = [json.loads(p.read_text()) for p in (run_dir / "correctness").glob("*.json")]
    assert {g["arm"] for g in gates} == {"serial", "batched"}
    assert all(g["error"] is None and len(g["answers"]) == 2 for g in gates)
    assert not list((run_dir / "pids").glob("*.pid"))
    assert "SIMULATED" in (tmp_path / "r.md").read_text()  # the simulator says so in server info


@pytest.mark.slow
def test_non_strict_requests_to_a_strict_server_fail_with_its_422(tmp_path: Path) -> None:
    model = word_tokenizer(tmp_path / "model")
    code, _, run_dir = _run(tmp_path, spec_text(model, engine_block(strict=False)))
    assert code == 1
    ms = read_results(run_dir)
    assert ms and all(m.error and "422" in m.error and "ignore_eos" in m.error for m in ms)


def test_spec_model_accepts_command_kind() -> None:
    assert Spec.model_json_schema()["$defs"]["EngineSpec"]["properties"]["kind"]["enum"][3] == (
        "command"
    )

"""`matrixrun ingest` then `matrixrun report` on real sglang.bench_serving output files."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "bench_serving"


def mr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "matrixrun", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_ingest_then_report_renders_a_verdict(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = mr("ingest", str(GOLDEN / "fast_prefill.jsonl"), str(GOLDEN / "fast_decode.jsonl"),
             "--baseline", "fast_prefill", "--out", str(out), "--threshold", "5%")  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    ms = [Measurement.model_validate_json(x) for x in lines]
    assert {m.arm for m in ms} == {"fast_prefill", "fast_decode"}
    assert sorted({m.point["concurrency"] for m in ms}) == [1, 8, 64]
    assert all(m.client == "bench_serving" and not m.simulated for m in ms)
    settings = json.loads((out / "settings.json").read_text())
    analysis = settings["analysis"]
    assert analysis["baseline"] == "fast_prefill" and analysis["margin"] == 0.05
    assert "ingest" in json.loads((out / "ingest.json").read_text())["command"]

    report = mr("report", str(out), "-o", "-")
    assert report.returncode == 0, report.stderr
    text = report.stdout
    assert "SIMULATED" not in text
    assert "fast_decode" in text and "fast_prefill" in text
    # one run per cell and no declared noise: nothing can be decided, and it says so
    assert "undecided" in text and "inconclusive" not in text
    assert "matrixrun ingest" in text  # how to reproduce
    assert (out / "verdict.json").exists()


@pytest.mark.slow
def test_ingest_refuses_to_overwrite_and_unknown_baseline(tmp_path: Path) -> None:
    out = tmp_path / "run"
    files = [str(GOLDEN / "fast_prefill.jsonl"), str(GOLDEN / "fast_decode.jsonl")]
    bad = mr("ingest", *files, "--baseline", "nope", "--out", str(out))
    assert bad.returncode == 2 and "baseline arm 'nope' is not among the arms" in bad.stderr
    assert mr("ingest", *files, "--baseline", "fast_prefill", "--out", str(out)).returncode == 0
    again = mr("ingest", *files, "--baseline", "fast_prefill", "--out", str(out))
    assert again.returncode == 2 and "already holds results" in again.stderr


def test_bad_line_names_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    good = (GOLDEN / "fast_decode.jsonl").read_text().splitlines()
    broken.write_text(good[0] + "\n{not json\n")
    res = mr("ingest", str(broken), "--baseline", "fast_decode", "--out", str(tmp_path / "r"))
    assert res.returncode == 2
    assert f"{broken}:2:" in res.stderr


def test_declared_noise_lets_one_run_per_cell_decide(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = mr("ingest", str(GOLDEN / "fast_prefill.jsonl"), str(GOLDEN / "fast_decode.jsonl"),
             "--baseline", "fast_prefill", "--out", str(out), "--noise", "2%")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "settings.json").read_text())["analysis"]["noise"] == 0.02
    text = mr("report", str(out), "-o", "-").stdout
    # +26% against a declared 2% spread: decided, but provisional (n = 1, σ declared)
    assert "| better (n=1) | 1/1 |" in text and "declared" in text
    assert "Provisional: some of these cells rest on one run per arm." in text


def test_the_advised_point_field_option_exists_and_makes_an_axis(tmp_path: Path) -> None:
    """Lines of one point that ran different input lengths are refused with advice to pass
    --point-field; following the advice ingests them as separate points."""
    cand = [json.loads(x) for x in (GOLDEN / "fast_decode.jsonl").read_text().splitlines()]
    cand[1]["random_input_len"] = 1024
    path = tmp_path / "fast_decode.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in cand))
    args = [str(GOLDEN / "fast_prefill.jsonl"), str(path), "--baseline", "fast_prefill"]
    refused = mr("ingest", *args, "--out", str(tmp_path / "a"))
    assert refused.returncode == 2 and "pass --point-field random_input_len" in refused.stderr
    res = mr("ingest", *args, "--out", str(tmp_path / "b"), "--point-field", "random_input_len")
    assert res.returncode == 0, res.stderr
    lines = (tmp_path / "b" / "results.jsonl").read_text().splitlines()
    points = [Measurement.model_validate_json(x).point for x in lines]
    assert {"concurrency": 8, "input_len": 1024} in points
    assert (tmp_path / "b" / "report.md").exists()  # ingest ends by analysing and rendering


VLLM = GOLDEN.parent / "vllm"


def test_dry_run_prints_what_it_understood_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    files = [str(VLLM / f"{arm}-c{c}.json") for arm in ("base", "cutedsl") for c in (1, 4)]
    res = mr("ingest", *files, "--baseline", "base", "--out", str(out), "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "read 4 runs from 4 inputs: 4 × vllm bench serve --save-result JSON" in res.stdout
    assert "arms: base (baseline), cutedsl" in res.stdout
    assert "points (concurrency): 1, 4" in res.stdout
    assert "servers: base#1 (2 runs), cutedsl#1 (2 runs)" in res.stdout
    assert "dry run: nothing written" in res.stdout
    assert not out.exists()


def test_vllm_files_to_a_report_that_names_the_client(tmp_path: Path) -> None:
    out = tmp_path / "run"
    files = [str(VLLM / f"{arm}-c{c}.json") for arm in ("base", "cutedsl") for c in (1, 4)]
    res = mr("ingest", *files, "--baseline", "base", "--out", str(out), "--noise", "2%")
    assert res.returncode == 0, res.stderr
    assert res.stdout.index("arms:") < res.stdout.index("wrote ")  # understood, then written
    ingest = json.loads((out / "ingest.json").read_text())
    assert set(ingest["formats"].values()) == {"vllm"}
    assert json.loads((out / "env.json").read_text())["client"] == "vllm"
    text = mr("report", str(out), "-o", "-").stdout
    assert "`vllm bench serve`" in text and "sglang.bench_serving" not in text


def test_mixed_clients_refused_in_one_sentence(tmp_path: Path) -> None:
    res = mr("ingest", str(VLLM / "base-c1.json"), str(GOLDEN / "fast_decode.jsonl"),
             "--baseline", "base", "--out", str(tmp_path / "r"))  # fmt: skip
    assert res.returncode == 2
    assert "--mix-formats" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_vllm_sweep_directory_to_a_decided_report(tmp_path: Path) -> None:
    """Two runs per cell on one launch: the warm spread is measured, so cells can be decided
    without a declared noise (cutedsl's decode steps are shorter: TPOT better)."""
    out = tmp_path / "run"
    sweep = GOLDEN.parent / "vllm_sweep" / "golden"
    res = mr("ingest", str(sweep), "--baseline", "base", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "repeats (runs per arm @ point): base @ 1: 2" in res.stdout
    report = mr("report", str(out), "-o", "-")
    assert report.returncode == 0, report.stderr
    assert "`vllm bench serve`" in report.stdout
    verdict = json.loads((out / "verdict.json").read_text())
    metrics = {m["metric"]: m for m in verdict["slices"][0]["candidates"][0]["metrics"]}
    assert metrics["median_tpot_ms"]["overall"]["verdict"] == "better"


@pytest.mark.slow
def test_servers_per_file_makes_each_file_one_launch(tmp_path: Path) -> None:
    """`--servers per-file`: two files of one arm are two launches (instances ARM@STEM), so
    the repeat is a fresh-server replicate; `--fresh-server` with another mode is refused."""
    lines = (GOLDEN / "fast_decode.jsonl").read_text()
    second = tmp_path / "fast_decode_again.jsonl"
    second.write_text(lines)
    out = tmp_path / "run"
    res = mr("ingest", str(GOLDEN / "fast_prefill.jsonl"), str(GOLDEN / "fast_decode.jsonl"),
             str(second), "--baseline", "fast_prefill", "--out", str(out),
             "--servers", "per-file")  # fmt: skip
    assert res.returncode == 0, res.stderr
    ms = [
        Measurement.model_validate_json(x) for x in (out / "results.jsonl").read_text().splitlines()
    ]
    decode = {m.instance for m in ms if m.arm == "fast_decode"}
    assert decode == {"fast_decode@fast_decode", "fast_decode@fast_decode_again"}
    bad = mr("ingest", str(GOLDEN / "fast_decode.jsonl"), "--baseline", "fast_decode",
             "--out", str(tmp_path / "r2"), "--servers", "same", "--fresh-server")  # fmt: skip
    assert bad.returncode == 2 and "contradicts" in bad.stderr


def test_the_help_names_every_format_the_code_reads_and_what_it_refuses() -> None:
    """`ingest --help` named four clients and refused genai-bench's files while the code read
    vLLM's v0.8 layout and nightly tables, inference-perf and llmperf: the help is built from
    the format table now, and every --format choice is in it with its client."""
    from matrixrun.cli.main import build_parser
    from matrixrun.ingest.formats import CLIENT, read

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    ingest = sub.choices["ingest"]
    text = " ".join(ingest.format_help().split())  # argparse's wrapping undone
    choices = next(a for a in ingest._actions if a.dest == "format").choices
    assert choices is not None and set(choices) == set(CLIENT)
    description = text.split("positional arguments:")[0]
    for fmt in choices:
        assert f"[{fmt}]" in text, fmt
        client = CLIENT[fmt]
        assert client.replace("_", "") in description.lower().replace("_", ""), client
    assert "inference-perf" in description and "llmperf" in description
    # what the help calls refused is refused by the code, and the rest is read
    assert "[genai_bench] (recognised and refused" in text
    assert "genai-bench files are recognised and refused" in description
    with pytest.raises(InputError, match="genai-bench"):
        read(next((ROOT / "tests" / "golden" / "genai_bench").rglob("*concurrency*.json")))
    assert text.count("recognised and refused") == 2  # the description and genai_bench only

"""bench_serving adapter: its command line, the conversion of real `--output-details` lists to
records, and the whole subprocess path with a stand-in `sglang.bench_serving`
(tests/fake_sglang/) that accepts the real flags and really drives the simulator."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from pydantic import SecretStr
from simserver import start_sim

from matrixrun.core import interrupt
from matrixrun.core.errors import LoadError
from matrixrun.load.aggregate import compute_metrics
from matrixrun.load.bench_serving import read_file
from matrixrun.load.bench_serving_client import build_argv, records_from_details, run_bench_serving
from matrixrun.load.client import LoadConfig

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "bench_serving"
FAKE_ENV = {"PYTHONPATH": f"{ROOT / 'tests' / 'fake_sglang'}:{ROOT}"}
PREFIX = [sys.executable, "-m", "sglang.benchmark.serving"]

pytestmark = pytest.mark.timeout(180)


def config(base_url: str = "http://127.0.0.1:30000", **kw: object) -> LoadConfig:
    values: dict[str, object] = dict(base_url=base_url, model="/models/m", num_prompts=8,
                                     input_len=16, output_len=6, concurrency=4, seed=3,
                                     warmup_requests=1)  # fmt: skip
    values.update(kw)
    return LoadConfig.model_validate(values)


def test_argv() -> None:
    argv = build_argv(config(), Path("/o/out.jsonl"), tokenizer="/tok")
    assert argv == [
        sys.executable, "-m", "sglang.benchmark.serving", "--backend", "sglang",
        "--host", "127.0.0.1", "--port", "30000", "--model", "/models/m", "--tokenizer", "/tok",
        "--dataset-name", "random-ids", "--random-input-len", "16", "--random-output-len", "6",
        "--random-range-ratio", "1", "--num-prompts", "8", "--max-concurrency", "4",
        "--request-rate", "inf", "--seed", "3", "--warmup-requests", "1", "--flush-cache",
        "--disable-tqdm", "--output-file", "/o/out.jsonl", "--tokenize-prompt",
        "--output-details",
    ]  # fmt: skip


def test_argv_prefix_base_url_openai_and_rate() -> None:
    prefix = ["/opt/sglang/bin/python", "-m", "sglang.benchmark.serving"]
    argv = build_argv(config("https://api.example.com", api="openai", request_rate=2.5),
                      Path("f"), prefix)  # fmt: skip
    assert argv[:5] == [*prefix, "--backend", "sglang-oai"]
    assert argv[5:7] == ["--base-url", "https://api.example.com"]
    assert "--host" not in argv and argv[argv.index("--request-rate") + 1] == "2.5"
    assert "--tokenizer" not in argv
    # bench_serving refuses --tokenize-prompt for sglang-oai: its ids go as text
    assert "--tokenize-prompt" not in argv and "--flush-cache" in argv


def test_records_from_golden_details() -> None:
    """Real bench_serving details rebuild records whose statistics match its own numbers."""
    rec = read_file(GOLDEN / "steady.jsonl")[0]
    assert rec.details is not None
    records = records_from_details(rec.details)
    assert len(records) == rec.metrics.completed and all(r.ok for r in records)
    assert all(r.output_tokens == 64 and sum(r.chunk_tokens) == 64 for r in records)
    ours = compute_metrics(records, rec.metrics.duration)
    for name in ("mean_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "p99_itl_ms", "mean_tpot_ms",
                 "mean_e2e_latency_ms", "output_throughput"):  # fmt: skip
        assert getattr(ours, name) == pytest.approx(getattr(rec.metrics, name), rel=0.02), name


@pytest.mark.slow
def test_run_against_the_simulator(tmp_path: Path) -> None:
    profile = {"name": "b", "base": {"step_ms": [[1, 5], [8, 6]]}}
    with start_sim(["--profile-json", json.dumps(profile)]) as (_, base):
        metrics, records, argv = run_bench_serving(
            config(base), tmp_path / "cell", PREFIX, timeout_s=120, env=FAKE_ENV
        )
    assert metrics.completed == 8 and metrics.failed == 0
    assert metrics.total_output_tokens == 48 and metrics.total_input_tokens == 128
    assert metrics.mean_tpot_ms is not None and 3 < metrics.mean_tpot_ms < 100
    assert metrics.concurrency is not None and metrics.concurrency > 1
    assert len(records) == 8 and all(r.ok and r.output_tokens == 6 for r in records)
    assert argv[:3] == PREFIX and str(tmp_path / "cell" / "bench_serving.jsonl") in argv
    log = (tmp_path / "cell" / "bench_serving.log").read_text()
    assert "benchmark_args=" in log
    line = json.loads((tmp_path / "cell" / "bench_serving.jsonl").read_text())
    assert math.isinf(line["request_rate"]) and line["api_key_seen"] is False


@pytest.mark.slow
def test_api_key_reaches_the_child_by_environment_only(tmp_path: Path) -> None:
    with start_sim(["--profile-json", json.dumps({"name": "k", "base": {"step_ms": [[1, 1]]}})
                    ]) as (_, base):  # fmt: skip
        cfg = config(base, num_prompts=2, api_key=SecretStr("sk-secret-42"))
        _, _, argv = run_bench_serving(cfg, tmp_path, PREFIX, timeout_s=120, env=FAKE_ENV)
    assert "sk-secret-42" not in " ".join(argv)
    assert "sk-secret-42" not in (tmp_path / "bench_serving.log").read_text()
    assert json.loads((tmp_path / "bench_serving.jsonl").read_text())["api_key_seen"] is True


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", r"exited with code 1 .*\n(.|\n)*RuntimeError: fake bench_serving failed"),
        ("nofile", r"exited 0 but wrote no .*bench_serving\.jsonl"),
    ],
)
def test_failures_carry_the_log_tail(tmp_path: Path, mode: str, message: str) -> None:
    with pytest.raises(LoadError, match=message):
        run_bench_serving(config(), tmp_path, PREFIX, timeout_s=60,
                          env={**FAKE_ENV, "FAKE_BENCH_SERVING": mode})  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["slowstart", "linger"])
def test_a_slow_start_or_a_late_exit_keeps_a_finished_result(tmp_path: Path, mode: str) -> None:
    """Issue 42: the real bench_serving spent most of a 60 s cell timeout on its imports and
    tokenizer, wrote its whole result 3 s before the cap, and was killed and its result thrown
    away. The cap counts from its first request now, and a complete file is always read."""
    with start_sim(["--profile-json", json.dumps({"name": "k", "base": {"step_ms": [[1, 1]]}})
                    ]) as (_, base):  # fmt: skip
        env = {**FAKE_ENV, "FAKE_BENCH_SERVING": mode, "FAKE_STARTUP_S": "6"}
        t0 = time.monotonic()
        metrics, records, _ = run_bench_serving(config(base, num_prompts=4), tmp_path, PREFIX,
                                                timeout_s=5, env=env)  # fmt: skip
    assert metrics.completed == 4 and len(records) == 4
    assert time.monotonic() - t0 < 60  # "linger" was stopped at the cap, not after 600 s


@pytest.mark.slow
def test_a_client_that_never_starts_measuring_has_its_own_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matrixrun.load import bench_serving_client

    monkeypatch.setattr(bench_serving_client, "CLIENT_STARTUP_S", 3.0)
    with pytest.raises(LoadError, match=r"did not start sending requests within 3s"):
        run_bench_serving(config(), tmp_path, PREFIX, timeout_s=60,
                          env={**FAKE_ENV, "FAKE_BENCH_SERVING": "nostart"})  # fmt: skip


@pytest.mark.slow
def test_timeout_kills_the_client(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(
        LoadError, match=r"timed out after 3s of measuring \(limits\.cell_timeout\)"
    ):
        run_bench_serving(config(), tmp_path, PREFIX, timeout_s=3,
                          env={**FAKE_ENV, "FAKE_BENCH_SERVING": "hang"})  # fmt: skip
    assert time.monotonic() - t0 < 30


@pytest.mark.slow
def test_a_ctrl_c_stops_the_client_and_is_an_interrupt_not_a_failed_cell(tmp_path: Path) -> None:
    """While the runner handles SIGINT (core/interrupt.py), bench_serving runs in a session of
    its own, so a Ctrl-C reaches only matrixrun: the handler sends the client SIGTERM, and the
    cell ends as an interrupt (nothing recorded), not as a LoadError the run would record."""
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt), interrupt.handling(), interrupt.measurement():
        timer.start()
        run_bench_serving(config(), tmp_path, PREFIX, timeout_s=300,
                          env={**FAKE_ENV, "FAKE_BENCH_SERVING": "hang"})  # fmt: skip
    timer.join()
    assert time.monotonic() - t0 < 30  # not the 600 s the stand-in sleeps


def test_missing_client(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"set engine\.client_launch"):
        run_bench_serving(config(), tmp_path, [str(tmp_path / "no-python")], timeout_s=5)


@pytest.mark.slow
def test_unknown_flag_fails_like_the_real_client(tmp_path: Path) -> None:
    """The stand-in rejects flags bench_serving does not have: a typo in argv cannot pass."""
    with pytest.raises(LoadError, match="unrecognized arguments: --no-such-flag"):
        run_bench_serving(config(), tmp_path, [*PREFIX, "--no-such-flag"], timeout_s=60,
                          env=FAKE_ENV)  # fmt: skip


def test_the_warmup_row_says_what_bench_serving_sends() -> None:
    """Issue 28: bench_serving's --warmup-requests sends copies of the first request; the
    report says so, and that a flush (--flush-cache) follows, instead of "N unmeasured
    requests" as for the built-in client (which sends other prompts)."""
    from matrixrun.report.sections.setup import warmup_text

    assert "--flush-cache" in build_argv(config(), Path("o"))
    text = warmup_text(2, "bench_serving")
    assert text == (
        "2 unmeasured copies of the cell's first request (bench_serving's warm-up), then a "
        "cache flush"
    )
    assert warmup_text(2) == "2 unmeasured request(s) before each cell"

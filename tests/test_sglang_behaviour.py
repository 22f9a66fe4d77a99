"""SGLang 0.5.23 as it really behaves (issue 28), met by the harness end to end: the simulator
imitates each behaviour (and has a fault mode for each), and the harness's real client, gate,
flush and health wait are run against it over real HTTP.

The facts come from the released wheel's source (docs/gpu-node.md, "What matrixrun relies on");
the request/response shapes are also checked against the wheel's own schema in
tests/test_sglang_schema.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from simserver import start_sim

from matrixrun.core.errors import LoadError
from matrixrun.engines.base import Launch, ServerProcess, flush_cache
from matrixrun.engines.sglang import SGLangEngine
from matrixrun.load import LoadConfig, run_load_sync
from matrixrun.load.apis import request_body
from matrixrun.run.correctness import collect, request
from matrixrun.spec import CorrectnessSpec

pytestmark = pytest.mark.timeout(60)


def profile(step_ms: float = 2.0, **effects: Any) -> list[str]:
    data = {"name": "t", "base": {"step_ms": [[1, step_ms]]}, "effects": effects}
    return ["--profile-json", json.dumps(data)]


def load(url: str, **kw: Any) -> LoadConfig:
    base: dict[str, Any] = dict(
        base_url=url, api="sglang", num_prompts=4, input_len=16, output_len=8, concurrency=4,
        warmup_requests=0, request_timeout_s=20,
    )  # fmt: skip
    return LoadConfig(**(base | kw))


# ----------------------------------------------------------------------------- requests


def test_a_text_prompt_goes_in_text_on_the_native_api() -> None:
    """Text in `input_ids` is a 400 on SGLang (and now on the simulator); it belongs in
    `text`, for the load client and the correctness gate alike."""
    body = json.loads(request_body("sglang", "t1 t2 t3", 4, None))
    assert body["text"] == "t1 t2 t3" and "input_ids" not in body
    path, gate = request("sglang", "t1 t2 t3", 4, None)
    assert path == "/generate" and gate["text"] == "t1 t2 t3" and "input_ids" not in gate
    with start_sim(profile()) as (_, url):
        ok = httpx.post(url + "/generate", json=gate, timeout=10)
        assert ok.status_code == 200 and ok.json()["meta_info"]["completion_tokens"] == 4
        wrong = httpx.post(url + "/generate", json={**gate, "input_ids": "t1 t2"}, timeout=10)
        assert wrong.status_code == 400 and "expected a sequence" in wrong.json()["error"]


def test_unknown_sampling_keys_are_refused_and_zero_new_tokens_allowed() -> None:
    with start_sim(profile()) as (_, url):
        bad = {"input_ids": [1, 2], "sampling_params": {"max_new_tokenz": 3}}
        r = httpx.post(url + "/generate", json=bad, timeout=10)
        assert r.status_code == 400 and r.json()["error"].startswith("unknown field `max_new")
        zero = {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 0}}
        out = httpx.post(url + "/generate", json=zero, timeout=10).json()
        assert out["output_ids"] == [] and out["meta_info"]["completion_tokens"] == 0
        stream = httpx.post(url + "/generate", json={**zero, "stream": True}, timeout=10).text
        assert stream.endswith("data: [DONE]\n\n") and '"completion_tokens":0' in stream


# -------------------------------------------------------------------------- aborts, errors


def test_an_aborted_request_is_a_failed_request_with_its_reason() -> None:
    """SGLang ends an aborted request with a normal event whose finish_reason is
    {"type": "abort"} and then [DONE]; the tokens before it must not count as a success."""
    with start_sim(profile(abort_rate=1.0)) as (_, url):
        res = run_load_sync(load(url))
        raw = httpx.post(
            url + "/generate",
            json={"input_ids": [5, 6], "sampling_params": {"max_new_tokens": 5}, "stream": True},
            timeout=10,
        ).text
    events = [json.loads(x[6:]) for x in raw.strip().split("\n\n") if x != "data: [DONE]"]
    assert events[-1]["meta_info"]["finish_reason"]["type"] == "abort"
    assert raw.endswith("data: [DONE]\n\n")
    assert res.metrics.completed == 0 and res.metrics.failed == 4
    assert all("aborted by the server: simulated scheduler abort" in r.error for r in res.records)


def test_an_aborted_openai_request_is_a_failed_request() -> None:
    """On /v1/completions SGLang ends a graceful abort with finish_reason "abort"."""
    with start_sim(profile(abort_rate=1.0)) as (_, url):
        res = run_load_sync(load(url, api="openai"))
    assert res.metrics.completed == 0 and res.metrics.failed == 4
    assert all("aborted by the server (finish_reason abort)" in r.error for r in res.records)


@pytest.mark.parametrize(
    ("api", "reason"),
    [("sglang", "simulated scheduler abort"), ("openai", "finish_reason abort")],
)
def test_the_correctness_gate_refuses_an_aborted_answer(api: Any, reason: str) -> None:
    import asyncio

    settings = CorrectnessSpec(prompts=2, input_len=8, max_new_tokens=4)
    with (
        start_sim(profile(abort_rate=1.0)) as (_, url),
        pytest.raises(LoadError, match=f"aborted the request.*{reason}"),
    ):
        asyncio.run(collect(url, api, settings, None))


def test_an_error_inside_the_stream_fails_the_request() -> None:
    with start_sim(profile(stream_error_rate=1.0)) as (_, url):
        res = run_load_sync(load(url))
    assert res.metrics.failed == 4
    assert all("server error in stream: simulated error inside" in r.error for r in res.records)


# ---------------------------------------------------------------------------------- flush


def test_flush_waits_for_a_busy_server_to_go_idle() -> None:
    """A flush right after a capped cell meets running requests: SGLang answers 400 unless
    asked to wait (`?timeout=`). The harness asks, so the flush happens."""
    with start_sim(profile(step_ms=20.0)) as (_, url):
        body = {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 40}}
        busy = threading.Thread(target=httpx.post, args=(url + "/generate",), kwargs={"json": body})
        busy.start()
        time.sleep(0.2)
        assert httpx.post(url + "/flush_cache").status_code == 400  # SGLang's default answer
        t0 = time.monotonic()
        assert flush_cache(url, "/flush_cache", 10, timeout_param="timeout") is None
        waited = time.monotonic() - t0
        busy.join()
    assert waited > 0.1  # it waited for the request, it was not flushed under it


def test_a_refused_flush_is_retried_and_a_lasting_refusal_is_said() -> None:
    with start_sim(profile(flush_refusals=3)) as (_, url):
        assert flush_cache(url, "/flush_cache", 5, retry_s=0.05) is None
    with start_sim(profile(flush_refusals=10**6)) as (_, url):
        why = flush_cache(url, "/flush_cache", 0.3, retry_s=0.05)
    assert why is not None and "HTTP 400: Flush cache failed." in why and "0.3 s" in why


# ----------------------------------------------------------------------- health, server info


def test_startup_time_leaves_out_the_health_checks_own_sleep(tmp_path: Path) -> None:
    """SGLang's /health_generate sleeps 1 s before it answers 200; that second (3 s here) is
    the check's, not the server's startup."""
    from simserver import free_port

    port = free_port()
    argv = ["python3", "-m", "matrixrun.sim", "--port", str(port), *profile(health_check_s=3.0)]
    import sys

    argv[0] = sys.executable
    launch = Launch(argv, {}, f"http://127.0.0.1:{port}", port)
    with ServerProcess(launch, tmp_path / "log") as server:
        startup = server.wait_healthy("/health_generate", 30)
        elapsed = time.monotonic() - server.started_at
    assert elapsed - startup > 2.5, (elapsed, startup)


def test_health_is_503_until_ready_and_model_info_answers() -> None:
    with start_sim(profile(slow_start_s=1.0)) as (_, url):
        assert httpx.get(url + "/health").status_code == 503
        assert httpx.get(url + "/health_generate").status_code == 503
        info = httpx.get(url + "/model_info").json()
    assert {"model_path", "served_model_name", "is_generation", "weight_version"} <= set(info)


def test_per_launch_server_info_is_not_an_argument() -> None:
    """0.5.23's /server_info has launch_command (with the port), startup_time, kv_events,
    status...: never the same twice, so they must not read as "differs between arms"."""
    with start_sim(profile()) as (_, url):
        info = httpx.get(url + "/server_info").json()
    assert {"launch_command", "startup_time", "kv_events", "status"} <= set(info)
    args = SGLangEngine().effective_args(info)
    assert not {"launch_command", "startup_time", "kv_events", "status", "frontend"} & set(args)
    assert args["model_path"] == info["model_path"]


# ------------------------------------------------------------------------------ streaming


def test_pending_native_output_is_merged_into_one_cumulative_event() -> None:
    """A handler behind the engine sends the newest cumulative event, not several events in
    one write (which would all get one arrival time)."""
    from matrixrun.sim.channel import Channel
    from matrixrun.sim.protocol import GenRequest
    from matrixrun.sim.tokens import TokenSource

    for incremental in (False, True):
        req = GenRequest("native", [1, 2, 3], 8, True, 0.0)
        ch = Channel(
            req, TokenSource(1), "r", incremental=incremental, malformed=False, created=0,
            model="m",
        )  # fmt: skip
        for k in (1, 2, 3):
            ch.emit(k, False, time.monotonic())
        chunks, deadlines = ch.take()
        assert len(chunks) == 1 and len(deadlines) == 3
        event = json.loads(chunks[0][6:])
        assert event["meta_info"]["completion_tokens"] == 3 and len(event["output_ids"]) == 3
        ch.emit(4, False, time.monotonic())
        (nxt,), _ = ch.take()
        ids = json.loads(nxt[6:])["output_ids"]
        assert len(ids) == (1 if incremental else 4)


# ------------------------------------------------------------------- the runner, end to end

FAULT_SPEC = """experiment: faults
title: a rehearsal whose server refuses every flush or aborts every request
model: {{path: /models/tiny, vocab_size: 32000}}
hardware: {{gpu: NVIDIA H200, count: 1}}
engine: {{kind: sglang}}
arms:
  a: {{}}
  b: {{moe_runner_backend: flashinfer_cutlass}}
sweep: {{concurrency: [1]}}
workload: {{input_len: 8, output_len: 4, num_prompts: 4, warmup_requests: 0, seed: 1}}
metrics: {{primary: output_throughput}}
verify: {{max_runs: 1, noise: 2%}}
limits: {{startup_timeout: 60s, cell_timeout: 60s, request_timeout: 30s}}
correctness: {{enabled: false}}
rehearsal:
  time_scale: 60
  profile: {{name: faults, base: {{step_ms: [[1, 20]]}}, effects: {{{effects}}}}}
"""


def _rehearse(tmp_path: Path, effects: str) -> tuple[Path, str]:
    import subprocess
    import sys

    spec = tmp_path / "faults.yaml"
    spec.write_text(FAULT_SPEC.format(effects=effects))
    run_dir, report = tmp_path / "run", tmp_path / "r.md"
    res = subprocess.run(
        [sys.executable, "-m", "matrixrun", "run", str(spec), "--rehearse", "--out",
         str(run_dir), "--report", str(report)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert report.exists(), res.stderr[-2000:]
    return run_dir, report.read_text()


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_run_whose_flushes_are_refused_records_and_reports_it(tmp_path: Path) -> None:
    run_dir, report = _rehearse(tmp_path, "flush_refusals: 1000000")
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    flushes = [e for e in events if e["event"] == "flush_cache"]
    assert flushes and not any(e["ok"] for e in flushes)
    assert all("HTTP 400: Flush cache failed." in e["why"] for e in flushes)
    results = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert all("Flush cache failed." in r["extra"]["flush_failed"] for r in results)
    assert (
        f"flushed before 0 of {len(flushes)} cells (POST /flush_cache answered HTTP 400" in report
    )


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_run_whose_requests_are_aborted_fails_its_cells_with_the_reason(tmp_path: Path) -> None:
    run_dir, _ = _rehearse(tmp_path, "abort_rate: 1.0")
    results = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert results and all(r["metrics"] is None or r["metrics"]["completed"] == 0 for r in results)
    assert all("aborted by the server: simulated scheduler abort" in r["error"] for r in results)

"""Each failure with the right kind and words (issue 15): wrong-shape JSON, a client out of
file descriptors, bench-client's exit code, a refused endpoint, the failure-rate exit."""

from __future__ import annotations

import asyncio
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from matrixrun.core.errors import EngineError
from matrixrun.core.measurement import over_failure_rate
from matrixrun.core.metrics import Metrics
from matrixrun.engines.base import Launch
from matrixrun.engines.openai import RemoteServer
from matrixrun.load import LoadConfig, run_load_sync
from matrixrun.load.apis import OpenAIParser

SERVER = Path(__file__).resolve().parent / "fixedserver.py"
pytestmark = pytest.mark.timeout(60)


@contextmanager
def sse_server(events: list[bytes]) -> Iterator[str]:
    """A loopback HTTP server answering every POST with these SSE events (and [DONE])."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            head = await r.readuntil(b"\r\n\r\n")
            length = next(
                (int(h.split(b":")[1]) for h in head.split(b"\r\n")
                 if h.lower().startswith(b"content-length")), 0,
            )  # fmt: skip
            await r.readexactly(length)
            body = b"".join(b"data: " + e + b"\n\n" for e in [*events, b"[DONE]"])
            w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
            await w.drain()

    stop: list[asyncio.Event] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        async with server:
            await stop[0].wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    ready.wait(5)
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(5)


def test_wrong_shape_json_is_named_plainly() -> None:
    with sse_server([b'{"choices": "not a list", "usage": {"completion_tokens": "x"}}']) as url:
        res = run_load_sync(
            LoadConfig(
                base_url=url,
                api="openai",
                model="m",
                num_prompts=2,
                input_len=4,
                output_len=2,
                concurrency=1,
                warmup_requests=0,
            )
        )
    assert res.metrics.completed == 0
    error = res.records[0].error
    assert "unexpected shape" in error and "on_body" not in error


def test_a_parser_never_raises_on_valid_json_of_any_shape() -> None:
    shapes = [b"[]", b'{"choices": [1]}', b'{"choices": [{"text": 1}]}', b"3",
              b'{"usage": {"completion_tokens": "a"}, "choices": [{"text": "t"}]}']  # fmt: skip
    for payload in shapes:
        p = OpenAIParser()
        p.feed(b"data: " + payload + b"\n", 1.0)  # must not raise


def _bench(*args: str, nofile: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    argv = [sys.executable, "-m", "matrixrun", "bench-client", "--api", "openai", "--model",
            "m", "--input-len", "8", "--output-len", "4", *args]  # fmt: skip
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, preexec_fn=limit, check=False
    )


@contextmanager
def fixed(*args: str) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", *args],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        yield f"http://127.0.0.1:{ready[1]}" if len(ready) > 1 else ready[-1]
    finally:
        proc.kill()
        proc.wait()


def test_bench_client_exits_1_with_a_summary_when_requests_fail() -> None:
    with fixed("--fail-every", "2", "--ttft-ms", "1", "--itl-ms", "1") as url:
        res = _bench("--url", url, "--concurrency", "2", "--num-prompts", "8")
    assert res.returncode == 1, res.stderr
    assert "requests failed" in res.stderr and "500" in res.stderr
    assert '"failed": ' in res.stdout  # the JSON is still printed


def test_bench_client_out_of_file_descriptors_says_so() -> None:
    with fixed("--ttft-ms", "200", "--itl-ms", "5") as url:
        res = _bench("--url", url, "--concurrency", "200", "--num-prompts", "200",
                     nofile=64)  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert "Too many open files" in res.stderr and "ulimit -n" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_refused_endpoint_fails_fast_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("matrixrun.engines.openai.REFUSED_GRACE_S", 0.5)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        server = RemoteServer(Launch([], {}, url, port))
        t0 = time.monotonic()
        with pytest.raises(EngineError, match=r"(?i)connection refused"):
            server.wait_healthy("/v1/models", timeout_s=600, poll_s=0.1)
    assert time.monotonic() - t0 < 10


def _m(cell: str, completed: int, failed: int):  # type: ignore[no-untyped-def]
    from matrixrun.core.measurement import Measurement

    metrics = Metrics(duration=1, completed=completed, failed=failed, total_input_tokens=1,
                      total_output_tokens=1, request_throughput=1, input_throughput=1,
                      output_throughput=1, total_throughput=1)  # fmt: skip
    return Measurement(cell_id=cell, point_id="p", arm="a", group_id="g", point={"x": 1},
                       instance="g#1", metrics=metrics)  # fmt: skip


def test_failure_rate_rule_pools_a_cells_runs() -> None:
    ms = [_m("c1", 80, 20), _m("c2", 99, 1), _m("c3", 100, 0), _m("c3", 99, 1)]
    over = over_failure_rate(ms, 0.01)
    assert len(over) == 1 and over[0].startswith("cell c1") and "20.0%" in over[0]
    assert over_failure_rate(ms, 0.25) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_whose_requests_fail_beyond_the_rule_exits_1(tmp_path: Path) -> None:
    """Issue 15: with 20% malformed streams every cell still has numbers; the run must not
    exit 0."""
    from test_runner import TINY, mr

    spec = tmp_path / "malformed.yaml"
    spec.write_text(
        TINY.replace("    rules:", "    effects: {malformed_rate: 0.3}\n    rules:").replace(
            "num_prompts: 8", "num_prompts: 16"
        )
    )
    res = mr("run", str(spec), "--rehearse", "--out", str(tmp_path / "run"), "--report",
             str(tmp_path / "r.md"))  # fmt: skip
    assert res.returncode == 1, res.stderr[-2000:]
    assert "over verify.failure_rate" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_launched_server_that_never_listens_says_connection_refused(tmp_path: Path) -> None:
    """The process lives but nothing listens on its port: the startup timeout's sentence
    says every health check was refused (instead of only "not healthy")."""
    from matrixrun.core.errors import StartupTimeout
    from matrixrun.engines.base import ServerProcess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launch = Launch([sys.executable, "-c", "import time; time.sleep(30)"], {},
                    f"http://127.0.0.1:{port}", port)  # fmt: skip
    server = ServerProcess(launch, tmp_path / "s.log", tmp_path / "s.pid", name="mute").start()
    try:
        with pytest.raises(StartupTimeout, match="every check was refused"):
            server.wait_healthy("/health", timeout_s=1.0, poll_s=0.1)
    finally:
        server.stop()
    assert not (tmp_path / "s.pid").exists()


PROFILE = """\
name: retry
base: {step_ms: [[1, 20], [8, 24]], prefill_ms_per_token: 0.1}
rules:
  - when: {moe_runner_backend: flashinfer_cutedsl}
    set: {step_ms: [[1, 10], [8, 12]]}
"""


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_resume_with_retry_failed_measures_the_failed_cells_again_and_keeps_what_failed(
    tmp_path: Path,
) -> None:
    """A candidate whose server answers every request 500 fails all its cells. Without
    --retry-failed a resume measures nothing; once the cause is gone (the profile file the spec
    names is fixed: the spec's text, which a resume checks, is unchanged), `--resume
    --retry-failed` measures each of them again on a fresh launch. The failed attempts stay in
    results.jsonl; the retries, tagged `retry`, replace them in the counts: the run exits 0."""
    import json

    from test_runner import TINY, mr

    from matrixrun.core.measurement import superseded
    from matrixrun.core.verdict import Verdict
    from matrixrun.rundir.results import RunDir

    profile = tmp_path / "p.yaml"
    broken = PROFILE.replace(
        "    set: {step_ms: [[1, 10], [8, 12]]}",
        "    set: {step_ms: [[1, 10], [8, 12]]}\neffect_rules:\n"
        "  - when: {moe_runner_backend: flashinfer_cutedsl}\n    set: {error_rate: 1.0}",
    )
    profile.write_text(broken)
    head, _ = TINY.split("  profile:\n")
    spec = tmp_path / "retry.yaml"
    spec.write_text(head + "  profile: p.yaml\n")
    run = tmp_path / "run"
    args = ("--rehearse", "--report", str(tmp_path / "r.md"))
    first = mr("run", str(spec), "--out", str(run), *args)
    assert first.returncode == 1, first.stderr[-2000:]
    failed = [m for m in RunDir(run).measurements() if not m.ok]
    assert failed and {m.arm for m in failed} == {"fast"}

    alone = mr("run", str(spec), "--resume", str(run), *args)
    assert alone.returncode == 1 and "measured 0" in alone.stdout, alone.stdout
    assert mr("run", str(spec), "--retry-failed", *args).returncode == 2

    profile.write_text(PROFILE)  # the cause is gone
    res = mr("run", str(spec), "--resume", str(run), "--retry-failed", *args)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    cells = len({m.cell_id for m in failed})
    noun = "cell" if cells == 1 else "cells"
    assert f"--retry-failed: measuring again {cells} {noun} whose every attempt failed" in (
        res.stderr
    )
    again = mr("run", str(spec), "--resume", str(run), "--retry-failed", *args)
    assert again.returncode == 0 and "nothing to retry" in again.stderr
    ms = RunDir(run).measurements()
    kept = {(m.cell_id, m.attempt) for m in failed}
    assert kept <= {(m.cell_id, m.attempt) for m in ms}  # nothing measured is lost
    retries = [m for m in ms if m.extra.get("retry")]
    assert {m.cell_id for m in retries} == {m.cell_id for m in failed}
    assert all(m.ok and m.reason == "first" and m.attempt > 1 for m in retries)
    assert superseded(ms) == kept
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    asked = [e for e in events if e["event"] == "retry_failed"]
    assert len(asked) == 1 and set(asked[0]["cells"]) == {m.cell_id for m in failed}
    verdict = Verdict.model_validate_json((run / "verdict.json").read_text())
    primary = [c for _, _, c in verdict.comparisons()]
    assert primary and all(c.candidate.n >= 1 for c in primary)
    # the replaced attempts' 500s no longer count against the cells
    assert all(c.candidate.failure_rate == 0 for c in primary)

"""The real SGLang 0.5.23, launched by matrixrun itself, on a CPU (`nox -s sglang-real`).

Everything matrixrun relies on, against the real process rather than our picture of it: launch
and readiness, `/server_info`'s version and args, streamed `/generate` parsing, OpenAI
completions (token ids and text prompts, strict bodies), the cache flush idle and while busy
(400), a client that disconnects, `/abort_request` (a failed request with its reason), stop
(the whole process tree gone and the port free), the correctness gate, the bench_serving client
path, OpenAI chat (answer, usage, finish, against the simulator's), a small-vocabulary model,
a server that dies mid-cell (reported with its real first error), a ShareGPT-format file and a
Mooncake trace through `matrixrun run` (the checks the simulator's test applies too,
tests/dataset_runs.py), and the simulator's answers compared with the real server's on the
same requests.

The environment is the project's own (scripts/sglang_cpu/setup.py, run by the nox session):
SGLang in its own venv (`MATRIXRUN_SGLANG_PYTHON`), a stand-in for the CUDA-only sgl_kernel,
and tiny random Llamas under /tmp/matrixrun-sglang-cpu that the committed spec
(spec/sglang_cpu.yaml) names; on a GPU node `MATRIXRUN_SGLANG_SPEC=spec/sglang_gpu.yaml`
launches the same experiment without the CPU lines (docs/gpu-node.md). Under `nox -s tests`
these skip with one line; under CI the nox session sets MATRIXRUN_SGLANG_REAL=require, so a
missing install fails instead of skipping.
A server takes 65-100 s to become ready on two busy cores, so one launch serves every
endpoint test (module fixture) and each end-to-end run launches its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dataset_runs
import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The spec the servers are launched from: the CPU one, or on a GPU node spec/sglang_gpu.yaml
#: (the same experiment without the CPU lines; docs/gpu-node.md, "Checking a new SGLang
#: release"). What a test checks of the launch follows from the spec, not from the CPU's flags.
SPEC = ROOT / os.environ.get("MATRIXRUN_SGLANG_SPEC", "spec/sglang_cpu.yaml")
CPU_ROOT = Path("/tmp/matrixrun-sglang-cpu")
PYTHON = os.environ.get("MATRIXRUN_SGLANG_PYTHON", "")
HOW = (
    "real SGLang: `nox -s sglang-real` installs SGLang 0.5.23 into a cached venv (~9 min and "
    "~11 GB once), builds the tiny models and runs these tests"
)

_ready = bool(PYTHON) and Path(PYTHON).exists() and (CPU_ROOT / "tiny-llama").exists()
if not _ready:
    if os.environ.get("MATRIXRUN_SGLANG_REAL") == "require":
        raise RuntimeError(f"MATRIXRUN_SGLANG_REAL=require but the environment is missing; {HOW}")
    pytest.skip(HOW, allow_module_level=True)
pytestmark = [pytest.mark.sglang_real, pytest.mark.timeout(1200)]

# imported after the skip decision: matrixrun.engines.sglang reads MATRIXRUN_SGLANG_PYTHON
from matrixrun.engines import for_spec  # noqa: E402
from matrixrun.engines.base import flush_cache, free_port, get_json  # noqa: E402
from matrixrun.load.apis import make_parser  # noqa: E402
from matrixrun.load.client import LoadConfig  # noqa: E402
from matrixrun.load.datasets import Cell, DatasetConfig  # noqa: E402
from matrixrun.load.datasets.build import requests_for  # noqa: E402
from matrixrun.load.datasets.resolve import ids_for  # noqa: E402
from matrixrun.load.multi import run_load_sync  # noqa: E402
from matrixrun.plan import expand  # noqa: E402
from matrixrun.spec import load_spec  # noqa: E402

MODEL = str(CPU_ROOT / "tiny-llama")


# ------------------------------------------------------------------------------ one server


class Real:
    """The module's real server, as matrixrun launched it."""

    def __init__(self, tmp: Path) -> None:
        spec = load_spec(SPEC)
        group = expand(spec).groups[0]
        self.engine = for_spec(spec.engine)
        self.launch = self.engine.launch(group, "127.0.0.1", free_port())
        self.server = self.engine.serve(self.launch, "sglang", tmp / "server.log", tmp / "pid")
        self.base = self.launch.base_url
        self.log = tmp / "server.log"


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Real]:
    r = Real(tmp_path_factory.mktemp("sglang"))
    r.server.start()
    try:
        r.server.wait_healthy(r.engine.health_path, 600)
        yield r
    finally:
        r.server.stop()


def _stream(base: str, path: str, body: dict[str, Any], stop_after: int | None = None) -> list[Any]:
    """The JSON events of one streamed request (`[DONE]` as the string), or the first
    `stop_after` of them before the client hangs up."""
    events: list[Any] = []
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", base + path, json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line.removeprefix("data:").strip()
            events.append(payload if payload == "[DONE]" else json.loads(payload))
            if stop_after is not None and len(events) >= stop_after:
                break
    return events


def test_readiness_version_and_args(real: Real) -> None:
    info = get_json(real.base, real.engine.info_paths)
    if SPEC.name == "sglang_cpu.yaml":  # the release CI installs; a GPU check brings its own
        assert real.engine.version(info) == "0.5.23"
    args = real.engine.effective_args(info)
    assert args["schedule_policy"] == "fcfs"  # the baseline arm's flag
    for name, value in load_spec(SPEC).engine.args.items():  # the spec's own, as the server has it
        assert args[name] == value, name
    for per_launch in ("launch_command", "startup_time", "version"):
        assert per_launch not in args  # never "differs between arms"
    assert real.server.startup_s is not None and real.server.startup_s > 1


def test_the_stand_in_kernel_was_never_called(real: Real) -> None:
    """A new SGLang release that starts calling a CUDA kernel on the CPU path shows up here."""
    if "PYTHONPATH" not in load_spec(SPEC).engine.env:
        pytest.skip("no sgl_kernel stand-in in this spec: a GPU install has the real kernel")
    log = real.log.read_text(errors="replace")
    assert "sgl_kernel stand-in: asked for" in log  # it is the one in use
    assert "sgl_kernel stand-in: CALLED" not in log


@pytest.mark.parametrize(
    ("api", "prompt_format", "strict"),
    [("sglang", "token_ids", False), ("openai", "token_ids", False), ("openai", "text", True)],
)
def test_the_load_client_measures_the_real_server(
    real: Real, api: str, prompt_format: str, strict: bool
) -> None:
    config = LoadConfig(
        base_url=real.base, api=api, model=MODEL, num_prompts=4, input_len=32, output_len=8,
        concurrency=2, warmup_requests=1, seed=5, request_timeout_s=120,
        prompt_format=prompt_format, tokenizer=MODEL if prompt_format == "text" else None,
        strict_openai=strict,
    )  # fmt: skip
    result = run_load_sync(config)
    assert result.metrics.completed == 4, [r.error for r in result.records]
    assert all(r.ttft is not None and r.ttft > 0 for r in result.records)
    if not strict:  # ignore_eos: every answer has its full length
        assert result.metrics.total_output_tokens == 4 * 8
        assert {r.output_tokens for r in result.records} == {8}
    if prompt_format == "token_ids":  # the server saw exactly the ids sent
        assert {r.prompt_tokens for r in result.records} == {32}


def test_flush_idle_answers_200_and_busy_400(real: Real) -> None:
    assert flush_cache(real.base, "/flush_cache", 30.0) is None
    body = {"input_ids": [1000 + i for i in range(16)], "stream": True,
            "sampling_params": {"max_new_tokens": 300, "ignore_eos": True}}  # fmt: skip
    started = threading.Event()
    done: list[list[Any]] = []

    def long_request() -> None:
        events: list[Any] = []
        with (
            httpx.Client(timeout=300) as c,
            c.stream("POST", real.base + "/generate", json=body) as r,
        ):
            for line in r.iter_lines():
                if line.startswith("data:"):
                    started.set()
                    events.append(line)
        done.append(events)

    t = threading.Thread(target=long_request)
    t.start()
    assert started.wait(120)
    busy = httpx.post(real.base + "/flush_cache", timeout=30)
    assert busy.status_code == 400 and "Flush cache failed" in busy.text
    # matrixrun's flush asks the server to wait for idle (?timeout=) and gets its 200
    assert flush_cache(real.base, "/flush_cache", 120.0, timeout_param="timeout") is None
    t.join(300)
    assert done and done[0][-1].strip() == "data: [DONE]"


def test_client_disconnect_leaves_the_server_serving(real: Real) -> None:
    body = {"input_ids": [2000 + i for i in range(16)], "stream": True,
            "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}}  # fmt: skip
    first = _stream(real.base, "/generate", body, stop_after=2)
    assert len(first) == 2
    assert flush_cache(real.base, "/flush_cache", 60.0, timeout_param="timeout") is None
    assert httpx.get(real.base + "/health_generate", timeout=60).status_code == 200


def test_abort_request_is_a_failed_request_with_its_reason(real: Real) -> None:
    body = {
        "rid": "matrixrun-abort-1",
        "input_ids": [3000 + i for i in range(16)],
        "stream": True,
        "sampling_params": {"max_new_tokens": 400, "ignore_eos": True},
    }
    parser = make_parser("sglang")  # fmt: skip
    with httpx.Client(timeout=120) as c, c.stream("POST", real.base + "/generate", json=body) as r:
        aborted = False
        for chunk in r.iter_raw():
            parser.feed(chunk, time.perf_counter())
            if not aborted and parser.total >= 2:
                answer = httpx.post(real.base + "/abort_request", json={"rid": body["rid"]})
                assert answer.status_code == 200
                aborted = True
        parser.finish(time.perf_counter())
    assert parser.error == "aborted by the server: Aborted"
    assert 2 <= parser.total < 400  # the tokens before the abort still count


# ------------------------------------------------------------------ the simulator beside it


def _shape(value: Any, depth: int = 0) -> Any:
    """The structure of a JSON value: dicts as their keys' shapes, lists as their first
    element's, scalars as their type name (int and float alike: a count is a count)."""
    if isinstance(value, dict):
        return {k: _shape(v, depth + 1) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(value[0], depth + 1)] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


#: Fields of the real server's answers that the simulator leaves out on purpose: none of them
#: is read by matrixrun (checked by grep in the test below), so a missing one cannot hide a bug.
NOT_SIMULATED = {
    "weight_version", "weight_versions", "num_retractions", "reasoning_tokens", "dp_rank",
    "cached_tokens_details", "spec_verify_ct", "hidden_states", "routed_experts",
    "queue_time", "prefill_launch_delay", "prefill_launch_latency", "decode_launch_latency",
    "request_received_ts", "prefill_finished_ts", "decode_finished_ts", "inference_time",
    "system_fingerprint", "prompt_tokens_details", "matched_stop",
    "metadata", "reasoning_content", "tool_calls", "logprobs", "refusal", "annotations",
    "audio", "function_call", "token_ids", "name", "index",
}  # fmt: skip


def _keys(shape: Any, prefix: str = "") -> set[str]:
    if isinstance(shape, dict):
        out: set[str] = set()
        for k, v in shape.items():
            if k in NOT_SIMULATED:
                continue
            out.add(prefix + k)
            out |= _keys(v, prefix + k + ".")
        return out
    if isinstance(shape, list) and shape:
        return _keys(shape[0], prefix + "[].")
    return set()


def _event_keys(events: list[Any]) -> list[set[str]]:
    """First, middle and last event's keys, and whether the stream ends with [DONE]."""
    data = [e for e in events if e != "[DONE]"]
    picks = [data[0], data[len(data) // 2], data[-1]]
    return [_keys(_shape(e)) for e in picks] + [{"[DONE]"} if events[-1] == "[DONE]" else set()]


REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("/generate", {"input_ids": [1500 + i for i in range(12)], "stream": True,
                   "sampling_params": {"max_new_tokens": 6, "ignore_eos": True,
                                       "temperature": 0.0}}),
    ("/v1/completions", {"model": MODEL, "prompt": [1500 + i for i in range(12)],
                         "max_tokens": 6, "ignore_eos": True, "stream": True, "temperature": 0,
                         "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                              "max_tokens": 6, "ignore_eos": True, "stream": True,
                              "stream_options": {"include_usage": True}}),
]  # fmt: skip


def _chat(events: list[Any]) -> tuple[str, list[str], dict[str, Any]]:
    """A streamed chat answer: its text (the deltas' content), its finish reasons, its usage."""
    assert events[-1] == "[DONE]"
    data = [e for e in events if e != "[DONE]"]
    choices = [c for e in data for c in e.get("choices") or []]
    text = "".join(c.get("delta", {}).get("content") or "" for c in choices)
    finish = [c["finish_reason"] for c in choices if c.get("finish_reason")]
    usage = next(e["usage"] for e in reversed(data) if e.get("usage"))
    return text, finish, usage


def test_openai_chat_streams_the_answer_its_usage_and_finish(real: Real) -> None:
    """OpenAI chat completions (what genai-bench and other chat clients send), on the real
    server and on the simulator the rehearsal uses: content deltas, one finish reason
    (`length`: ignore_eos runs to max_tokens), usage with exactly max_tokens completion
    tokens, then [DONE]; the two agree on all of it but the text."""
    sys.path.insert(0, str(ROOT / "tests"))
    from simserver import start_sim

    path, body = REQUESTS[2]
    text, finish, usage = _chat(_stream(real.base, path, body))
    assert text and finish == ["length"]
    assert usage["completion_tokens"] == body["max_tokens"] and usage["prompt_tokens"] > 0
    with start_sim(["--model-path", MODEL]) as (_, sim):
        time.sleep(0.5)
        s_text, s_finish, s_usage = _chat(_stream(sim, path, body))
    assert s_text and s_finish == finish
    assert s_usage["completion_tokens"] == usage["completion_tokens"]


def test_the_simulator_answers_as_the_real_server_does(real: Real) -> None:
    """Shape, fields and events of the same requests, real vs simulated: a rehearsal can no
    longer drift from SGLang unnoticed (fields matrixrun never reads are listed above)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from simserver import start_sim

    with start_sim(["--model-path", MODEL]) as (_, sim):
        time.sleep(0.5)
        for path, body in REQUESTS:
            got = _event_keys(_stream(sim, path, body))
            want = _event_keys(_stream(real.base, path, body))
            for which, (g, w) in enumerate(zip(got, want, strict=True)):
                assert g == w, (
                    f"{path} event {which}: simulator lacks {sorted(w - g)}, "
                    f"has extra {sorted(g - w)}"
                )
        for path in ("/flush_cache",):
            s, r = httpx.post(sim + path, timeout=30), httpx.post(real.base + path, timeout=30)
            assert s.status_code == r.status_code == 200
            assert s.text.split(".")[0] == r.text.split(".")[0]  # "Cache flushed"
        s_info = httpx.get(sim + "/server_info", timeout=30).json()
        r_info = httpx.get(real.base + "/server_info", timeout=30).json()
        assert {"version", "model_path"} <= s_info.keys() & r_info.keys()


def test_sharegpt_and_a_mooncake_trace_against_the_real_server(real: Real, tmp_path: Path) -> None:
    """Issue 45's datasets on the real server: a ShareGPT-format file (prompts counted with the
    model's own tokenizer, replies' lengths as output lengths) and a Mooncake trace (its
    lengths, shared hash blocks the real radix cache finds, its schedule)."""
    words = ["the", "server", "measures", "tokens", "while", "its", "scheduler", "batches"]
    convs = [
        {"id": f"c{i}", "conversations": [
            {"from": "human", "value": " ".join(words[(i + k) % len(words)] for k in range(8 + i))},
            {"from": "gpt", "value": " ".join(words[(2 * i + k) % 8] for k in range(4 + i % 5))},
        ]}
        for i in range(6)
    ]  # fmt: skip
    sharegpt = tmp_path / "sharegpt.json"
    sharegpt.write_text(json.dumps(convs))
    trace = tmp_path / "trace.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]},
        {"timestamp": 300, "input_length": 560, "output_length": 6, "hash_ids": [0, 2]},
        {"timestamp": 700, "input_length": 100, "output_length": 3, "hash_ids": [3]},
    ]
    trace.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ids = ids_for(load_spec(SPEC).model[0], "token_ids", True)
    for ds, n in (
        (DatasetConfig(kind="sharegpt", path=str(sharegpt), tokenizer=MODEL,
                       id_low=ids.low, id_high=ids.high), 6),
        (DatasetConfig(kind="trace", path=str(trace), id_low=ids.low, id_high=ids.high), 3),
    ):  # fmt: skip
        assert flush_cache(real.base, "/flush_cache", 60.0, timeout_param="timeout") is None
        config = LoadConfig(
            base_url=real.base, num_prompts=n, input_len=8, output_len=8, concurrency=1,
            warmup_requests=0, seed=3, request_timeout_s=120, dataset=ds,
        )  # fmt: skip
        want = requests_for(ds, Cell(seed=3, count=n, input_len=8, output_len=8))
        t0 = time.monotonic()
        result = run_load_sync(config)
        assert result.metrics.completed == n, [r.error for r in result.records]
        got = sorted((r.prompt_tokens, r.output_tokens) for r in result.records)
        assert got == sorted((w.prompt_tokens, w.output_len) for w in want)
        if ds.kind == "trace":
            assert time.monotonic() - t0 >= 0.7  # its last request was due 0.7 s in
            # requests 2 and 1 share block 0 (512 tokens): the real cache finds it
            assert max(r.cached_tokens or 0 for r in result.records) >= 512


def test_stop_takes_the_whole_tree_and_frees_the_port(real: Real) -> None:
    """The module's server, stopped last (the tests above are done with it): no process of
    its session is left and its port binds again."""
    proc = real.server.proc  # type: ignore[attr-defined]
    real.server.stop()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"processes of the server's group {proc.pid} outlived stop()")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", real.launch.port))  # nothing listens there any more


# --------------------------------------------------------------------- whole runs, by the CLI


WORKLOAD = """workload: {dataset: shared_prefix, groups: 4, prompts_per_group: 4, system_len: 256,
           question_len: 32, output_len: 16, num_prompts: 16, warmup_requests: 1, seed: 1}"""
RANDOM = "workload: {dataset: random, input_len: 64, output_len: 16, num_prompts: 8, seed: 1}"


def _variant(tmp: Path, replace: dict[str, str]) -> Path:
    text = SPEC.read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp / "spec.yaml"
    path.write_text(text)
    return path


def _start(spec: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "matrixrun", "run", str(spec), "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=spec.parent,
    )  # fmt: skip


def _until_measured(out: Path, proc: subprocess.Popen[str], n: int = 1) -> None:
    """Wait for `n` measurements on file, then stop the run as a user would (Ctrl-C: it
    keeps what it measured and stops its server): a second launch would only cost CI time."""
    deadline = time.monotonic() + 900
    results = out / "results.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and len(results.read_text().splitlines()) >= n:
            break
        time.sleep(0.5)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=180)
    assert results.exists(), stdout + stderr[-3000:]


def _run(spec: Path, out: Path, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "matrixrun", "run", str(spec), "--out", str(out)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=spec.parent, check=False,
    )  # fmt: skip


def _measurements(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x]


def test_the_committed_two_arm_spec_runs_on_real_servers(tmp_path: Path) -> None:
    """spec/sglang_cpu.yaml as committed, but one run per arm: two launches keep CI short
    (the committed example, reports/sglang_cpu.md, ran it whole)."""
    spec = _variant(tmp_path, {"max_runs: 2": "max_runs: 1"})
    out = tmp_path / "run"
    res = _run(spec, out)
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    ms = _measurements(out)
    assert {m["arm"] for m in ms} == {"fcfs", "lpm"} and all(m["error"] is None for m in ms)
    assert not any(m["simulated"] for m in ms)
    env = json.loads((out / "env.json").read_text())
    servers = env["servers"].values()
    assert len({s["version"] for s in servers}) == 1 and None not in {s["version"] for s in servers}
    name, value = next(iter(load_spec(SPEC).engine.env.items()))
    assert all(s["env"][name] == value for s in servers)
    gates = [json.loads(p.read_text()) for p in (out / "correctness").glob("*.json")]
    assert len(gates) == 2 and all(g["answers"] and g["error"] is None for g in gates)
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    flushes = [e for e in events if e.get("event") == "flush_cache"]
    assert flushes and all(e["ok"] for e in flushes)
    # shared-prefix prompts: the real server reports what its radix cache found
    assert all(m["metrics"].get("total_cached_tokens", 0) > 0 for m in ms)
    report = (out / "report.md").read_text()
    assert "SIMULATED" not in report and "outputs agree" in report
    assert "Prefix cache hit rate" in report
    assert f"`{name}={value}`" in report  # engine.env, shown in Setup
    assert not (tmp_path / "reports").exists()  # --out: every file in the run directory


def test_bench_serving_measures_through_the_real_client(tmp_path: Path) -> None:
    """The real `sglang.benchmark.serving` measures a cell (its start-up not counted against
    the cell's limit); stopped after its first measurement."""
    spec = _variant(tmp_path, {
        "kind: sglang\n": f"kind: sglang\n  client: bench_serving\n  client_launch: "
                          f"[{PYTHON}, -m, sglang.benchmark.serving]\n",
        "sweep: {concurrency: [1, 4]}": "sweep: {concurrency: [2]}",
        "max_runs: 2": "max_runs: 1",
        "correctness: {enabled: true,": "correctness: {enabled: false,",
        WORKLOAD: RANDOM,  # bench_serving draws its own prompts: random-ids
    })  # fmt: skip
    out = tmp_path / "run"
    _until_measured(out, _start(spec, out))
    (m,) = _measurements(out)[:1]
    assert m["client"] == "bench_serving" and m["error"] is None, m["error"]
    assert m["metrics"]["completed"] == 8 and m["metrics"]["total_output_tokens"] == 8 * 16
    assert list((out / "bench_serving").glob("*/bench_serving.jsonl"))


def test_a_model_with_a_2048_token_vocabulary_runs_cleanly(tmp_path: Path) -> None:
    """Prompt ids drawn past a small vocabulary killed SGLang's scheduler (IndexError): the
    ids now come from the model's own vocabulary, the correctness gate's too."""
    spec = _variant(tmp_path, {
        "tiny-llama}": "tiny-llama-2k}",
        "sweep: {concurrency: [1, 4]}": "sweep: {concurrency: [2]}",
        "max_runs: 2": "max_runs: 1",
    })  # fmt: skip
    out = tmp_path / "run"
    res = _run(spec, out)
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    ms = _measurements(out)
    assert len(ms) == 2 and all(m["error"] is None for m in ms)
    gates = [json.loads(p.read_text()) for p in (out / "correctness").glob("*.json")]
    assert len(gates) == 2 and all(g["answers"] and g["error"] is None for g in gates)
    logs = "".join(p.read_text(errors="replace") for p in (out / "logs").glob("*.log"))
    assert "IndexError" not in logs


def test_a_server_that_dies_mid_cell_is_reported_with_its_first_error(tmp_path: Path) -> None:
    """An out-of-vocabulary id sent beside the cell kills the real scheduler, as in issue 42:
    the measurement names the phase and SGLang's own first error, not its teardown."""
    spec = _variant(tmp_path, {
        "sweep: {concurrency: [1, 4]}": "sweep: {concurrency: [1]}",
        "output_len: 16": "output_len: 200",
        "max_runs: 2": "max_runs: 1",
        "correctness: {enabled: true,": "correctness: {enabled: false,",
    })  # fmt: skip
    out = tmp_path / "run"
    proc = _start(spec, out)
    port = _cell_started(out, proc)
    bad = {"input_ids": [10**6], "sampling_params": {"max_new_tokens": 1}}
    with contextlib.suppress(httpx.HTTPError):  # it drops the connection as it dies
        httpx.post(f"http://127.0.0.1:{port}/generate", json=bad, timeout=60)
    _until_measured(out, proc)
    died = [m for m in _measurements(out) if m["error"]]
    assert died, "no measurement failed"
    error = died[0]["error"]
    assert "died" in error and "during the cell" in error, error
    assert "IndexError: index out of range in self" in error, error
    assert "SIGQUIT" not in error and "kill_process_tree" not in error
    rendered = subprocess.run(
        [sys.executable, "-m", "matrixrun", "analyse", str(out)], capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    report = subprocess.run(
        [sys.executable, "-m", "matrixrun", "report", str(out), "--out", "-"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "IndexError: index out of range in self" in report.stdout, report.stderr[-2000:]


def _hf_counts(texts: Sequence[str]) -> list[int]:
    """Token counts as SGLang's own client counts a ShareGPT prompt (`tokenizer.encode` of
    transformers' AutoTokenizer, in SGLang's venv), not as matrixrun does."""
    code = (
        "import json, sys; from transformers import AutoTokenizer; "
        "t = AutoTokenizer.from_pretrained(sys.argv[1]); "
        "print(json.dumps([len(t.encode(x)) for x in json.load(sys.stdin)]))"
    )
    res = subprocess.run(
        [PYTHON, "-c", code, MODEL], input=json.dumps(list(texts)), capture_output=True,
        text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    counts: list[int] = json.loads(res.stdout.strip().splitlines()[-1])
    return counts


@pytest.mark.parametrize("kind", ["sharegpt", "trace"])
def test_sharegpt_and_a_mooncake_trace_run_end_to_end(tmp_path: Path, kind: str) -> None:
    """Issue 45's file datasets through `matrixrun run` on a real server: the spec the
    simulator's test rehearses (tests/dataset_runs.py), stopped after the baseline arm's cells
    (one launch; the rehearsal runs both arms), analysed and reported. Prompt lengths as
    SGLang's tokenizer counts them, the trace's lengths, its shared block in the real radix
    cache, its schedule, and the dataset named in the report."""
    write = dataset_runs.write_sharegpt if kind == "sharegpt" else dataset_runs.write_mooncake
    data = write(tmp_path / ("sharegpt.json" if kind == "sharegpt" else "trace.jsonl"))
    spec = dataset_runs.dataset_spec(tmp_path, kind, data, MODEL)
    out = tmp_path / "run"
    _until_measured(out, _start(spec, out), n=len(dataset_runs.CONCURRENCY))
    for argv in (["analyse", str(out)], ["report", str(out)]):
        res = subprocess.run(
            [sys.executable, "-m", "matrixrun", *argv], capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    assert not any(m["simulated"] for m in _measurements(out))
    dataset_runs.check_dataset_run(out, kind, data, _hf_counts, arms=["fcfs"])


def _cell_started(out: Path, proc: subprocess.Popen[str]) -> int:
    """The port of the first launch, once its first cell's flush is on file."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before its first cell: {proc.communicate()}")
        events_file = out / "events.jsonl"
        if events_file.exists():
            events = [json.loads(x) for x in events_file.read_text().splitlines() if x]
            if any(e.get("event") == "flush_cache" for e in events):
                time.sleep(2.0)  # the cell's requests are in flight
                return int(next(e["port"] for e in events if e.get("event") == "launch"))
        time.sleep(0.5)
    pytest.fail("no cell started within 900 s")

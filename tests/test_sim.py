"""The simulator as a real subprocess: wire formats, timing against the profile, batching,
stream intervals, effects, flags, rule selection, determinism and divergence.

Timing tolerances are generous (this runs on a loaded 2-core machine beside other tests) but
each one still separates the modelled value from the obvious wrong ones (e.g. a batched step
versus a single one, half versus full time at time_scale 2).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from simserver import start_sim

from matrixrun.sim.tokens import prompt_key, reference_token, render, text_to_ids

pytestmark = pytest.mark.timeout(60)

PROMPT = list(range(100, 164))


def profile(
    step_ms: Any = ((1, 20),),
    *,
    prefill: float = 0.0,
    stream_interval: int = 1,
    rules: list[dict[str, Any]] | None = None,
    effects: dict[str, Any] | None = None,
    effect_rules: list[dict[str, Any]] | None = None,
    **curve: Any,
) -> list[str]:
    data = {
        "name": "test",
        "stream_interval": stream_interval,
        "base": {"step_ms": [list(p) for p in step_ms], "prefill_ms_per_token": prefill, **curve},
        "rules": rules or [],
        "effects": effects or {},
        "effect_rules": effect_rules or [],
    }
    return ["--profile-json", json.dumps(data)]


def native(n: int, prompt: list[int] = PROMPT, stream: bool = True, **sp: Any) -> dict[str, Any]:
    return {
        "input_ids": prompt,
        "sampling_params": {"max_new_tokens": n, "ignore_eos": True, "temperature": 0.0, **sp},
        "stream": stream,
    }


def sse(raw: str) -> list[str]:
    """The data payloads of an SSE body, checking the framing on the way."""
    assert raw.endswith("\n\n")
    payloads = []
    for block in raw.split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        payloads.append(block[6:])
    return payloads


async def timed_stream(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[float]:
    """Arrival times (since send) of each token (a native event that merged k pending tokens,
    as SGLang merges them when its handler is behind, counts k times), then of [DONE]."""
    t0 = time.perf_counter()
    times: list[float] = []
    seen = 0
    async with client.stream("POST", path, json=body) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                now = time.perf_counter() - t0
                payload = line[6:]
                meta = json.loads(payload).get("meta_info", {}) if payload != "[DONE]" else {}
                count = meta.get("completion_tokens") if isinstance(meta, dict) else None
                k = count - seen if isinstance(count, int) and count > seen else 1
                seen = count if isinstance(count, int) else seen
                times += [now] * k
    return times


def run_streams(
    base: str, bodies: list[dict[str, Any]], path: str = "/generate"
) -> list[list[float]]:
    async def go() -> list[list[float]]:
        limits = httpx.Limits(max_connections=len(bodies) + 4)
        async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as c:
            return list(await asyncio.gather(*(timed_stream(c, path, b) for b in bodies)))

    return asyncio.run(go())


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    """A fast general-purpose server for format tests."""
    with start_sim(["--model-path", "sim/m", *profile(((1, 10),)), "--time-scale", "5"]) as (
        _,
        base,
    ):
        yield base


# -- formats -------------------------------------------------------------------------------


def test_native_stream_is_cumulative_with_meta_info_and_done(sim: str) -> None:
    r = httpx.post(sim + "/generate", json=native(6), timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    payloads = sse(r.text)
    assert payloads[-1] == "[DONE]"
    events = [json.loads(p) for p in payloads[:-1]]
    assert len(events) == 6
    want = [reference_token(prompt_key(PROMPT), i) for i in range(6)]
    for k, ev in enumerate(events, start=1):
        assert ev["output_ids"] == want[:k]
        assert ev["text"] == "".join(render(t) for t in want[:k])
        meta = ev["meta_info"]
        assert meta["completion_tokens"] == k
        assert meta["prompt_tokens"] == len(PROMPT)
        assert meta["id"] == events[0]["meta_info"]["id"]
        assert (meta["finish_reason"] is None) == (k < 6)
    last = events[-1]["meta_info"]
    assert last["finish_reason"] == {"type": "length", "length": 6}
    assert 0 < last["e2e_latency"] < 5


def test_native_non_streaming_and_text_prompt(sim: str) -> None:
    r = httpx.post(sim + "/generate", json=native(5, stream=False), timeout=10)
    body = r.json()
    assert body["output_ids"] == [reference_token(prompt_key(PROMPT), i) for i in range(5)]
    assert body["text"] == "".join(render(t) for t in body["output_ids"])
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 5}
    assert body["meta_info"]["completion_tokens"] == 5
    # text prompts: one token per word, and rendered ids tokenize back to themselves
    text = {"text": "the quick t1234 fox", "sampling_params": {"max_new_tokens": 2}}
    r = httpx.post(sim + "/generate", json=text, timeout=10)
    assert r.json()["meta_info"]["prompt_tokens"] == 4
    assert text_to_ids(" t1234 t5678") == [1234, 5678]


def test_openai_stream_chunks_and_usage_last(sim: str) -> None:
    body = {
        "model": "sim/m",
        "prompt": PROMPT,
        "max_tokens": 5,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    r = httpx.post(sim + "/v1/completions", json=body, timeout=10)
    payloads = sse(r.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 64, "completion_tokens": 5, "total_tokens": 69}
    text_chunks = chunks[:-1]
    assert len(text_chunks) == 5
    assert all(c["object"] == "text_completion" and c["model"] == "sim/m" for c in text_chunks)
    assert [c["choices"][0]["finish_reason"] for c in text_chunks] == [None] * 4 + ["length"]
    want = [reference_token(prompt_key(PROMPT), i) for i in range(5)]
    assert "".join(c["choices"][0]["text"] for c in text_chunks) == "".join(map(render, want))
    assert len({c["id"] for c in chunks}) == 1


def test_chat_stream_deltas_and_whole_response(sim: str) -> None:
    """Clients that speak only chat (genai-bench): the messages' words are the prompt."""
    words = " ".join(f"t{i}" for i in range(1000, 1010))
    body = {
        "model": "sim/m",
        "messages": [{"role": "system", "content": "t1 t2"}, {"role": "user", "content": words}],
        "max_completion_tokens": 4,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    payloads = sse(httpx.post(sim + "/v1/chat/completions", json=body, timeout=10).text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 12
    # as SGLang 0.5.23 streams a chat (tests/test_sglang_real.py): a role chunk with empty
    # content, one chunk per step, then an empty delta with the finish reason; no usage key
    role, *deltas, end = chunks[:-1]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert end["choices"][0]["delta"] == {} and end["choices"][0]["finish_reason"] == "length"
    assert len(deltas) == 4 and all(c["object"] == "chat.completion.chunk" for c in deltas)
    assert [c["choices"][0]["finish_reason"] for c in deltas] == [None] * 4
    assert not any("usage" in c for c in [role, *deltas, end])
    text = "".join(c["choices"][0]["delta"]["content"] for c in deltas)
    assert len(text.split()) == 4
    whole = httpx.post(sim + "/v1/chat/completions", json={**body, "stream": False}).json()
    assert whole["object"] == "chat.completion"
    assert whole["choices"][0]["message"]["content"] == text  # greedy: the same tokens
    assert whole["usage"]["completion_tokens"] == 4
    bad = httpx.post(sim + "/v1/chat/completions", json={"messages": []}, timeout=10)
    assert bad.status_code == 400


@pytest.mark.parametrize(
    "prompt",
    [" ".join(f"t{i}" for i in range(1000, 1010)), [list(range(10))], ["a b c d e f g h i j"]],
)
def test_openai_prompt_forms_and_non_streaming(sim: str, prompt: Any) -> None:
    body = {"prompt": prompt, "max_tokens": 3, "return_token_ids": True}
    out = httpx.post(sim + "/v1/completions", json=body, timeout=10).json()
    assert out["usage"] == {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    choice = out["choices"][0]
    assert choice["finish_reason"] == "length"
    assert len(choice["token_ids"]) == 3


def test_bad_requests_are_400_json(sim: str) -> None:
    for body in ({"sampling_params": {}}, {"input_ids": ["x"]}, native(-1)):
        r = httpx.post(sim + "/generate", json=body, timeout=10)
        assert r.status_code == 400
        assert r.json()["object"] == "error"
    assert httpx.get(sim + "/nope").status_code == 404
    assert httpx.get(sim + "/generate").status_code == 405


def test_info_endpoints(sim: str) -> None:
    assert httpx.get(sim + "/health").status_code == 200
    assert httpx.get(sim + "/health_generate").status_code == 200
    info = httpx.get(sim + "/get_server_info").json()
    assert info == {**httpx.get(sim + "/server_info").json(), "sim_stats": info["sim_stats"]}
    assert info["simulated"] is True and info["version"].startswith("matrixrun-sim ")
    assert info["time_scale"] == 5.0 and info["profile"] == "test"
    assert info["internal_states"][0]["max_running_requests"] is None
    assert httpx.get(sim + "/v1/models").json()["data"][0]["id"] == "sim/m"
    assert httpx.post(sim + "/flush_cache").status_code == 200
    assert httpx.get(sim + "/flush_cache").status_code == 200
    stats = httpx.get(sim + "/get_server_info").json()["sim_stats"]
    assert stats["write_lateness_ms"]["count"] == 0  # flush starts a new window


# -- timing and batching -------------------------------------------------------------------


def test_timing_follows_the_profile_and_time_scale() -> None:
    args = profile(((1, 20),))
    with start_sim(args) as (_, full), start_sim([*args, "--time-scale", "2"]) as (_, half):
        (t_full,) = run_streams(full, [native(50)])
        (t_half,) = run_streams(half, [native(50)])
    # 50 tokens x 20 ms = 1.0 s modelled; the first token costs one step (no prefill cost)
    assert 0.95 < t_full[-1] < 1.35, t_full[-1]
    assert 0.47 < t_half[-1] < 0.75, t_half[-1]
    assert 0.015 < t_full[0] < 0.12
    # no drift: the mean inter-event gap is the step
    gaps = (t_full[-2] - t_full[0]) / 49
    assert 0.019 < gaps < 0.023, gaps


def test_continuous_batching_step_grows_with_batch_and_queue_caps_it() -> None:
    args = [*profile(((1, 10), (8, 45))), "--max-running-requests", "8"]
    with start_sim(args) as (_, base):
        (single,) = run_streams(base, [native(20)])
        batch = run_streams(base, [native(20, prompt=[i, 1, 2]) for i in range(8)])
        queued = run_streams(base, [native(10, prompt=[i, 7]) for i in range(16)])
    itl_single = (single[-2] - single[0]) / 19
    itl_batch = sum((t[-2] - t[0]) / 19 for t in batch) / len(batch)
    assert 0.009 < itl_single < 0.014, itl_single
    assert 0.040 < itl_batch < 0.055, itl_batch  # step_time(8) = 45 ms
    # 16 requests, 8 slots: the second wave starts when the first finishes (~10 x 45 ms)
    ends = sorted(t[-1] for t in queued)
    assert ends[7] < 0.6 and ends[8] > 0.8, ends


def test_stream_interval_flag_and_profile_default() -> None:
    with start_sim([*profile(((1, 5),), stream_interval=3)]) as (_, base):
        r = httpx.post(base + "/generate", json=native(10), timeout=10)
        counts = [json.loads(p)["meta_info"]["completion_tokens"] for p in sse(r.text)[:-1]]
        assert counts == [1, 3, 6, 9, 10]
        info = httpx.get(base + "/get_server_info").json()
        assert info["stream_interval"] == 3
    with start_sim([*profile(((1, 5),), stream_interval=3), "--stream-interval", "4"]) as (_, b):
        r = httpx.post(b + "/generate", json=native(10), timeout=10)
        counts = [json.loads(p)["meta_info"]["completion_tokens"] for p in sse(r.text)[:-1]]
        assert counts == [1, 4, 8, 10]
        body = {"prompt": [1, 2], "max_tokens": 10, "stream": True}
        chunks = sse(httpx.post(b + "/v1/completions", json=body, timeout=10).text)
        assert len(chunks) == 4 + 1


# -- flags, rules, determinism -------------------------------------------------------------


def test_flags_recorded_and_rules_select_the_curve() -> None:
    rules = [{"when": {"moe_runner_backend": "fast"}, "set": {"step_ms": [[1, 4]]}}]
    args = profile(((1, 30),), rules=rules)
    flags = ["--tp", "4", "--moe-runner-backend", "fast", "--cuda-graph-bs", "1", "2", "4",
             "--enable-foo", "--mem-fraction-static", "0.85", "--seed", "7"]  # fmt: skip
    with start_sim([*args, *flags]) as (_, fast), start_sim(args) as (_, slow):
        info = httpx.get(fast + "/get_server_info").json()
        assert info["tp_size"] == 4
        assert info["moe_runner_backend"] == "fast"
        assert info["cuda_graph_bs"] == [1, 2, 4]
        assert info["enable_foo"] is True
        assert info["mem_fraction_static"] == 0.85
        assert info["sim_seed"] == 7 and "seed" not in info
        assert info["sim_profile"]["curve"]["step_ms"] == [[1.0, 4.0]]
        slow_info = httpx.get(slow + "/get_server_info").json()
        assert slow_info["sim_profile"]["curve"]["step_ms"] == [[1.0, 30.0]]
        (t_fast,) = run_streams(fast, [native(20)])
        (t_slow,) = run_streams(slow, [native(20)])
        assert t_fast[-1] < 0.2 < 0.55 < t_slow[-1]
        # same prompt, different flags and seeds: the same greedy tokens
        a = httpx.post(fast + "/generate", json=native(12, stream=False)).json()
        b = httpx.post(slow + "/generate", json=native(12, stream=False)).json()
        assert a["output_ids"] == b["output_ids"] and a["text"] == b["text"]
        # sampling is not greedy: other tokens
        c = httpx.post(slow + "/generate", json=native(12, stream=False, temperature=0.8)).json()
        assert c["output_ids"] != b["output_ids"]


def test_divergence_after_k_tokens() -> None:
    eff = [{"when": {"attention_backend": "buggy"}, "set": {"diverge_after_tokens": 5}}]
    args = profile(((1, 2),), effect_rules=eff)
    with (
        start_sim(args) as (_, ref),
        start_sim([*args, "--attention-backend", "buggy"]) as (_, bad),
    ):
        a = httpx.post(ref + "/generate", json=native(20, stream=False)).json()["output_ids"]
        b = httpx.post(bad + "/generate", json=native(20, stream=False)).json()["output_ids"]
        assert a[:5] == b[:5]
        assert all(x != y for x, y in zip(a[5:], b[5:], strict=True))
        body = {"prompt": PROMPT, "max_tokens": 20, "return_token_ids": True, "temperature": 0}
        o = httpx.post(bad + "/v1/completions", json=body).json()
        assert o["choices"][0]["token_ids"] == b


# -- effects -------------------------------------------------------------------------------


def test_error_rate_one_answers_500() -> None:
    with start_sim(profile(effects={"error_rate": 1.0})) as (_, base):
        r = httpx.post(base + "/generate", json=native(3), timeout=10)
        assert r.status_code == 500
        assert r.json()["object"] == "error" and "simulated" in r.json()["message"]
        r = httpx.post(base + "/v1/completions", json={"prompt": [1], "max_tokens": 2})
        assert r.status_code == 500
        info = httpx.get(base + "/get_server_info").json()
        assert info["sim_stats"]["errors_injected"] == 2


def test_malformed_stream_has_a_non_json_line() -> None:
    with start_sim(profile(((1, 2),), effects={"malformed_rate": 1.0})) as (_, base):
        payloads = sse(httpx.post(base + "/generate", json=native(4), timeout=10).text)
        bad = []
        for p in payloads[:-1]:
            try:
                json.loads(p)
            except ValueError:
                bad.append(p)
        assert len(bad) == 1 and payloads[-1] == "[DONE]"


def test_slow_start_then_ready() -> None:
    with start_sim(profile(effects={"slow_start_s": 1.5})) as (_, base):
        assert httpx.get(base + "/health_generate").status_code == 503
        t0 = time.monotonic()
        while httpx.get(base + "/health_generate").status_code != 200:
            assert time.monotonic() - t0 < 15  # ready at 1.5 s; a busy host only delays it
            time.sleep(0.05)
        assert time.monotonic() - t0 > 0.7


def test_crash_exits_the_process() -> None:
    with start_sim(profile(effects={"crash_after_s": 0.8})) as (proc, _):
        assert proc.wait(timeout=10) != 0
        assert "simulated crash" in proc.log()


def test_hang_stops_tokens_and_health_generate() -> None:
    with start_sim(profile(((1, 10),), effects={"hang_after_s": 0.6})) as (_, base):
        time.sleep(0.8)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(base + "/generate", json=native(5, stream=False), timeout=1.0)
        assert httpx.get(base + "/health_generate").status_code == 503


def test_client_disconnect_frees_the_slot() -> None:
    with start_sim([*profile(((1, 20),)), "--max-running-requests", "1"]) as (_, base):
        with httpx.stream("POST", base + "/generate", json=native(1000), timeout=10) as r:
            next(r.iter_lines())  # first event, then hang up
        t0 = time.monotonic()
        r2 = httpx.post(base + "/generate", json=native(3, stream=False), timeout=10)
        # the slot is free: the held request would have taken 1000 tokens x 20 ms = 20 s
        assert r2.status_code == 200 and time.monotonic() - t0 < 5.0
        stats = httpx.get(base + "/get_server_info").json()["sim_stats"]
        assert stats["aborted"] == 1


def test_sigterm_exits_cleanly() -> None:
    with start_sim(profile()) as (proc, _):
        assert "Uvicorn running on http://127.0.0.1:" in proc.log()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


@pytest.mark.parametrize("chunk", [None, 100])
def test_chunked_prefill_admits_prompts_in_token_budgets(chunk: int | None) -> None:
    """Four 100-token prompts queued together; prefill costs 1 ms a token, a step 5 ms. Without
    a budget one iteration prefills all four (first tokens together, 405 ms in); with a budget
    of 100 tokens one prompt is admitted per iteration (first tokens 105 ms apart). Read off
    the batcher's deadlines, which are the model's times, so machine load cannot blur them."""
    from matrixrun.core.profile import Curve
    from matrixrun.sim.batcher import Batcher, SimRequest

    curve = Curve(step_ms=[(1.0, 5.0)], prefill_ms_per_token=1.0, chunked_prefill_size=chunk)

    class FirstToken:
        def __init__(self) -> None:
            self.at: float | None = None

        def emit(self, produced: int, finished: bool, deadline: float) -> None:
            if self.at is None and produced >= 1:
                self.at = deadline

    async def scenario() -> list[float]:
        batcher = Batcher(curve)
        sinks = [FirstToken() for _ in range(4)]
        for sink in sinks:
            batcher.submit(SimRequest(100, 3, True, sink))
        task = asyncio.create_task(batcher.run())
        while any(s.at is None for s in sinks):
            await asyncio.sleep(0.01)
        task.cancel()
        # From the engine's own start, not from before the task was scheduled: on a busy CI
        # host the loop took 23 ms to start it, which is not the model's time.
        assert batcher.started_at is not None
        return sorted((s.at or 0.0) - batcher.started_at for s in sinks)

    firsts = asyncio.run(scenario())
    if chunk is None:
        assert max(firsts) - min(firsts) < 1e-6
        assert firsts[0] == pytest.approx(0.405, abs=1e-6)
    else:
        gaps = [b - a for a, b in itertools.pairwise(firsts)]
        assert gaps == [pytest.approx(0.105, abs=1e-3)] * 3

"""The simulator's prefix cache: the radix tree alone, the batcher's use of it (cached prompt
tokens skip prefill, `--schedule-policy lpm` orders the queue by cached prefix), and the live
server (`cached_tokens` in SGLang's meta_info and, with `--enable-cache-report`, in OpenAI
usage; `/flush_cache` empties it; `--disable-radix-cache` turns it off).

Scheduling tests read the batcher's deadlines (the model's times), so machine load cannot
blur them; the live-server tests compare requests within one server, with wide margins.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import httpx
import pytest
from simserver import start_sim

from matrixrun.core.profile import Curve
from matrixrun.sim.batcher import LPM_QUEUE_LIMIT, Batcher, SimRequest
from matrixrun.sim.prefix_cache import RadixCache

pytestmark = pytest.mark.timeout(90)


# -- the radix tree -------------------------------------------------------------------------


def test_match_is_the_longest_cached_prefix() -> None:
    cache = RadixCache(1000)
    assert cache.match([1, 2, 3]) == 0
    assert cache.insert([1, 2, 3, 4]) == 4
    assert cache.match([1, 2, 3, 4, 5]) == 4
    assert cache.match([1, 2, 9]) == 2
    assert cache.match([7, 1, 2]) == 0
    # a prompt that parts from the cached run mid-edge splits it and stores only its tail
    assert cache.insert([1, 2, 8, 8]) == 2
    assert cache.size == 6
    assert cache.match([1, 2, 8, 8, 1]) == 4
    assert cache.match([1, 2, 3, 4]) == 4
    assert cache.insert([1, 2, 3, 4]) == 0


def test_pages_round_matches_down() -> None:
    cache = RadixCache(1000, page_size=4)
    assert cache.insert(list(range(10))) == 8  # the last partial page is not stored
    assert cache.match(list(range(10))) == 8
    assert cache.match([0, 1, 2, 3, 4, 5, 99, 7]) == 4  # parts inside the second page


def test_capacity_evicts_least_recently_used_leaves() -> None:
    cache = RadixCache(10)
    cache.insert([1] * 4)
    cache.insert([2] * 4)
    assert cache.match([1] * 4) == 4  # [1]*4 is now the more recently used
    cache.insert([3] * 4)  # 12 > 10: the least recently used leaf goes
    assert cache.size == 8
    assert cache.match([2] * 4) == 0
    assert cache.match([1] * 4) == 4 and cache.match([3] * 4) == 4
    assert cache.stats.evicted_tokens == 4


def test_a_shared_prefix_outlives_its_branches() -> None:
    """A run that other cached runs extend is evicted only after them (leaves first), and
    a lookup keeps a branch: the two oldest branches go, the shared prefix stays."""
    cache = RadixCache(14)
    prefix = [5] * 8
    cache.insert([*prefix, 1, 1])
    cache.insert([*prefix, 2, 2])
    cache.insert([*prefix, 3, 3])  # 14 tokens: full
    cache.match([*prefix, 2, 2])
    cache.insert([9] * 4)  # 18: 4 tokens must go, the two least recently used branches
    assert cache.size == 14
    assert cache.match([*prefix, 2, 2]) == 10
    assert cache.match([*prefix, 1, 1]) == 8
    assert cache.match([*prefix, 3, 3]) == 8
    assert cache.match([9] * 4) == 4


def test_clear_empties() -> None:
    cache = RadixCache(100)
    cache.insert([1, 2, 3])
    cache.clear()
    assert cache.size == 0 and cache.match([1, 2, 3]) == 0


def test_random_prompts_agree_with_a_brute_force_prefix_search() -> None:
    """Against the definition: the longest common prefix with any stored prompt (no eviction)."""
    rng = random.Random(3)
    cache = RadixCache(10**9)
    stored: list[list[int]] = []
    for _ in range(300):
        base = rng.choice(stored) if stored and rng.random() < 0.6 else []
        cut = rng.randint(0, len(base))
        ids = base[:cut] + [rng.randint(0, 5) for _ in range(rng.randint(1, 12))]
        want = max((_lcp(ids, s) for s in stored), default=0)
        assert cache.match(ids) == want
        cache.insert(ids)
        stored.append(ids)
    assert cache.size == _distinct_prefixes(stored)


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _distinct_prefixes(prompts: list[list[int]]) -> int:
    return len({tuple(p[: i + 1]) for p in prompts for i in range(len(p))})


# -- the batcher ----------------------------------------------------------------------------


class FirstToken:
    def __init__(self) -> None:
        self.at: float | None = None

    def emit(self, produced: int, finished: bool, deadline: float) -> None:
        if self.at is None and produced >= 1:
            self.at = deadline


def _run(batcher: Batcher, reqs: list[SimRequest], sinks: list[FirstToken]) -> list[float]:
    async def scenario() -> list[float]:
        for r in reqs:
            batcher.submit(r)
        t0 = time.monotonic()
        task = asyncio.create_task(batcher.run())
        while any(s.at is None for s in sinks):
            await asyncio.sleep(0.005)
        task.cancel()
        return [(s.at or 0.0) - t0 for s in sinks]

    return asyncio.run(scenario())


def test_cached_prompt_tokens_skip_prefill() -> None:
    """Two 400-token prompts sharing 300 tokens, one after the other (1 ms a prefill token):
    the second pays for 100 tokens, and reports 300 cached."""
    curve = Curve(step_ms=[(1.0, 5.0)], prefill_ms_per_token=1.0)
    shared = list(range(1000, 1300))
    prompts = [shared + [1] * 100, shared + [2] * 100]

    def ttft(cache: RadixCache | None) -> tuple[list[float], list[int]]:
        out, cached = [], []
        for p in prompts:  # one at a time, on one batcher
            sink = FirstToken()
            req = SimRequest(len(p), 1, True, sink, p)
            out.append(_run(batcher, [req], [sink])[0])
            cached.append(req.cached)
        return out, cached

    batcher = Batcher(curve, cache=RadixCache(10_000))
    times, cached = ttft(batcher.cache)
    assert cached == [0, 300]
    assert times[0] == pytest.approx(0.405, abs=0.03)
    assert times[1] == pytest.approx(0.105, abs=0.03)
    batcher = Batcher(curve)  # --disable-radix-cache
    times, cached = ttft(None)
    assert cached == [0, 0]
    assert times[1] == pytest.approx(0.405, abs=0.03)


def test_a_fully_cached_prompt_still_computes_its_last_token() -> None:
    cache = RadixCache(1000)
    batcher = Batcher(Curve(step_ms=[(1.0, 1.0)]), cache=cache)
    p = list(range(50))
    cache.insert(p)
    sink = FirstToken()
    req = SimRequest(len(p), 1, True, sink, p)
    _run(batcher, [req], [sink])
    assert req.cached == 49  # SGLang: 8 of a repeated 9-token prompt (transcripts)


def shared_prefix_prompts(
    groups: int, per_group: int, system_len: int, question_len: int, seed: int = 0
) -> list[list[int]]:
    """SGLang's generated-shared-prefix shape, shuffled: each group's system prompt, then a
    question of its own."""
    rng = random.Random(seed)
    systems = [[rng.randrange(1000, 30000) for _ in range(system_len)] for _ in range(groups)]
    prompts = [
        s + [rng.randrange(1000, 30000) for _ in range(question_len)]
        for s in systems
        for _ in range(per_group)
    ]
    rng.shuffle(prompts)
    return prompts


def _queue_run(prompts: list[list[int]], lpm: bool, capacity: int) -> tuple[float, int]:
    """Every prompt queued at once; the mean first-token time after the first one (model
    seconds) and the prompt tokens found cached."""
    curve = Curve(step_ms=[(1.0, 2.0)], prefill_ms_per_token=0.05, chunked_prefill_size=4096)
    batcher = Batcher(curve, cache=RadixCache(capacity), lpm=lpm, time_scale=20.0)
    sinks = [FirstToken() for _ in prompts]
    reqs = [SimRequest(len(p), 4, True, s, p) for p, s in zip(prompts, sinks, strict=True)]
    firsts = _run(batcher, reqs, sinks)
    # after the first first token: deadlines are absolute from the loop's start, so only a
    # late start (host load) could shift them all, and this takes it out
    start = min(firsts)
    return sum(f - start for f in firsts) / len(firsts) * 20.0, sum(r.cached for r in reqs)


def test_lpm_beats_fcfs_on_a_shared_prefix_queue() -> None:
    """16 groups × 6 prompts of a 1,024-token system prompt, queued at once; the cache holds
    4 system prompts. fcfs takes them in their shuffled order and keeps evicting the prefix
    the next request needs; lpm serves the cached group first and sends a new prefix's
    followers back until one of them has computed it: more tokens cached, earlier first
    tokens."""
    prompts = shared_prefix_prompts(16, 6, 1024, 32, seed=1)
    assert len(prompts) <= LPM_QUEUE_LIMIT
    fcfs_ttft, fcfs_cached = _queue_run(prompts, lpm=False, capacity=4 * 1100)
    lpm_ttft, lpm_cached = _queue_run(prompts, lpm=True, capacity=4 * 1100)
    assert lpm_cached > 1.5 * fcfs_cached
    assert lpm_ttft < 0.85 * fcfs_ttft


def test_lpm_is_fcfs_on_random_prompts() -> None:
    """No shared prefix: nothing to find, the same order, the same times."""
    rng = random.Random(2)
    prompts = [[rng.randrange(1000, 30000) for _ in range(512)] for _ in range(64)]
    fcfs = _queue_run(prompts, lpm=False, capacity=1 << 20)
    lpm = _queue_run(prompts, lpm=True, capacity=1 << 20)
    assert fcfs[1] == lpm[1] == 0
    assert lpm[0] == pytest.approx(fcfs[0], rel=0.05)


# -- the live server ------------------------------------------------------------------------


def _profile() -> list[str]:
    data = {
        "name": "cache",
        "base": {"step_ms": [[1, 4]], "prefill_ms_per_token": 0.2},
    }
    return ["--profile-json", json.dumps(data)]


def _native(prompt: list[int], stream: bool = True) -> dict[str, Any]:
    return {
        "input_ids": prompt,
        "sampling_params": {"max_new_tokens": 4, "ignore_eos": True, "temperature": 0.0},
        "stream": stream,
    }


def _stream(client: httpx.Client, prompt: list[int]) -> tuple[float, list[int]]:
    """TTFT (s) and each event's meta_info.cached_tokens."""
    t0 = time.perf_counter()
    first: float | None = None
    cached: list[int] = []
    with client.stream("POST", "/generate", json=_native(prompt)) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: {"):
                first = first or time.perf_counter() - t0
                cached.append(json.loads(line[6:])["meta_info"]["cached_tokens"])
    assert first is not None
    return first, cached


def test_server_reports_cached_tokens_and_prefills_less() -> None:
    """A 2,000-token prefix at 0.2 ms a token is 400 ms of prefill; a request that finds it
    cached starts within a fraction of that. cached_tokens is on every event, as in
    SGLang's stream (transcripts/generate_stream.txt), and /flush_cache forgets it."""
    prefix = list(range(1000, 3000))
    with start_sim(_profile()) as (_, url), httpx.Client(base_url=url, timeout=30) as c:
        cold, cached_cold = _stream(c, [*prefix, 5, 6, 7])
        warm, cached_warm = _stream(c, [*prefix, 8, 9, 10])
        assert set(cached_cold) == {0}
        assert set(cached_warm) == {2000}
        assert warm < 0.6 * cold
        whole = c.post("/generate", json=_native([*prefix, 8, 9, 10], stream=False)).json()
        assert whole["meta_info"]["cached_tokens"] == 2002  # all but the last token
        info = c.get("/server_info").json()
        assert info["sim_stats"]["cached_tokens"] == 4002
        assert c.post("/flush_cache").status_code == 200
        _, after = _stream(c, [*prefix, 8, 9, 10])
        assert set(after) == {0}


def test_disable_radix_cache_and_openai_cache_report() -> None:
    prefix = list(range(1000, 1200))
    body = {"model": "m", "prompt": prefix, "max_tokens": 2, "temperature": 0}
    with (
        start_sim([*_profile(), "--enable-cache-report"]) as (_, url),
        httpx.Client(base_url=url, timeout=30) as c,
    ):
        first = c.post("/v1/completions", json=body).json()["usage"]
        again = c.post("/v1/completions", json=body).json()["usage"]
    assert "prompt_tokens_details" not in first  # 0 cached: left out, as SGLang does
    assert again["prompt_tokens_details"] == {"cached_tokens": 199}
    with (
        start_sim([*_profile(), "--disable-radix-cache"]) as (_, url),
        httpx.Client(base_url=url, timeout=30) as c,
    ):
        c.post("/generate", json=_native(prefix, stream=False))
        meta = c.post("/generate", json=_native(prefix, stream=False)).json()["meta_info"]
        info = c.get("/server_info").json()
    assert meta["cached_tokens"] == 0
    assert info["sim_stats"]["prefix_cache"] is None


def test_without_cache_report_openai_usage_has_no_details() -> None:
    prefix = list(range(1000, 1200))
    body = {"model": "m", "prompt": prefix, "max_tokens": 2, "temperature": 0}
    with start_sim(_profile()) as (_, url), httpx.Client(base_url=url, timeout=30) as c:
        c.post("/v1/completions", json=body)
        usage = c.post("/v1/completions", json=body).json()["usage"]
    assert "prompt_tokens_details" not in usage


# -- the load client ------------------------------------------------------------------------


def test_the_client_reads_cached_tokens_from_either_api() -> None:
    from matrixrun.load.aggregate import compute_metrics
    from matrixrun.load.apis import make_parser
    from matrixrun.load.records import RequestRecord, dumps_jsonl, loads_jsonl

    native = make_parser("sglang")
    native.feed(
        b'data: {"text":" a","meta_info":{"completion_tokens":1,"cached_tokens":8,'
        b'"cached_tokens_details":{"device":8,"host":0}}}\n\ndata: [DONE]\n\n',
        1.0,
    )
    assert native.cached == 8
    openai = make_parser("openai")
    openai.feed(
        b'data: {"choices":[{"text":"a","finish_reason":"length"}],"usage":null}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,'
        b'"prompt_tokens_details":{"cached_tokens":7}}}\n\ndata: [DONE]\n\n',
        1.0,
    )
    assert openai.cached == 7
    silent = make_parser("openai")
    silent.feed(b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1}}\n\n', 1.0)
    assert silent.cached is None

    def rec(i: int, cached: int | None) -> RequestRecord:
        return RequestRecord(
            i=i, start=0.0, ttft=0.1, e2e=0.2, t=[0.1], n=[1], **{"in": 100}, out=1, c=cached
        )

    records = [rec(0, 80), rec(1, 0), rec(2, 60)]
    metrics = compute_metrics(records)
    assert metrics.total_cached_tokens == 140 and metrics.cache_hit_rate == pytest.approx(140 / 300)
    assert loads_jsonl(dumps_jsonl(records))[0].cached_tokens == 80
    assert '"c"' not in dumps_jsonl([rec(0, None)])  # a server that says nothing: no key
    assert compute_metrics([rec(0, None)]).total_cached_tokens is None
    assert "total_cached_tokens" not in compute_metrics([rec(0, None)]).model_dump_json()

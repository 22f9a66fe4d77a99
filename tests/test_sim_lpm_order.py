"""lpm's ordering as SGLang words it, at a cost the simulator's clock can afford.

The simulator sorts its waiting queue before every admission, on the time it models: a sort
that costs more than an iteration makes the engine fall behind its model, and a rehearsal
then measures the host, not the policy (a whole lpm vs fcfs rehearsal had lpm's launches
disagree by up to 57% that way, docs/simulator.md). So the order is checked against SGLang's
rule written out plainly (a second radix tree of the waiting prompts), and the prefix match
that the sort repeats for every waiting prompt is checked to cost about the length it
compares.
"""

from __future__ import annotations

import random
import time

from matrixrun.core.profile import Curve
from matrixrun.sim.batcher import IN_BATCH_CHECK, IN_BATCH_DEPRIORITIZE, Batcher, SimRequest
from matrixrun.sim.prefix_cache import RadixCache


class _Quiet:
    def emit(self, produced: int, finished: bool, deadline: float) -> None:
        pass


def _reference_order(cache: RadixCache, waiting: list[list[int]]) -> list[int]:
    """SGLang's lpm (`_compute_prefix_matches` and the sort after it), literally: a prompt
    whose cached prefix is short is matched against a tree of the waiting prompts ahead of
    it; a match of ≥ `IN_BATCH_DEPRIORITIZE` tokens sends it back, else it joins the tree."""
    ahead = RadixCache(1 << 62)
    keys = []
    for n, ids in enumerate(waiting):
        got = cache.match(ids, touch=False)
        key = float(-got)
        if got <= IN_BATCH_CHECK:
            if ahead.match(ids, touch=False) >= IN_BATCH_DEPRIORITIZE:
                key = float("inf")
            else:
                ahead.insert(ids)
        keys.append((key, n))
    return [n for _, n in sorted(keys)]


def _queue(rng: random.Random) -> list[list[int]]:
    """Prompts that share heads of every length around the threshold (and some shorter than
    it), so both sides of each comparison are met."""
    bases = [[rng.randrange(1000, 1100) for _ in range(80)] for _ in range(6)]
    out = []
    for _ in range(60):
        base = rng.choice(bases)
        cut = rng.choice([0, 5, 31, 32, 33, 48, 80])
        tail = [rng.randrange(1000, 1100) for _ in range(rng.randint(0, 40))]
        ids = base[:cut] + tail
        out.append(ids or [1])
    return out


def test_lpm_orders_the_queue_as_sglangs_rule_says() -> None:
    """The simulator's in-batch rule (a set of 32-token heads) gives the order SGLang's second
    tree gives, on queues with partly cached prompts, short prompts and shared heads."""
    for seed in range(40):
        rng = random.Random(seed)
        waiting = _queue(rng)
        cache = RadixCache(1 << 30)
        for ids in rng.sample(waiting, 10):
            cache.insert(ids[: rng.randint(1, len(ids))])
        batcher = Batcher(Curve(step_ms=[(1.0, 1.0)]), cache=cache, lpm=True)
        reqs = [SimRequest(len(ids), 1, True, _Quiet(), ids) for ids in waiting]
        for req in reqs:
            batcher.submit(req)
        batcher._order_by_prefix()
        got = [reqs.index(r) for r in batcher._waiting]
        assert got == _reference_order(cache, waiting), seed


def _best_of(cache: RadixCache, ids: list[int], times: int = 7) -> float:
    """The fastest of a few lookups: the least a busy host adds."""
    best = float("inf")
    for _ in range(times):
        t0 = time.perf_counter()
        cache.match(ids, touch=False)
        best = min(best, time.perf_counter() - t0)
    return best


def test_a_match_that_parts_late_costs_about_its_length() -> None:
    """A 100,000-token cached run and a prompt that parts from it at its last token: finding
    where they part costs a few times the one comparison of a whole match, not log2(100,000)
    ≈ 17 comparisons of up to the whole run (97× a whole match when each step compared from
    the start; about 3× now)."""
    rng = random.Random(5)
    run = [rng.randrange(1000, 30000) for _ in range(100_000)]
    cache = RadixCache(1 << 30)
    cache.insert(run)
    parted = [*run[:-1], 7]
    assert cache.match(parted, touch=False) == len(run) - 1
    whole = _best_of(cache, run)
    late = _best_of(cache, parted)
    assert late < 10 * whole, (late, whole)

"""The simulator's prefix cache: a radix tree of prompt token pages with a token capacity.

Why a radix tree and not a set of whole prompts: what SGLang reuses is the longest cached
*prefix* of a prompt (a shared system prompt, an earlier turn), so two prompts that share
their first 2,048 tokens and differ after share those 2,048 tokens of KV. The tree stores
each distinct run of tokens once; an edge holds a whole run (split where two prompts part),
so matching a long shared prefix is one list comparison, not one step per token.

The model, kept as small as SGLang's behaviour allows (docs/simulator.md, "The prefix cache"):

* Granularity is SGLang's `--page-size` (default 1: token-exact). A match is rounded down to
  whole pages, as SGLang's paged radix cache matches whole pages only.
* `match(ids)` is the length of the longest cached prefix; it marks the nodes it walked as
  used (least-recently-used order is a counter, not a clock, so runs are reproducible).
* `insert(ids)` adds a prompt's pages; then, while the tree holds more tokens than its
  capacity, the least recently used *leaf* is evicted (a node whose tokens are a prefix of
  another cached run is never evicted before that run: SGLang's `evict` pops leaves from a
  heap ordered by last access time). Running requests do not pin their prefix here: the
  simulator charges a request its cached tokens when it is admitted, so a later eviction
  cannot change what it already paid. What the tree does not hold is SGLang's memory
  accounting (running requests' KV sharing the pool): the capacity is the cache's alone.
* `clear()` is `/flush_cache`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass


class _Node:
    """One run of tokens (a whole number of pages) below its parent's run."""

    __slots__ = ("children", "key", "parent", "used")

    def __init__(self, key: list[int], parent: _Node | None, used: int) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[int | tuple[int, ...], _Node] = {}
        self.used = used


@dataclass
class CacheStats:
    """What the cache did over its life (server info reports it)."""

    matched_tokens: int = 0
    looked_up_tokens: int = 0
    inserted_tokens: int = 0
    evicted_tokens: int = 0
    flushes: int = 0


class RadixCache:
    """Prompt prefixes with a capacity in tokens; see the module docstring for the model."""

    def __init__(self, capacity_tokens: int, page_size: int = 1) -> None:
        if capacity_tokens < 0:
            raise ValueError("capacity_tokens must be >= 0")
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        self.capacity = capacity_tokens
        self.page = page_size
        self.size = 0
        self.stats = CacheStats()
        self._clock = 0
        self._root = _Node([], None, 0)

    # -- queries --------------------------------------------------------------------------
    def _first(self, ids: list[int], pos: int) -> int | tuple[int, ...]:
        """The child key of the page that starts at `pos`."""
        return ids[pos] if self.page == 1 else tuple(ids[pos : pos + self.page])

    def _common(self, ids: list[int], pos: int, end: int, key: list[int]) -> int:
        """How many tokens of `key` equal `ids[pos:end]`, rounded down to whole pages (binary
        search on slices: list comparisons run in C, a token loop would not). Each step
        compares only the tokens not yet known to match (`lo` to `mid`), so a run that parts
        late costs about its own length, not that times log2 of it: lpm matches every waiting
        prompt before each admission, and a 1,088-token prompt that parts from a cached one
        after its 1,024-token system prompt cost 6 ms a sort of 128 when each step compared
        from the start, enough to make the simulator fall behind its model."""
        lo, hi = 0, min(len(key), end - pos)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ids[pos + lo : pos + mid] == key[lo:mid]:
                lo = mid
            else:
                hi = mid - 1
        return lo - lo % self.page

    def match(self, ids: list[int], *, touch: bool = True) -> int:
        """The length of the longest cached prefix of `ids` (whole pages). `touch` marks the
        walked nodes as just used (a lookup for scheduling order would not, in SGLang, change
        what is evicted first; the admission's does)."""
        end = len(ids) - len(ids) % self.page
        node, pos = self._root, 0
        if touch:
            self._clock += 1
        while pos < end:
            child = node.children.get(self._first(ids, pos))
            if child is None:
                break
            key = child.key
            whole = ids[pos : pos + len(key)] == key
            got = len(key) if whole else self._common(ids, pos, end, key)
            if touch:
                child.used = self._clock
            pos += got
            if not whole:
                break
            node = child
        if touch:
            self.stats.looked_up_tokens += len(ids)
            self.stats.matched_tokens += pos
        return pos

    # -- changes --------------------------------------------------------------------------
    def insert(self, ids: list[int]) -> int:
        """Cache `ids`' whole pages; returns the tokens newly stored (then evicts to fit)."""
        end = len(ids) - len(ids) % self.page
        self._clock += 1
        node, pos, added = self._root, 0, 0
        while pos < end:
            first = self._first(ids, pos)
            child = node.children.get(first)
            if child is None:
                leaf = _Node(ids[pos:end], node, self._clock)
                node.children[first] = leaf
                added = end - pos
                break
            got = self._common(ids, pos, end, child.key)
            if got < len(child.key):
                child = self._split(child, got)  # the part not walked keeps its time
            child.used = self._clock
            node, pos = child, pos + got
        self.size += added
        self.stats.inserted_tokens += added
        if self.size > self.capacity:
            self._evict(self.size - self.capacity)
        return added

    def _split(self, child: _Node, at: int) -> _Node:
        """Cut `child`'s run after `at` tokens; returns the new upper half."""
        parent = child.parent
        assert parent is not None
        upper = _Node(child.key[:at], parent, child.used)
        parent.children[self._first(child.key, 0)] = upper
        child.key = child.key[at:]
        child.parent = upper
        upper.children[self._first(child.key, 0)] = child
        return upper

    def _evict(self, tokens: int) -> None:
        """Drop least-recently-used leaves until `tokens` are freed (or nothing is left)."""
        heap: list[tuple[int, int, _Node]] = []
        stack = [self._root]
        while stack:
            n = stack.pop()
            if n.children:
                stack.extend(n.children.values())
            elif n is not self._root:
                heap.append((n.used, id(n), n))
        heapq.heapify(heap)
        freed = 0
        while freed < tokens and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[self._first(leaf.key, 0)]
            freed += len(leaf.key)
            if parent is not self._root and not parent.children:
                heapq.heappush(heap, (parent.used, id(parent), parent))
        self.size -= freed
        self.stats.evicted_tokens += freed

    def clear(self) -> None:
        """Empty the cache (`/flush_cache`)."""
        self._root = _Node([], None, 0)
        self.size = 0
        self.stats.flushes += 1

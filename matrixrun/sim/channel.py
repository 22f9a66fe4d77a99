"""One simulated request's output stream: its tokens materialised on demand and its events
queued for the HTTP handler that streams them (`server.SimServer`). Kept apart from the server
for size; the batcher's per-step path calls into it, so it stays allocation-light (slots)."""

from __future__ import annotations

import asyncio
import json
import time

from matrixrun.sim import protocol
from matrixrun.sim.batcher import SimRequest
from matrixrun.sim.clock import now
from matrixrun.sim.protocol import GenRequest
from matrixrun.sim.tokens import TokenSource, render

#: A stream event cut off mid-JSON (the malformed-output fault).
MALFORMED = b'data: {"text": " t1000, "meta_info": \n\n'


class Channel:
    """One request's output: tokens materialised on demand, events queued for its handler."""

    __slots__ = (
        "arrival",
        "cache_report",
        "cut",
        "deadlines",
        "delta_ids",
        "delta_text",
        "disconnected",
        "done",
        "finished_at",
        "head",
        "ids_buf",
        "incremental",
        "malformed",
        "n",
        "pending",
        "req",
        "rid",
        "rid_json",
        "sim",
        "src",
        "text_buf",
        "token_slot",
        "waiter",
    )

    def __init__(
        self,
        req: GenRequest,
        src: TokenSource,
        rid: str,
        *,
        incremental: bool,
        malformed: bool,
        created: int,
        model: str,
        cut: str | None = None,
        cache_report: bool = False,
    ) -> None:
        self.req = req
        #: The batcher's request, set once submitted: its `cached` prompt tokens are reported.
        self.sim: SimRequest | None = None
        #: `--enable-cache-report`: OpenAI usage carries `prompt_tokens_details.cached_tokens`.
        self.cache_report = cache_report
        #: "abort" or "error": the fault that ends this request after its first token.
        self.cut = cut
        self.src = src
        self.rid = rid
        self.rid_json = json.dumps(rid).encode()
        self.head = (
            protocol.openai_head(rid, created, model, chat=req.chat) if req.api == "openai" else b""
        )
        self.incremental = incremental
        self.malformed = malformed
        self.arrival = now()
        self.n = 0
        self.text_buf = bytearray()
        self.ids_buf = bytearray()
        self.pending: list[bytes] = []
        self.deadlines: list[float] = []
        #: Where the unsent native token event sits in `pending` (merged into, not appended).
        self.token_slot: int | None = None
        self.delta_text = bytearray()
        self.delta_ids = bytearray()
        self.waiter: asyncio.Future[None] | None = None
        self.done = False
        self.disconnected = False
        self.finished_at = 0.0

    def tokens(self) -> list[int]:
        return [self.src.token(p) for p in range(self.n)]

    @property
    def cached(self) -> int:
        """The prompt tokens the prefix cache held for this request (0 before admission)."""
        return 0 if self.sim is None else self.sim.cached

    @property
    def reported_cached(self) -> int | None:
        """What OpenAI usage reports as cached: only with `--enable-cache-report`."""
        return self.cached if self.cache_report else None

    def emit(self, produced: int, finished: bool, deadline: float) -> None:
        """Called by the batcher: `produced` tokens exist as of `deadline`."""
        if self.done:
            return  # cut short by a fault; the batcher hears of it when the handler ends
        if self.cut is not None and self.n >= 1 and not finished:
            self._cut(deadline)  # after the first token: the fault ends the request
            return
        src = self.src
        new = [src.token(p) for p in range(self.n, produced)]
        self.n = produced
        if finished:
            self.done = True
            self.finished_at = deadline
        req = self.req
        if req.stream:
            text = b"".join([b" t%d" % t for t in new])
            ids = b",".join([b"%d" % t for t in new])
            prompt_len = len(req.prompt_ids)
            if req.api == "native":
                if not self.incremental:
                    self.text_buf += text
                    if self.ids_buf:
                        self.ids_buf += b","
                    self.ids_buf += ids
                    text, ids = bytes(self.text_buf), bytes(self.ids_buf)
                elif self.token_slot is not None:  # coalesce the deltas not yet sent
                    self.delta_text += text
                    if self.delta_ids and ids:
                        self.delta_ids += b","
                    self.delta_ids += ids
                    text, ids = bytes(self.delta_text), bytes(self.delta_ids)
                else:
                    self.delta_text, self.delta_ids = bytearray(text), bytearray(ids)
                event = protocol.native_event(
                    self.rid_json, prompt_len, text, ids, produced, finished,
                    deadline - self.arrival, self.cached,
                    time.time() if produced == len(new) else None,  # its first event
                )  # fmt: skip
                if self.token_slot is not None:
                    self.pending[self.token_slot] = event
                    self.deadlines.append(deadline)
                    event = b""
                else:
                    self.token_slot = len(self.pending)
            else:
                usage = (
                    protocol.openai_usage(prompt_len, produced, self.reported_cached, req.chat)
                    if req.continuous_usage
                    else None
                )
                if req.chat:
                    first = produced == len(new)
                    event = protocol.chat_chunk(self.head, text, finished, usage, first)
                else:
                    event = protocol.openai_chunk(
                        self.head, text, ids if req.return_token_ids else None, finished, usage
                    )
            if event:
                self.pending.append(event)
                self.deadlines.append(deadline)
            if self.malformed:
                self.malformed = False
                self.pending.append(MALFORMED)
            if finished:
                if req.api == "openai" and req.include_usage:
                    self.pending.append(
                        protocol.openai_usage_chunk(
                            self.head, prompt_len, produced, self.reported_cached, req.chat
                        )
                    )
                if req.done_event:
                    self.pending.append(protocol.DONE)
        self._wake(req.stream or finished)

    def _wake(self, ready: bool = True) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done() and ready:
            waiter.set_result(None)

    def take(self) -> tuple[list[bytes], list[float]]:
        """Everything pending, for one write (the next token event starts a new slot)."""
        chunks, deadlines = self.pending, self.deadlines
        self.pending, self.deadlines, self.token_slot = [], [], None
        return chunks, deadlines

    def _cut(self, deadline: float) -> None:
        """End the request by its fault, the way SGLang ends one (see `protocol`)."""
        self.done = True
        self.finished_at = deadline
        req = self.req
        if self.cut == "abort" and req.api == "openai":
            if req.stream:  # a graceful abort: a chunk with finish_reason "abort"
                self.pending.append(protocol.openai_abort_chunk(self.head, req.chat))
                if req.include_usage:
                    self.pending.append(
                        protocol.openai_usage_chunk(
                            self.head, len(req.prompt_ids), self.n, self.reported_cached
                        )
                    )
                self.deadlines.append(deadline)
        elif self.cut == "abort":
            message = "Abort in waiting queue" if self.n == 0 else "simulated scheduler abort"
            ids = self.tokens()
            if req.stream:
                text = "".join(render(t) for t in ids)
                self.pending.append(
                    protocol.native_abort_event(
                        self.rid,
                        len(req.prompt_ids),
                        text,
                        ids,
                        deadline - self.arrival,
                        message,
                        self.cached,
                    )
                )
                self.deadlines.append(deadline)
        elif req.stream:
            self.pending.append(protocol.native_error_event("simulated error inside the stream"))
            self.deadlines.append(deadline)
        if req.stream and req.done_event:
            self.pending.append(protocol.DONE)
        self._wake()

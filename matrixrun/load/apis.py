"""The two request APIs the client speaks: request bodies and streamed-response parsing.

* `sglang`: SGLang's native `POST /generate`, the prompt in `input_ids` (token ids) or `text`
  (a string: `GenerateReqInput` takes exactly one of them; text in `input_ids` is a 400). Each
  SSE event is `data: {"text": ..., "meta_info": {"completion_tokens": N, "finish_reason":
  ..., ...}, ...}` where both `text` and `completion_tokens` are cumulative; the stream ends
  with `data: [DONE]`; an error mid-stream arrives as `data: {"error": {"message": ...}}`
  (then `[DONE]`). A request the scheduler aborts (out of memory, too long, a timeout, an
  abort call) ends with a normal-looking event whose `meta_info.finish_reason` is `{"type":
  "abort", "message": ...}`, then `[DONE]` (0.5.23 `tokenizer_manager._handle_abort_req`): that
  request failed, with the server's message as its error.
* `openai`: `POST /v1/completions` with a token-id `prompt`. Each event carries
  `choices[0].text` (incremental); with `stream_options.include_usage` the last event carries
  `usage.completion_tokens`; `data: [DONE]` ends the stream. SGLang ends a gracefully aborted
  request with `finish_reason: "abort"` (`serving_completions.py`): a failed request.

Tokens per chunk (what splits a chunk's gap into ITL values, see `aggregate.py`):

* `sglang`: the increase of `meta_info.completion_tokens` over the previous event (exact, as
  bench_serving does). Events that add no tokens are ignored.
* `openai`: 1 per chunk with non-empty text (bench_serving's rule for this API), unless the
  server reports cumulative `usage.completion_tokens` on every text chunk (vLLM's
  `continuous_usage_stats`), in which case its increase. The request's output tokens are the
  final `usage.completion_tokens` when reported, else the sum over chunks.

Cached prompt tokens (the server's prefix cache): `meta_info.cached_tokens` of the first
native event that carries tokens; `usage.prompt_tokens_details.cached_tokens` of OpenAI usage
(SGLang with `--enable-cache-report`, vLLM); None when the server says nothing.

The parsers are the client's hot path: one `feed()` per network read, no objects built per
event beyond the two list appends, and for the native API no JSON parse at all on the common
path (cumulative `text` makes each event longer than the last; a regex finds the token count
instead). This is safe because inside a JSON string every `"` is escaped, so the pattern
`"completion_tokens":` can only match the real key.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

Api = Literal["sglang", "openai"]

PATHS: dict[str, str] = {"sglang": "/generate", "openai": "/v1/completions"}

_DONE = b"[DONE]"
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
#: SGLang's `meta_info.cached_tokens` (the prompt tokens its prefix cache held); the same on
#: every event of a request, so it is read from the first one only.
_CACHED_TOKENS = re.compile(rb'"cached_tokens":\s*(\d+)')
#: An abort's finish_reason; `"type":"abort"` appears nowhere else in a native event (a
#: generated text containing it has its quotes escaped).
_ABORT = re.compile(rb'"type":\s*"abort"')


def request_body(
    api: Api,
    prompt: list[int] | str,
    output_len: int,
    model: str | None,
    strict_openai: bool = False,
) -> bytes:
    """The JSON body for one streaming request of exactly `output_len` tokens (ignore_eos).

    `strict_openai` leaves out `ignore_eos`, which only vLLM/SGLang-style servers know: servers
    that validate the body (transformers serve) answer 422 to it. The output length then rests
    on the model not stopping early, which the client checks per request.
    """
    body: dict[str, Any]
    if api == "sglang":
        body = {
            native_prompt_key(prompt): prompt,
            "sampling_params": {
                "max_new_tokens": output_len,
                "ignore_eos": True,
                "temperature": 0.0,
            },
            "stream": True,
        }
    else:
        body = {
            "model": model or "default",
            "prompt": prompt,
            "max_tokens": output_len,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if strict_openai:
            del body["ignore_eos"]
    return json.dumps(body, separators=(",", ":")).encode()


def native_prompt_key(prompt: list[int] | str) -> str:
    """Where `/generate` takes this prompt: `text` for a string, `input_ids` for token ids."""
    return "text" if isinstance(prompt, str) else "input_ids"


def abort_message(meta_info: Any) -> str | None:
    """The server's reason when `meta_info.finish_reason` says the request was aborted."""
    reason = meta_info.get("finish_reason") if isinstance(meta_info, dict) else None
    if isinstance(reason, dict) and reason.get("type") == "abort":
        return str(reason.get("message") or "aborted")
    return None


class StreamParser:
    """Collects one response stream: SSE framing plus the API-specific event rule.

    `times`/`tokens` hold absolute `perf_counter` arrival times and token counts of the
    token-carrying chunks; `done_at` is when `data: [DONE]` arrived; `error` is the server's
    in-stream error message, if any.
    """

    __slots__ = (
        "_buf",
        "cached",
        "done_at",
        "error",
        "finished_at",
        "reported_prompt",
        "reported_total",
        "times",
        "tokens",
        "total",
    )

    def __init__(self) -> None:
        self._buf = b""
        self.times: list[float] = []
        self.tokens: list[int] = []
        self.total = 0
        self.reported_total: int | None = None
        #: The server's own prompt token count (`usage.prompt_tokens`), when it sends one.
        self.reported_prompt: int | None = None
        #: The prompt tokens the server found in its prefix cache, when it reports them
        #: (SGLang's `meta_info.cached_tokens`; OpenAI `usage.prompt_tokens_details`).
        self.cached: int | None = None
        self.done_at: float | None = None
        #: When a chunk said the generation is over (`finish_reason`, or the usage chunk):
        #: the end of a stream that closes without `data: [DONE]` (transformers serve).
        self.finished_at: float | None = None
        self.error = ""

    def feed(self, data: bytes, now: float) -> None:
        """Consume bytes from the network; every complete event in them arrived at `now`."""
        if self._buf:
            data = self._buf + data
        lines = data.split(b"\n")
        self._buf = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                self._guarded(line[5:].strip(), now)

    def finish(self, now: float) -> None:
        """The body ended: an unterminated last line still counts (some servers omit it)."""
        if self._buf:
            line, self._buf = self._buf, b""
            if line.startswith(b"data:"):
                self._guarded(line[5:].strip(), now)

    def _guarded(self, payload: bytes, now: float) -> None:
        """One event; valid JSON of the wrong shape (`choices` not a list, a count that is
        not a number) is this request's error, said plainly. Raised out of here it would
        surface from the HTTP parser as "`on_body` callback error"."""
        try:
            self._event(payload, now)
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
            if not self.error:
                self.error = (
                    f"event of an unexpected shape ({type(exc).__name__}: {exc}): "
                    f"{payload[:200]!r}; does the server speak the API named by engine.api?"
                )

    @property
    def ended_at(self) -> float | None:
        """When the response was complete: `[DONE]`, else the chunk that finished it."""
        return self.done_at if self.done_at is not None else self.finished_at

    @property
    def output_tokens(self) -> int:
        return self.total if self.reported_total is None else self.reported_total

    def _event(self, payload: bytes, now: float) -> None:
        raise NotImplementedError

    def _error_from(self, payload: bytes) -> None:
        try:
            data = json.loads(payload)
        except ValueError:
            self.error = f"malformed event: {payload[:200]!r}"
            return
        if isinstance(data, dict) and "error" in data:
            err = data["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            self.error = f"server error in stream: {msg}"


class NativeParser(StreamParser):
    """SGLang `/generate`: tokens per chunk from cumulative `meta_info.completion_tokens`; an
    abort's `finish_reason` makes the request an error (the tokens before it still count)."""

    __slots__ = ()

    def _abort_from(self, payload: bytes) -> None:
        data = json.loads(payload)
        message = abort_message(data.get("meta_info") if isinstance(data, dict) else None)
        if message is not None and not self.error:
            self.error = f"aborted by the server: {message}"

    def _event(self, payload: bytes, now: float) -> None:
        if payload == _DONE:
            self.done_at = now
            return
        if _ABORT.search(payload):
            self._abort_from(payload)
        m = _COMPLETION_TOKENS.search(payload)
        if m is None:
            if not self.error:
                self._error_from(payload)
            return
        if self.cached is None:
            c = _CACHED_TOKENS.search(payload)
            if c is not None:
                self.cached = int(c.group(1))
        cumulative = int(m.group(1))
        k = cumulative - self.total
        if k > 0:
            self.times.append(now)
            self.tokens.append(k)
            self.total = cumulative


class OpenAIParser(StreamParser):
    """OpenAI `/v1/completions`: one token per text chunk unless usage is reported per chunk."""

    __slots__ = ("_continuous",)

    def __init__(self) -> None:
        super().__init__()
        self._continuous = True

    def _event(self, payload: bytes, now: float) -> None:
        if payload == _DONE:
            self.done_at = now
            return
        try:
            data = json.loads(payload)
        except ValueError:
            self.error = f"malformed event: {payload[:200]!r}"
            return
        if not isinstance(data, dict):
            return
        if "error" in data or data.get("object") == "error":
            self._error_from(payload)
            return
        usage = data.get("usage")
        cumulative = usage.get("completion_tokens") if isinstance(usage, dict) else None
        choices = data.get("choices")
        if choices and choices[0].get("text"):
            if cumulative is None:
                self._continuous = False
            k = cumulative - self.total if self._continuous and cumulative is not None else 1
            if k > 0:
                self.times.append(now)
                self.tokens.append(k)
                self.total += k
        if choices and choices[0].get("finish_reason"):
            self.finished_at = now
            if choices[0]["finish_reason"] == "abort" and not self.error:
                self.error = "aborted by the server (finish_reason abort)"
        if cumulative is not None:
            if not choices:  # include_usage's own last chunk
                self.finished_at = now
            self.reported_total = int(cumulative)
            prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
            if isinstance(prompt, int):
                self.reported_prompt = prompt
            details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                self.cached = int(details["cached_tokens"])


def make_parser(api: Api) -> StreamParser:
    return NativeParser() if api == "sglang" else OpenAIParser()

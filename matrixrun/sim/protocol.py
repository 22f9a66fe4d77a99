"""The wire formats the simulator speaks: SGLang's native `/generate` and OpenAI `/v1/completions`
and `/v1/chat/completions`.

Facts taken from SGLang's server (`entrypoints/http_server.py`, `tokenizer_manager`'s output
processing, `openai/serving_completions.py`), not its code:

* native stream events are `data: {json}\\n\\n` then `data: [DONE]\\n\\n`; by default `text` and
  `output_ids` are cumulative (with `--incremental-streaming-output` both are deltas);
  `meta_info` carries `id`, `finish_reason` (null until the end, then
  `{"type": "length", "length": N}`), `prompt_tokens`, `weight_version`,
  `completion_tokens` (cumulative), `cached_tokens` (the prompt tokens found in the prefix
  cache, the same on every event of a request), and `e2e_latency` (seconds) on the last.
* OpenAI stream chunks carry the text delta in `choices[0].text`, `finish_reason` "length" on
  the last; with `stream_options.include_usage` a final chunk with `choices: []` and `usage`
  (`prompt_tokens`, `total_tokens`, `completion_tokens`) precedes `data: [DONE]`; with the
  server's `--enable-cache-report`, `usage.prompt_tokens_details` is `{"cached_tokens": N}`
  when N > 0 (left out otherwise).
* chat (`/v1/chat/completions`, for clients that speak only chat, e.g. genai-bench): the
  prompt is the messages' text contents joined by spaces (no chat template: the simulator's
  tokens are words), `max_completion_tokens` or `max_tokens` bounds the output; stream chunks
  are `chat.completion.chunk` objects with the text in `choices[0].delta.content`, a whole
  response is a `chat.completion` with `choices[0].message`; usage as for completions.
* errors are `{"object": "error", "message", "type", "param", "code"}`; a native `/generate`
  body that breaks 0.5.23's JSON contract (`api/v1/api_types.py`: `sampling_params` rejects
  unknown keys, `input_ids` must be token ids, `text` a string) is a 400 with
  `{"error": "<the contract's text>"}` (`http_server.generate_request`).
* `max_new_tokens: 0` is allowed (a prefill-only request: an empty output, finish_reason
  length 0).
* an error inside a native stream is `data: {"error": {"message", "type":
  "invalid_request_error", "code", "retryable"}}` then `data: [DONE]`; an aborted request's
  last event is a normal one whose `finish_reason` is `{"type": "abort", "message": ...,
  "status_code": null, "err_type": null}` (`FINISH_ABORT.to_json`), then `data: [DONE]`.

Stream events are rendered by hand into bytes: they are the server's hot path (thousands per
second), their shape is fixed, and simulated text never needs JSON escaping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Literal

from matrixrun.sim.tokens import text_to_ids

Api = Literal["native", "openai"]

NATIVE_DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's SamplingParams default
OPENAI_DEFAULT_MAX_TOKENS = 16  # SGLang's CompletionRequest default
DONE = b"data: [DONE]\n\n"


class BadRequest(ValueError):
    """A request the simulator (or SGLang) rejects with HTTP 400."""


class ContractError(BadRequest):
    """A native body outside SGLang's JSON contract: 400 with `{"error": message}`."""


#: `sglang.api.v1.SamplingParams`'s fields (0.5.23; unknown keys are rejected).
SAMPLING_PARAMS = (
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k",
    "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
    "n", "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "no_stop_trim", "stream_interval", "logit_bias",
    "sampling_seed", "custom_params", "beam_width", "watermark", "choice",
)  # fmt: skip


@dataclass(frozen=True)
class GenRequest:
    """A generation request, whichever API it came from."""

    api: Api
    prompt_ids: list[int]
    max_new_tokens: int
    stream: bool
    temperature: float
    rid: str | None = None
    model: str = ""
    include_usage: bool = False
    continuous_usage: bool = False
    return_token_ids: bool = False
    #: False: the stream ends after the last chunk without `data: [DONE]` (transformers serve).
    done_event: bool = True
    #: True: an OpenAI chat request (`delta.content` chunks, a `message` response).
    chat: bool = False


def error_body(message: str, code: int) -> dict[str, Any]:
    kind = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError"}
    return {
        "object": "error",
        "message": message,
        "type": kind.get(code, str(code)),
        "param": None,
        "code": code,
    }


def _ids(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not value:
        raise BadRequest(f"{what} must be a non-empty list of token ids")
    if not all(type(x) is int and 0 <= x < 2**62 for x in value):
        raise BadRequest(f"{what} must contain only non-negative integer token ids")
    return value


def _text(value: Any, what: str) -> list[int]:
    ids = text_to_ids(value)
    if not ids:
        raise BadRequest(f"{what} is empty")
    return ids


def _int(value: Any, what: str, default: int, least: int = 1) -> int:
    if value is None:
        return default
    if type(value) is not int or value < least:
        raise BadRequest(f"{what} must be an integer >= {least}")
    return value


def _contract(body: dict[str, Any]) -> None:
    """The parts of 0.5.23's `/generate` contract a client of ours could break."""
    sp = body.get("sampling_params")
    if isinstance(sp, dict):
        for key in sp:
            if key not in SAMPLING_PARAMS:
                expected = ", ".join(f"`{k}`" for k in SAMPLING_PARAMS)
                raise ContractError(f"unknown field `{key}`, expected one of {expected}")
    ids = body.get("input_ids")
    if isinstance(ids, str):
        raise ContractError(f'invalid type: string "{ids[:40]}", expected a sequence')
    text = body.get("text")
    if text is not None and not isinstance(text, str | list):
        raise ContractError("invalid type: expected a string or a sequence of strings")


def _float(value: Any, what: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{what} must be a number")
    return float(value)


def parse_native(body: Any) -> GenRequest:
    """`POST /generate`: `input_ids` or `text`, `sampling_params`, `stream`, optional `rid`."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    _contract(body)
    if body.get("input_ids") is not None:
        ids = body["input_ids"]
        if isinstance(ids, list) and ids and isinstance(ids[0], list):
            if len(ids) != 1:
                raise BadRequest("the simulator serves one prompt per request, not a batch")
            ids = ids[0]
        prompt = _ids(ids, "input_ids")
    elif body.get("text") is not None:
        text = body["text"]
        if isinstance(text, list):
            if len(text) != 1:
                raise BadRequest("the simulator serves one prompt per request, not a batch")
            text = text[0]
        if not isinstance(text, str):
            raise BadRequest("text must be a string")
        prompt = _text(text, "text")
    else:
        raise BadRequest("either input_ids or text must be given")
    sp = body.get("sampling_params") or {}
    if not isinstance(sp, dict):
        raise BadRequest("sampling_params must be an object")
    rid = body.get("rid")
    return GenRequest(
        api="native",
        prompt_ids=prompt,
        max_new_tokens=_int(
            sp.get("max_new_tokens"), "max_new_tokens", NATIVE_DEFAULT_MAX_NEW_TOKENS, least=0
        ),
        stream=bool(body.get("stream", False)),
        temperature=_float(sp.get("temperature"), "temperature", 1.0),
        rid=rid if isinstance(rid, str) else None,
    )


class UnexpectedFields(BadRequest):
    """A strict server's answer to fields outside the OpenAI completions API (HTTP 422)."""


#: Fields of OpenAI's `POST /v1/completions` request (the API reference's list).
OPENAI_COMPLETION_FIELDS = frozenset(
    {
        "model", "prompt", "suffix", "max_tokens", "temperature", "top_p", "n", "stream",
        "stream_options", "logprobs", "echo", "stop", "presence_penalty", "frequency_penalty",
        "best_of", "logit_bias", "user", "seed",
    }
)  # fmt: skip


def parse_openai_strict(body: Any) -> GenRequest:
    """`parse_openai` for a server that behaves as transformers serve does: unknown fields are
    refused with its message, and its streams end without `data: [DONE]`."""
    if isinstance(body, dict):
        unknown = sorted(set(body) - OPENAI_COMPLETION_FIELDS)
        if unknown:
            raise UnexpectedFields(f"Unexpected fields in the request: {set(unknown)}")
    return replace(parse_openai(body), done_event=False)


def parse_openai(body: Any) -> GenRequest:
    """`POST /v1/completions`: `prompt` as text, token ids, or a one-element list of either."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
        if len(prompt) != 1:
            raise BadRequest("the simulator serves one prompt per request, not a batch")
        prompt = prompt[0]
    ids = _text(prompt, "prompt") if isinstance(prompt, str) else _ids(prompt, "prompt")
    if body.get("n", 1) not in (1, None):
        raise BadRequest("the simulator supports n=1 only")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise BadRequest("stream_options must be an object")
    model = body.get("model")
    return GenRequest(
        api="openai",
        prompt_ids=ids,
        max_new_tokens=_int(body.get("max_tokens"), "max_tokens", OPENAI_DEFAULT_MAX_TOKENS),
        stream=bool(body.get("stream", False)),
        temperature=_float(body.get("temperature"), "temperature", 1.0),
        model=model if isinstance(model, str) else "",
        include_usage=bool(opts.get("include_usage", False)),
        continuous_usage=bool(opts.get("continuous_usage_stats", False)),
        return_token_ids=bool(body.get("return_token_ids", False)),
    )


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    raise BadRequest("message content must be a string or a list of text parts")


def parse_chat(body: Any) -> GenRequest:
    """`POST /v1/chat/completions`: the messages' text contents, joined, are the prompt."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    if not all(isinstance(m, dict) for m in messages):
        raise BadRequest("each message must be an object")
    prompt = " ".join(_message_text(m.get("content", "")) for m in messages)
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    as_completion = {**body, "prompt": prompt, "max_tokens": limit}
    return replace(parse_openai(as_completion), chat=True)


def finish_reason(length: int) -> dict[str, Any]:
    return {"type": "length", "length": length}


# -- streaming events (hand-rendered) ------------------------------------------------------


def native_event(
    rid_json: bytes,
    prompt_tokens: int,
    text: bytes,
    ids: bytes,
    completion_tokens: int,
    finished: bool,
    e2e_latency: float,
    cached_tokens: int = 0,
    sent_ts: float | None = None,
) -> bytes:
    """One native SSE event; `text`/`ids` are the JSON-ready text and comma-joined ids;
    `sent_ts` (wall clock) on a request's first event, SGLang's `response_sent_to_client_ts`."""
    if sent_ts is not None:
        cached_tokens_part = b'%d,"response_sent_to_client_ts":%s' % (
            cached_tokens,
            repr(sent_ts).encode(),
        )
    else:
        cached_tokens_part = b"%d" % cached_tokens
    if finished:
        fin = b'{"type":"length","length":%d}' % completion_tokens
        tail = b',"e2e_latency":%s}}\n\n' % repr(e2e_latency).encode()
    else:
        fin = b"null"
        tail = b"}}\n\n"
    return b"".join(
        (
            b'data: {"text":"',
            text,
            b'","output_ids":[',
            ids,
            b'],"meta_info":{"id":',
            rid_json,
            b',"finish_reason":',
            fin,
            b',"prompt_tokens":%d,"weight_version":"default","completion_tokens":%d,'
            b'"cached_tokens":' % (prompt_tokens, completion_tokens),
            cached_tokens_part,
            tail,
        )
    )


def native_error_event(message: str, code: int = 400) -> bytes:
    """SGLang's in-stream error (`http_server.stream_results`), before `data: [DONE]`."""
    err = {"message": message, "type": "invalid_request_error", "code": code, "retryable": False}
    return b"data: " + json.dumps({"error": err}, separators=(",", ":")).encode() + b"\n\n"


def abort_reason(message: str) -> dict[str, Any]:
    """`FINISH_ABORT(message).to_json()`."""
    return {"type": "abort", "message": message, "status_code": None, "err_type": None}


def native_abort_event(
    rid: str,
    prompt_tokens: int,
    text: str,
    ids: list[int],
    e2e_latency: float,
    message: str,
    cached_tokens: int = 0,
) -> bytes:
    """The last event of an aborted stream: a normal event with the abort's finish_reason."""
    out = native_response(rid, prompt_tokens, text, ids, e2e_latency, cached_tokens)
    out["meta_info"]["finish_reason"] = abort_reason(message)
    return b"data: " + json.dumps(out, separators=(",", ":")).encode() + b"\n\n"


def openai_abort_chunk(head: bytes, chat: bool) -> bytes:
    """The chunk that ends a gracefully aborted OpenAI stream: empty text, finish_reason
    "abort" (`serving_completions.py`, an abort without a status code)."""
    part = b'"delta":{"role":"assistant","content":""}' if chat else b'"text":""'
    return b"".join(
        (
            b'data: {"id":',
            head,
            b',"choices":[{"index":0,',
            part,
            b',"logprobs":null,"finish_reason":"abort"}],"usage":null}\n\n',
        )
    )


def openai_chunk(
    head: bytes, text: bytes, ids: bytes | None, finished: bool, usage: bytes | None
) -> bytes:
    """One OpenAI completion chunk; `head` is the pre-rendered `id/object/created/model` part."""
    return b"".join(
        (
            b'data: {"id":',
            head,
            b',"choices":[{"index":0,"text":"',
            text,
            b'","logprobs":null,"finish_reason":',
            b'"length"' if finished else b"null",
            b',"matched_stop":null',
            b"" if ids is None else b',"token_ids":[' + ids + b"]",
            b'}],"usage":',
            b"null" if usage is None else usage,
            b"}\n\n",
        )
    )


def _chat_event(head: bytes, delta: bytes, finish: bytes, usage: bytes | None) -> bytes:
    return b"".join(
        (
            b'data: {"id":',
            head,
            b',"choices":[{"index":0,"delta":{',
            delta,
            b'},"logprobs":null,"finish_reason":',
            finish,
            b',"matched_stop":null}]',
            b"" if usage is None else b',"usage":' + usage,
            b"}\n\n",
        )
    )


def chat_chunk(
    head: bytes, text: bytes, finished: bool, usage: bytes | None, first: bool = False
) -> bytes:
    """The OpenAI chat chunks for one step; `head` as for `openai_chunk`, with the chat object
    type. As SGLang 0.5.23 streams them (tests/test_sglang_real.py compares): the first step
    is preceded by a chunk with the role and empty content, a step's chunk carries only
    `content`, the last step is followed by a chunk with an empty delta and the finish
    reason, and chunks have no `usage` key unless usage is reported on each."""
    out = _chat_event(head, b'"role":"assistant","content":""', b"null", usage) if first else b""
    out += _chat_event(head, b'"content":"' + text + b'"', b"null", usage)
    if finished:
        out += _chat_event(head, b"", b'"length"', usage)
    return out


def openai_usage(
    prompt_tokens: int, completion_tokens: int, cached: int | None = None, chat: bool = False
) -> bytes:
    """`usage`; `cached`: the prompt tokens found cached, reported (SGLang's
    `--enable-cache-report`) as `prompt_tokens_details.cached_tokens` when above 0; a chat
    stream's usage also has `completion_tokens_details` (null), as SGLang's does."""
    details = b"" if not cached else b',"prompt_tokens_details":{"cached_tokens":%d}' % cached
    if chat:
        details += b',"completion_tokens_details":null'
    return b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%s}' % (
        prompt_tokens,
        prompt_tokens + completion_tokens,
        completion_tokens,
        details,
    )


def usage_details(cached: int | None) -> dict[str, Any]:
    """`openai_usage`'s cache report as a dict entry (whole responses)."""
    return {"prompt_tokens_details": {"cached_tokens": cached}} if cached else {}


def openai_usage_chunk(
    head: bytes,
    prompt_tokens: int,
    completion_tokens: int,
    cached: int | None = None,
    chat: bool = False,
) -> bytes:
    usage = openai_usage(prompt_tokens, completion_tokens, cached, chat)
    return b'data: {"id":' + head + b',"choices":[],"usage":' + usage + b"}\n\n"


def openai_head(cid: str, created: int, model: str, *, chat: bool = False) -> bytes:
    kind = b"chat.completion.chunk" if chat else b"text_completion"
    return b'%s,"object":"%s","created":%d,"model":%s' % (
        json.dumps(cid).encode(),
        kind,
        created,
        json.dumps(model).encode(),
    )


# -- whole responses ----------------------------------------------------------------------


def native_response(
    rid: str,
    prompt_tokens: int,
    text: str,
    ids: list[int],
    e2e_latency: float,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    return {
        "text": text,
        "output_ids": ids,
        "meta_info": {
            "id": rid,
            "finish_reason": finish_reason(len(ids)),
            "prompt_tokens": prompt_tokens,
            "weight_version": "default",
            "completion_tokens": len(ids),
            "cached_tokens": cached_tokens,
            "e2e_latency": e2e_latency,
        },
    }


def openai_response(
    cid: str,
    created: int,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    text: str,
    ids: list[int] | None,
    *,
    chat: bool = False,
    cached: int | None = None,
) -> dict[str, Any]:
    n = completion_tokens
    choice: dict[str, Any] = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": "length",
        "matched_stop": None,
    }
    if ids is not None:
        choice["token_ids"] = ids
    if chat:
        choice["message"] = {"role": "assistant", "content": choice.pop("text")}
    return {
        "id": cid,
        "object": "chat.completion" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + n,
            "completion_tokens": n,
            **usage_details(cached),
        },
        "metadata": {"weight_version": "default"},
    }

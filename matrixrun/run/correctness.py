"""The correctness gate: does a candidate arm still produce the baseline's tokens?

A faster kernel that changes the model's output is not a win. Before an arm is measured, it
answers a fixed, seeded set of prompts greedily (temperature 0, `max_new_tokens` tokens,
`ignore_eos` so every answer has the full length to compare); the baseline's answers are the
reference and each candidate's `agreement` with them goes into the analysis, which marks an
arm below `correctness.floor` suspect.

Prompts are sent one at a time: greedy output can depend on what else is in the batch (batch
shape changes reduction order in some kernels), and a sequential gate gives every arm the same
batch composition, so differences come from the arm, not from request timing. The prompts come
from `matrixrun.load.prompts` with their own seed (`SEED`), so they never coincide with the
measured prompts and are identical on every arm, run and machine.

APIs (checked against SGLang's `tokenizer_manager`: a non-streaming `/generate` returns
`{"text", "output_ids", "meta_info"}`):

* `sglang`: POST `/generate` with `input_ids` (a text prompt goes in `text`); the answer is
  `output_ids` (token ids). A build that returns no `output_ids` falls back to the words of
  `text`. An answer whose `meta_info.finish_reason` is `{"type": "abort"}` is no answer.
* `openai`: POST `/v1/completions` with a token-id prompt and `return_token_ids` (vLLM returns
  `choices[0].token_ids`) and `logprobs: 1` (every server returns `logprobs.tokens`, the token
  strings); the answer is the ids, else the token strings, else the words of the text.

Agreement counts only the identical prefix: after the first differing token the two answers
continue from different contexts, so later coincidences mean nothing.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from matrixrun.core.errors import LoadError
from matrixrun.load.apis import Api, abort_message, native_prompt_key
from matrixrun.load.prompts import make_prompts
from matrixrun.load.text_prompts import text_prompts
from matrixrun.load.vocab import IdRange
from matrixrun.spec import CorrectnessSpec

#: Seed of the correctness prompts (fixed: the gate is the same in every spec).
SEED = 7_777_777

Answer = list[int] | list[str]


class Agreement(BaseModel):
    """How far a candidate's greedy answers match the reference, prompt by prompt."""

    model_config = ConfigDict(extra="forbid")

    share_identical_tokens: float
    first_divergence: list[int | None]
    first_divergence_min: int | None
    prompts: int
    identical_prompts: int

    def passes(self, floor: float) -> bool:
        return self.share_identical_tokens >= floor


def _divergence(ref: Answer, ans: Answer) -> int | None:
    """Index of the first position where the answers differ; None when identical."""
    for i, (a, b) in enumerate(zip(ref, ans, strict=False)):
        if a != b:
            return i
    return None if len(ref) == len(ans) else min(len(ref), len(ans))


def agreement(reference: list[Answer], answers: list[Answer]) -> Agreement:
    """Candidate answers vs reference answers (same prompts, same order). Pure.

    `share_identical_tokens`: reference tokens before each prompt's first divergence, over all
    reference tokens (1.0 when every answer is identical).
    """
    if len(reference) != len(answers):
        raise ValueError(f"{len(answers)} answers for {len(reference)} reference prompts")
    firsts = [_divergence(r, a) for r, a in zip(reference, answers, strict=True)]
    total = sum(len(r) for r in reference)
    same = sum(
        len(r) if d is None else min(d, len(r)) for r, d in zip(reference, firsts, strict=True)
    )
    diverged = [d for d in firsts if d is not None]
    return Agreement(
        share_identical_tokens=same / total if total else 1.0,
        first_divergence=firsts,
        first_divergence_min=min(diverged) if diverged else None,
        prompts=len(reference),
        identical_prompts=len(firsts) - len(diverged),
    )


def prompts_for(
    settings: CorrectnessSpec, seed: int = SEED, ids: IdRange | None = None
) -> list[list[int]]:
    """The gate's prompts, drawn within the model's vocabulary (`ids`; load/vocab.py)."""
    return make_prompts(seed, settings.prompts, settings.input_len, ids or IdRange())


def request(
    api: Api,
    prompt: list[int] | str,
    max_new_tokens: int,
    model: str | None,
    strict_openai: bool = False,
) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of one greedy, non-streaming request. `strict_openai` sends only
    OpenAI completions fields (servers that validate the body refuse the others); answers are
    then compared by the words of their text."""
    if api == "sglang":
        return "/generate", {
            native_prompt_key(prompt): prompt,
            "sampling_params": {
                "max_new_tokens": max_new_tokens,
                "temperature": 0.0,
                "ignore_eos": True,
            },
            "stream": False,
        }
    body: dict[str, Any] = {
        "model": model or "default",
        "prompt": prompt,
        "max_tokens": max_new_tokens,
        "temperature": 0.0,
        "stream": False,
    }
    if not strict_openai:
        body.update(ignore_eos=True, return_token_ids=True, logprobs=1)
    return "/v1/completions", body


class AbortedAnswer(ValueError):
    """The server ended the request with `finish_reason: {"type": "abort"}`: no answer."""


def answer_of(api: Api, data: Any) -> Answer:
    """The tokens of one response (see the module docstring for the fallbacks)."""
    if not isinstance(data, dict):
        raise ValueError("response is not a JSON object")
    if api == "sglang":
        aborted = abort_message(data.get("meta_info"))
        if aborted is not None:
            raise AbortedAnswer(f"the server aborted the request: {aborted}")
        ids = data.get("output_ids")
        if isinstance(ids, list) and all(isinstance(x, int) for x in ids):
            return list(ids)
        text = data.get("text")
        if isinstance(text, str):
            return text.split()
        raise ValueError("response has neither output_ids nor text")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("response has no choices")
    choice = choices[0]
    if choice.get("finish_reason") == "abort":
        raise AbortedAnswer("the server aborted the request (finish_reason abort)")
    ids = choice.get("token_ids")
    if isinstance(ids, list) and all(isinstance(x, int) for x in ids):
        return list(ids)
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list):
        return [str(t) for t in logprobs["tokens"]]
    text = choice.get("text")
    if isinstance(text, str):
        return text.split()
    raise ValueError("choice has neither token_ids, logprobs.tokens nor text")


async def collect(
    base_url: str,
    api: Api,
    settings: CorrectnessSpec,
    model: str | None,
    *,
    seed: int = SEED,
    api_key: SecretStr | None = None,
    timeout_s: float = 600.0,
    tokenizer: str | None = None,
    strict_openai: bool = False,
    ids: IdRange | None = None,
) -> list[Answer]:
    """One arm's greedy answers to the gate's prompts, in prompt order (as text of the same
    token count when `tokenizer` is given: for servers that take text prompts only).

    Raises `LoadError` (with the status and the start of the body) when a request fails: an
    arm that cannot answer the gate cannot be compared, and the measurer records why.
    """
    headers = {"Authorization": f"Bearer {api_key.get_secret_value()}"} if api_key else {}
    answers: list[Answer] = []
    async with httpx.AsyncClient(
        base_url=base_url.rstrip("/"),
        headers=headers,
        timeout=httpx.Timeout(timeout_s, connect=10.0),
    ) as client:
        drawn = prompts_for(settings, seed, ids)
        prompts: list[list[int] | str] = list(drawn)
        if tokenizer is not None:
            prompts = [text for text, _ in text_prompts(tokenizer, drawn, settings.input_len)]
        for i, prompt in enumerate(prompts):
            path, body = request(api, prompt, settings.max_new_tokens, model, strict_openai)
            try:
                response = await client.post(path, json=body)
            except httpx.HTTPError as exc:
                raise LoadError(
                    f"correctness prompt {i} to {base_url}{path} failed: "
                    f"{type(exc).__name__}: {exc}; is the server up?"
                ) from exc
            if response.status_code != 200:
                raise LoadError(
                    f"correctness prompt {i} to {base_url}{path} answered HTTP "
                    f"{response.status_code}: {response.text[:200]}"
                )
            try:
                answers.append(answer_of(api, response.json()))
            except AbortedAnswer as exc:
                raise LoadError(f"correctness prompt {i} to {base_url}{path}: {exc}") from exc
            except ValueError as exc:
                raise LoadError(
                    f"correctness prompt {i} to {base_url}{path}: {exc}; is the "
                    f"engine's API {api!r}? (engine.api)"
                ) from exc
    return answers


def agreement_by_arm(records: list[dict[str, Any]], baseline: str) -> dict[str, dict[str, Any]]:
    """Each candidate's agreement with the baseline, from the per-group answer records the
    measurer stores ({arm, slice, answers, error}); the lowest over slices. Pure.

    An arm whose answers could not be collected while the baseline's were gets agreement 0.0
    and its error: a gate that could not run must not read as a pass."""
    by_slice: dict[str, dict[str, dict[str, Any]]] = {}
    for record in records:
        by_slice.setdefault(str(record.get("slice", "")), {})[str(record["arm"])] = record
    out: dict[str, dict[str, Any]] = {}
    for arms in by_slice.values():
        ref = arms.get(baseline)
        if ref is None or not ref.get("answers"):
            continue
        for arm, record in arms.items():
            if arm == baseline:
                continue
            if record.get("answers"):
                a = agreement(ref["answers"], record["answers"])
                entry: dict[str, Any] = {
                    "agreement": a.share_identical_tokens,
                    "first_divergence": a.first_divergence_min,
                    "prompts": a.prompts,
                    "identical_prompts": a.identical_prompts,
                }
            else:
                entry = {"agreement": 0.0, "error": record.get("error")}
            if arm not in out or entry["agreement"] < out[arm]["agreement"]:
                out[arm] = entry
    return out

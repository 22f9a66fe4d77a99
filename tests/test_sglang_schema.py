"""Every request matrixrun sends, checked against the real SGLang's own schema, and the
simulator's answers against SGLang's response shapes (issue 28).

The schema is the released wheel's: `sglang/api/v1/api_types.py` (the generated JSON contract
that `/generate` enforces: `generate_contract_error` answers 400 with its text) and
`srt/entrypoints/openai/protocol.py` (the pydantic models of `/v1/completions`). Both are loaded
by file path from the files `scripts/sglang_wheel.py` takes out of the wheel; only their
dependencies (msgspec; pydantic, openai) are installed, and one stub is needed: protocol.py
imports `convert_json_schema_to_str` from `sglang.utils`, a module that pulls in numpy, IPython
and requests, so a one-function `sglang.utils` stands in for it (matrixrun sends no json
schema, so the stub is never called). The HTTP routes and bench_serving's argparse are read from
the wheel's `http_server.py` and `benchmark/serving.py` with `ast`, as the flag lists are.

Runs where MATRIXRUN_SGLANG_SRC names the extracted files: `nox -s sglang-schema` (and .ci/run)
sets that up from PyPI; elsewhere it skips, saying so. matrixrun itself never imports SGLang.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
from simserver import start_sim

from matrixrun.load.apis import request_body
from matrixrun.run.correctness import request as gate_request

SRC = Path(os.environ.get("MATRIXRUN_SGLANG_SRC", "/nonexistent"))
pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not (SRC / "sglang" / "api" / "v1" / "api_types.py").is_file(),
        reason="the SGLang schema check runs under `nox -s sglang-schema` (MATRIXRUN_SGLANG_SRC)",
    ),
]


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def api() -> types.ModuleType:
    return _load("sglang_api_v1_types", SRC / "sglang" / "api" / "v1" / "api_types.py")


@pytest.fixture(scope="module")
def protocol() -> types.ModuleType:
    stub = types.ModuleType("sglang.utils")

    def convert_json_schema_to_str(schema: Any) -> str:  # the one name protocol.py imports
        raise AssertionError("matrixrun sends no json schema")

    stub.convert_json_schema_to_str = convert_json_schema_to_str  # type: ignore[attr-defined]
    sys.modules.setdefault("sglang", types.ModuleType("sglang"))
    sys.modules["sglang.utils"] = stub
    path = SRC / "sglang" / "srt" / "entrypoints" / "openai" / "protocol.py"
    return _load("sglang_openai_protocol", path)


def test_the_files_are_the_release_named() -> None:
    assert (SRC / "VERSION").read_text().startswith("sglang ")


# ------------------------------------------------------------------------------- requests

PROMPTS: list[list[int] | str] = [[11, 12, 13, 14], "t1 t2 t3 t4"]


@pytest.mark.parametrize("prompt", PROMPTS, ids=["token_ids", "text"])
def test_native_requests_keep_the_generate_contract(api: Any, prompt: Any) -> None:
    """The load client's streaming body and the gate's body decode under the contract
    /generate enforces; the prompt lands in the field SGLang reads it from."""
    bodies = [
        json.loads(request_body("sglang", prompt, 8, None)),
        gate_request("sglang", prompt, 8, None)[1],
    ]
    for body in bodies:
        req = api.GenerateRequest.from_json_value(body)
        if isinstance(prompt, str):
            assert req.text == prompt and req.input_ids is None
        else:
            assert req.input_ids == prompt and req.text is None
        sp = req.sampling_params
        assert sp.max_new_tokens == 8 and sp.ignore_eos is True and sp.temperature == 0.0
        assert set(body) <= set(api.GenerateRequest.__struct_fields__)


def test_the_contract_refuses_what_the_old_code_sent(api: Any) -> None:
    """Text in input_ids (the old text-prompt body) and an unknown sampling key are 400s."""
    with pytest.raises(api.JsonContractError):
        api.GenerateRequest.from_json_value({"input_ids": "t1 t2", "sampling_params": {}})
    with pytest.raises(api.JsonContractError, match="unknown field `max_new_tokenz`"):
        api.GenerateRequest.from_json_value(
            {"input_ids": [1], "sampling_params": {"max_new_tokenz": 1}}
        )


@pytest.mark.parametrize("prompt", PROMPTS, ids=["token_ids", "text"])
@pytest.mark.parametrize("strict", [False, True])
def test_openai_requests_validate_and_set_only_known_fields(
    protocol: Any, prompt: Any, strict: bool
) -> None:
    """`/v1/completions` ignores unknown fields silently, so each one matrixrun sends must be
    a declared field of SGLang's CompletionRequest (else it would do nothing)."""
    bodies = [
        json.loads(request_body("openai", prompt, 8, "m", strict)),
        gate_request("openai", prompt, 8, "m", strict)[1],
    ]
    for body in bodies:
        req = protocol.CompletionRequest.model_validate(body)
        assert req.max_tokens == 8 and req.prompt == prompt
        unknown = set(body) - set(protocol.CompletionRequest.model_fields)
        assert not unknown, unknown
        if not strict:
            assert req.ignore_eos is True


# ------------------------------------------------------------------------------ responses


def _events(raw: str) -> list[Any]:
    return [json.loads(b[6:]) for b in raw.strip().split("\n\n") if b != "data: [DONE]"]


def _profile(**effects: Any) -> list[str]:
    return [
        "--profile-json",
        json.dumps({"name": "s", "base": {"step_ms": [[1, 2]]}, "effects": effects}),
    ]


def test_simulator_native_answers_have_sglangs_shapes(api: Any) -> None:
    fields = set(api.GenerateResponse.__struct_fields__)
    # the real server's first event also carries `response_sent_to_client_ts`, which the HTTP
    # layer adds outside the typed struct (../shared/sglang-cpu/transcripts/generate_stream.txt)
    meta_fields = set(api.GenerateMetaInfo.__struct_fields__) | {"response_sent_to_client_ts"}
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4}}
    with start_sim(_profile()) as (_, url):
        whole = httpx.post(url + "/generate", json=body, timeout=10).json()
        stream = httpx.post(url + "/generate", json={**body, "stream": True}, timeout=10).text
    for out in [whole, *_events(stream)]:
        decoded = api.GenerateResponse.from_json_value(out)
        assert set(out) <= fields and set(out["meta_info"]) <= meta_fields
        assert decoded.meta_info.completion_tokens == out["meta_info"]["completion_tokens"]
    last = api.GenerateResponse.from_json_value(_events(stream)[-1])
    assert last.meta_info.finish_reason is not None and last.meta_info.completion_tokens == 4


def test_simulator_faults_have_sglangs_shapes(api: Any) -> None:
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 6}, "stream": True}
    with start_sim(_profile(abort_rate=1.0)) as (_, url):
        aborted = _events(httpx.post(url + "/generate", json=body, timeout=10).text)[-1]
    with start_sim(_profile(stream_error_rate=1.0)) as (_, url):
        failed = _events(httpx.post(url + "/generate", json=body, timeout=10).text)[-1]
        refused = httpx.post(url + "/generate", json={"input_ids": "x"}, timeout=10)
    reason = api.GenerateResponse.from_json_value(aborted).meta_info.finish_reason
    assert type(reason).__name__ == "FinishAbort" and reason.message
    error = api.GenerateStreamError.from_json_value(failed)
    assert error.error is not None and error.error.message
    # http_server.stream_results also writes "type" and "retryable" (ErrorBody ignores them)
    assert {"message", "code"} <= set(failed["error"]) <= {"message", "code", "type", "retryable"}
    assert refused.status_code == 400 and isinstance(refused.json()["error"], str)


def test_simulator_openai_answers_validate(protocol: Any) -> None:
    body = {
        "model": "m",
        "prompt": [1, 2, 3],
        "max_tokens": 3,
        "stream_options": {"include_usage": True},
    }
    with start_sim(_profile()) as (_, url):
        whole = httpx.post(url + "/v1/completions", json=body, timeout=10).json()
        stream = httpx.post(url + "/v1/completions", json={**body, "stream": True}, timeout=10).text
    with start_sim(_profile(abort_rate=1.0)) as (_, url):
        aborted = _events(
            httpx.post(
                url + "/v1/completions", json={**body, "max_tokens": 5, "stream": True}, timeout=10
            ).text
        )
    protocol.CompletionResponse.model_validate(whole)
    assert set(whole) <= set(protocol.CompletionResponse.model_fields)
    for chunk in [*_events(stream), *aborted]:
        protocol.CompletionStreamResponse.model_validate(chunk)
        assert set(chunk) <= set(protocol.CompletionStreamResponse.model_fields)
    assert [c["choices"][0]["finish_reason"] for c in aborted if c["choices"]][-1] == "abort"


# ------------------------------------------------------------------- routes, bench_serving


def _routes() -> set[str]:
    tree = ast.parse((SRC / "sglang" / "srt" / "entrypoints" / "http_server.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "post", "api_route")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.add(node.args[0].value)
    return out


def test_every_endpoint_matrixrun_calls_exists() -> None:
    from matrixrun.engines.sglang import SGLangEngine
    from matrixrun.load.apis import PATHS

    engine = SGLangEngine()
    used = {engine.health_path, *engine.info_paths, str(engine.flush_path), *PATHS.values()}
    assert used <= _routes(), used - _routes()


def test_the_bench_serving_command_line_parses_with_the_real_argparse() -> None:
    from matrixrun.flags.extract import Sources, add_argument_flags
    from matrixrun.flags.model import FlagSet
    from matrixrun.load.bench_serving_client import build_argv
    from matrixrun.load.client import LoadConfig

    text = (SRC / "sglang" / "benchmark" / "serving.py").read_text()
    src = Sources.parse({"serving.py": text})
    fs = FlagSet("bench_serving", None, "wheel", add_argument_flags(src, src.trees["serving.py"]))
    for api_name in ("sglang", "openai"):
        config = LoadConfig(
            base_url="http://127.0.0.1:30000",
            api=api_name,
            model="/m",
            num_prompts=4,
            input_len=8,
            output_len=4,
            concurrency=2,
        )
        argv = build_argv(
            config, Path("/o.jsonl"), ["python", "-m", "sglang.benchmark.serving"], tokenizer="/t"
        )
        options = [(i, a) for i, a in enumerate(argv) if a.startswith("--")]
        for i, option in options:
            flag = fs.lookup(option)
            assert flag is not None, option
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            assert (value is None) == (flag.takes == "none"), option
            if value is not None and flag.choices:
                assert value in flag.choices, (option, value)

"""The spec's `engine` block: which serving engine runs the arms, how it is launched and
checked, and which client measures. Split from `models` (the rest of the spec) by size."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from matrixrun.spec.base import FlagValue, StrictModel


class EngineSpec(StrictModel):
    """Which serving engine runs the arms, how to launch it, and which client measures."""

    kind: Literal["sglang", "vllm", "openai", "command"] = Field(
        "sglang",
        description="sglang | vllm: launched with their CLIs; openai: an endpoint that is "
        "already running; command: any OpenAI-compatible server started from `launch` "
        "(placeholders {model}, {host}, {port}, {tokenizer}), e.g. transformers serve, TGI, "
        "llama.cpp's llama-server.",
    )
    args: dict[str, FlagValue] = Field(
        default_factory=dict,
        description="Server flags common to every arm, snake_case: {tp: 8} -> --tp 8; true -> "
        "bare flag; false -> omitted; lists -> repeated values; dicts -> JSON.",
    )
    launch: list[str] | None = Field(
        None,
        description="Command prefix that starts the server, replacing the engine default "
        "(e.g. [/opt/venv/bin/python, -m, sglang.launch_server] or a docker run prefix).",
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    version: str | None = Field(
        None,
        description="Engine version the spec targets (e.g. 0.5.23): `matrixrun validate` checks "
        "the flags against matrixrun's shipped flag list for it; default: the installed "
        "engine's --help, else the newest shipped list.",
    )
    help_command: list[str] | None = Field(
        None,
        min_length=1,
        description="argv that prints the server's argparse --help, to check the flags against "
        "(e.g. [llama-server, --help]; kind command has no other flag list).",
    )
    ready_path: str = Field(
        "/health",
        pattern=r"^/",
        description="kind=command: GET path that answers 200 once the server can serve.",
    )
    version_command: list[str] | None = Field(
        None,
        min_length=1,
        description="kind=command: argv whose first output line is the engine version "
        "(e.g. [python3, -c, 'import transformers; print(transformers.__version__)']).",
    )
    version_path: str | None = Field(
        None,
        pattern=r"^/",
        description="kind=command: GET path whose JSON `version` (or whole text) is the "
        "engine version, when the server has one.",
    )
    flush_path: str | None = Field(
        None,
        pattern=r"^/",
        description="kind=command: POST path that empties the prefix cache; none: not flushed "
        "(recorded).",
    )
    prompt_format: Literal["token_ids", "text"] = Field(
        "token_ids",
        description="token_ids: prompts are random token ids (exact lengths, no tokenizer "
        "needed); text: decoded with the model's tokenizer.json to text of the same token "
        "count, for servers that take text prompts only (needs the `tokenizers` package).",
    )
    strict_openai: bool = Field(
        False,
        description="Send only fields of the OpenAI completions API (no ignore_eos, "
        "return_token_ids or logprobs), for servers that refuse unknown fields (transformers "
        "serve). Outputs then end where the model stops: make it run to max_tokens (clear "
        "its EOS token) and the client counts requests that ended short.",
    )
    base_url: str | None = Field(None, description="kind=openai: the running endpoint.")
    api_key_env: str | None = Field(
        None, description="Name of the environment variable holding the API key (never the key)."
    )
    api: Literal["sglang", "openai"] | None = Field(
        None, description="Request API the client speaks; default: the engine's own."
    )
    client: Literal["builtin", "bench_serving"] = Field(
        "builtin",
        description="builtin: matrixrun's streaming client; bench_serving: run "
        "python -m sglang.benchmark.serving per cell and parse its output file.",
    )
    client_launch: list[str] | None = Field(
        None,
        description="Command prefix for bench_serving (default: [python, -m, "
        "sglang.benchmark.serving] with the harness's python).",
    )
    flush_cache: bool = Field(True, description="POST /flush_cache between cells.")
    check_hardware: bool = Field(
        True,
        description="Compare nvidia-smi with `hardware` before any launch; false records "
        "the override in the report.",
    )

    @field_validator("kind", mode="before")
    @classmethod
    def _not_sim(cls, value: Any) -> Any:
        """`kind: sim` used to launch SGLang silently; the simulator is a way to run, not an
        engine, so say how to reach it instead."""
        if value == "sim":
            raise ValueError(
                "sim is not an engine: keep the engine the arms are for (e.g. sglang) and "
                "rehearse on the simulator with `matrixrun run SPEC --rehearse`"
            )
        return value

"""`matrixrun bench-client` can send whatever a run sends (issue 42).

Before, bench-client had no text-prompt or strict-OpenAI option, so it could not measure a
server that refuses `ignore_eos` or token-id prompts (HTTP 422, as `transformers serve` does),
and it drew token ids from [1000, 30000) whatever the model, which kills an SGLang server with a
smaller vocabulary. Here a small server in a thread refuses what `transformers serve` refuses
and records every request body, so the tests see exactly what bench-client sent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from test_command_engine import word_tokenizer
from tokenizers import Tokenizer

from matrixrun.cli.commands.bench_client import cmd_bench_client
from matrixrun.cli.options import add_bench_client
from matrixrun.core.errors import InputError
from matrixrun.load import LoadConfig
from matrixrun.load import command as bench_client
from matrixrun.load.vocab import DEFAULT_HIGH, DEFAULT_LOW

pytestmark = pytest.mark.timeout(60)

#: The fields of OpenAI's completions API a strict server accepts (a subset is enough here).
OPENAI_FIELDS = {"model", "prompt", "max_tokens", "temperature", "stream", "stream_options"}


class StrictServer:
    """`/v1/completions` as `transformers serve` answers it: 422 for a field outside OpenAI's
    API (`ignore_eos`) or a prompt that is not text; `/generate` as SGLang's. It streams
    `max_tokens` tokens (at most `stops_after` where the request cannot say ignore_eos: the
    model stops early) and keeps every request body in `bodies`."""

    def __init__(self, stops_after: int | None = None) -> None:
        self.stops_after = stops_after
        self.bodies: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def __enter__(self) -> StrictServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                length = next(
                    int(line.split(":")[1])
                    for line in lines
                    if line.lower().startswith("content-length:")
                )
                body = json.loads(await reader.readexactly(length))
                self.bodies.append(body)
                status, payload = self._answer(lines[0].split()[1], body)
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: text/event-stream\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        if path == "/generate":
            n = body["sampling_params"]["max_new_tokens"]
            native = [
                {"text": "x" * k, "meta_info": {"completion_tokens": k}} for k in range(1, n + 1)
            ]
            return 200, sse(native)
        unknown = set(body) - OPENAI_FIELDS
        if unknown:
            return 422, json.dumps({"detail": f"Unexpected fields: {sorted(unknown)}"}).encode()
        if not isinstance(body["prompt"], str):
            return 422, b'{"detail": "prompt: Input should be a valid string"}'
        n = body["max_tokens"]
        if self.stops_after is not None:
            n = min(n, self.stops_after)
        events: list[dict[str, Any]] = [
            {"choices": [{"text": "w", "finish_reason": "length" if k == n else None}]}
            for k in range(1, n + 1)
        ]
        events.append({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": n}})
        return 200, sse(events)


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + (
        b"data: [DONE]\n\n"
    )


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_client(parser)
    return parser.parse_args(list(argv))


def common(url: str, *more: str) -> list[str]:
    return [
        "--url", url, "--concurrency", "2", "--num-prompts", "4", "--input-len", "12",
        "--output-len", "5", "--processes", "1", "--timeout", "20", *more,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real word-level tokenizer.json of 3,002 tokens ([UNK], [BOS], w0 ... w2999)."""
    return word_tokenizer(tmp_path_factory.mktemp("tok"))


def test_a_server_that_refuses_ignore_eos_and_ids_is_measured_with_text_and_strict_openai(
    tokenizer: Path,
) -> None:
    with StrictServer() as server:
        refused = bench_client.run(parse(*common(server.url, "--api", "openai")))
        strict = common(server.url, "--api", "openai", "--strict-openai")
        still_ids = bench_client.run(parse(*strict))
        server.bodies.clear()
        argv = [*strict, "--prompt-format", "text", "--tokenizer", str(tokenizer)]
        out = bench_client.run(parse(*argv))
    # what a user had before: every request refused, for ignore_eos, then for the id prompt
    assert refused["completed"] == 0 and "ignore_eos" in next(iter(refused["errors"]))
    assert still_ids["completed"] == 0 and "valid string" in next(iter(still_ids["errors"]))
    assert (out["completed"], out["failed"]) == (4, 0)
    assert out["total_output_tokens"] == 4 * 5 and "short_outputs" not in out
    tok = Tokenizer.from_file(str(tokenizer / "tokenizer.json"))
    assert len(server.bodies) == 1 + 4  # one warm-up, four measured
    for body in server.bodies:
        assert "ignore_eos" not in body and isinstance(body["prompt"], str)
    for body in server.bodies[1:]:
        assert len(tok.encode(body["prompt"], add_special_tokens=False).ids) == 12


@pytest.mark.parametrize(
    ("flags", "low", "high"),
    [
        ([], DEFAULT_LOW, DEFAULT_HIGH),  # nothing known: the historical range
        (["--vocab-size", "2048"], 64, 1920),  # scaled to the size (vocab.py)
        (["--tokenizer", "TOK"], 93, 2814),  # read from tokenizer.json: 3,002 tokens
    ],
)
def test_token_ids_stay_within_the_vocabulary_given(
    tokenizer: Path, flags: list[str], low: int, high: int
) -> None:
    flags = [str(tokenizer) if f == "TOK" else f for f in flags]
    with StrictServer() as server:
        out = bench_client.run(parse(*common(server.url, "--input-len", "200", *flags)))
    assert out["completed"] == 4
    ids = [i for body in server.bodies for i in body["input_ids"]]
    assert len(ids) == 5 * 200
    assert low <= min(ids) and max(ids) < high
    assert max(ids) - min(ids) > (high - low) // 2  # drawn across the range, not a corner


def test_warmup_copy_of_the_cell_as_a_run_does() -> None:
    with StrictServer() as server:
        out = bench_client.run(parse(*common(server.url, "--warmup-requests", "cell")))
    assert out["completed"] == 4
    asked = [b["sampling_params"]["max_new_tokens"] for b in server.bodies]
    assert asked == [5] * 8  # four unmeasured at the cell's own length, then the four measured


def test_outputs_that_end_short_are_counted_and_said(
    tokenizer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--api", "openai", "--strict-openai", "--prompt-format", "text"]
    with StrictServer(stops_after=3) as server:
        code = cmd_bench_client(parse(*common(server.url, *argv, "--tokenizer", str(tokenizer))))
    printed = capsys.readouterr()
    out = json.loads(printed.out)
    assert code == 0 and out["completed"] == 4 and out["short_outputs"] == 4
    assert out["total_output_tokens"] == 4 * 3
    assert "4 of 4 completed requests ended before 5 output tokens" in printed.err


def test_every_load_option_of_a_run_reaches_the_client(tokenizer: Path) -> None:
    config = bench_client.config_from(
        parse(
            *common("http://127.0.0.1:1", "--api", "openai", "--model", "m"),
            "--strict-openai", "--prompt-format", "text", "--tokenizer", str(tokenizer),
            "--duration", "30", "--time-cap", "45", "--transport", "httpx",
            "--request-rate", "8", "--seed", "7", "--warmup-requests", "3",
        )
    )  # fmt: skip
    assert (config.api, config.model, config.strict_openai) == ("openai", "m", True)
    assert (config.prompt_format, config.tokenizer) == ("text", str(tokenizer))
    assert (config.duration_s, config.time_cap_s, config.transport) == (30, 45, "httpx")
    assert (config.request_rate, config.seed, config.warmup_requests) == (8, 7, 3)
    assert config.warmup_output_len is None  # a plain warm-up: capped at 32 tokens
    # a field LoadConfig gains is one a run can set: bench-client must get a flag for it
    # (cli/options.py's add_bench_client, load/command.py's config_from)
    missing = set(LoadConfig.model_fields) - config.model_fields_set
    assert not missing, f"bench-client has no flag for LoadConfig's {sorted(missing)}"
    defaults = bench_client.config_from(parse(*common("http://127.0.0.1:1")))
    assert (defaults.prompt_format, defaults.strict_openai, defaults.transport) == (
        "token_ids", False, "raw",
    )  # fmt: skip
    assert defaults.duration_s is None and defaults.time_cap_s is None
    assert math.isinf(defaults.request_rate)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--strict-openai"], "--strict-openai is for --api openai"),
        (["--prompt-format", "text"], "--prompt-format text needs --tokenizer"),
        (["--tokenizer", "EMPTY"], "give --vocab-size"),
        (["--duration", "0"], "bad load option --duration"),
        (["--vocab-size", "10"], "leaves"),
    ],
)
def test_options_that_cannot_work_are_one_sentence(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    flags = [str(tmp_path) if f == "EMPTY" else f for f in flags]
    with pytest.raises(InputError, match=message):
        bench_client.config_from(parse(*common("http://127.0.0.1:1", *flags)))


def test_warmup_requests_takes_a_count_or_cell_only() -> None:
    for bad in ("-1", "some"):
        with pytest.raises(SystemExit):
            parse(*common("http://x", "--warmup-requests", bad))
    assert parse(*common("http://x", "--warmup-requests", "0")).warmup_requests == 0

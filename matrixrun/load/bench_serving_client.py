"""Measure a cell with SGLang's own client: `python -m sglang.benchmark.serving`, a subprocess.

For teams whose published numbers come from bench_serving, measuring with the very same
client removes one question from every comparison. The harness never imports sglang: it runs
the client as a command (`engine.client_launch` as the prefix when given, e.g. the python of
the venv that has SGLang installed, else this python's `-m sglang.benchmark.serving`), writes its
output to a fresh `--output-file`, and reads it back with the same parser `ingest` uses
(`bench_serving.py`), so the metrics are bench_serving's own numbers.

Entry point: `sglang.benchmark.serving` (0.5.22 and 0.5.23; `sglang.bench_serving` is a
deprecated alias there that prints a FutureWarning; give an older build its own
`engine.client_launch`).

Flags (checked against 0.5.23's `sglang/benchmark/serving.py` argparse): `--backend` (`sglang`
for the native `/generate` API, `sglang-oai` for `/v1/completions`), `--host`/`--port`, or
`--base-url` for an https or path-prefixed endpoint, `--model` and `--tokenizer` (it loads a
tokenizer to make prompts), `--random-input-len`, `--random-output-len`,
`--random-range-ratio 1`, `--num-prompts`, `--max-concurrency`, `--request-rate` (`inf` parses
as a float), `--seed`, `--warmup-requests`, `--flush-cache`, `--output-file`,
`--output-details` (per-request `input_lens`, `output_lens`, `ttfts`, `itls`, `errors`),
`--disable-tqdm` (keeps the log readable). An API key goes to the child as `OPENAI_API_KEY`,
the variable bench_serving reads, never in argv.

Prompt lengths. Its `random` dataset is NOT exact: it samples ShareGPT text (a download),
truncates or repeats its token ids, decodes them to text (`datasets/random.py`, with
`num_special_tokens_to_add` taken off) and the server tokenizes that text again, so the
server sees other counts than `--random-input-len` while `total_input_tokens` reports the
nominal ones. `random-ids` draws token ids directly, and `--tokenize-prompt` sends them as
`input_ids`: exact lengths, no download, the same prompts' sizes as the built-in client. That
is what the native backend gets. `--tokenize-prompt` is refused for `sglang-oai` ("only
compatible with --backend sglang"), so there the ids are decoded to text and re-tokenized by
the server: input counts are nominal, and the measurement says so (`extra.prompt_lengths`).

Warm-up. `--warmup-requests W` sends W copies of the first measured request, so that request
would be a prefix-cache hit; `--flush-cache` makes bench_serving flush (`/flush_cache` with
its 60 s idle wait) between the warm-up and the measured run, so it is not.

Per-request records are rebuilt from `--output-details`. bench_serving does not write when a
request was sent, so every record's `start` is 0 (the benchmark start) and the run's duration
is bench_serving's; `e2e` is ttft + the sum of its ITLs (its latency is the last chunk's
arrival), and each ITL entry is one token, the first chunk carrying the rest.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from matrixrun.core import interrupt
from matrixrun.core.errors import InputError, LoadError
from matrixrun.core.metrics import Metrics
from matrixrun.load.bench_serving import BenchServingRecord, RequestDetails, read_file
from matrixrun.load.client import LoadConfig
from matrixrun.load.records import RequestRecord

DEFAULT_PREFIX = [
    os.environ.get("MATRIXRUN_SGLANG_PYTHON", sys.executable),
    "-m",
    "sglang.benchmark.serving",
]
#: What each backend's prompts are (recorded with the measurement, see the docstring).
PROMPT_LENGTHS = {
    "sglang": "exact (random-ids sent as input_ids)",
    "openai": "nominal (random-ids decoded to text and re-tokenized by the server)",
}
BACKENDS = {"sglang": "sglang", "openai": "sglang-oai"}
OUTPUT_NAME = "bench_serving.jsonl"
LOG_NAME = "bench_serving.log"


def _num(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:g}"


def build_argv(
    config: LoadConfig,
    output_file: Path,
    prefix: list[str] | None = None,
    *,
    tokenizer: str | None = None,
    dataset_name: str = "random-ids",
    output_details: bool = True,
) -> list[str]:
    """The bench_serving command line for one cell (pure)."""
    parts = urlsplit(config.base_url)
    argv = [*(prefix or DEFAULT_PREFIX), "--backend", BACKENDS[config.api]]
    if parts.scheme == "http" and parts.port and parts.path in ("", "/"):
        argv += ["--host", parts.hostname or "127.0.0.1", "--port", str(parts.port)]
    else:
        argv += ["--base-url", config.base_url]
    if config.model:
        argv += ["--model", config.model]
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    argv += [
        "--dataset-name", dataset_name,
        "--random-input-len", str(config.input_len),
        "--random-output-len", str(config.output_len),
        "--random-range-ratio", "1",
        "--num-prompts", str(config.num_prompts),
        "--max-concurrency", str(config.concurrency),
        "--request-rate", _num(config.request_rate),
        "--seed", str(config.seed),
        "--warmup-requests", str(config.warmup_requests),
        "--flush-cache",
        "--disable-tqdm",
        "--output-file", str(output_file),
    ]  # fmt: skip
    if config.api == "sglang" and dataset_name == "random-ids":
        argv.append("--tokenize-prompt")
    if output_details:
        argv.append("--output-details")
    return argv


def records_from_details(details: RequestDetails) -> list[RequestRecord]:
    """bench_serving's per-request lists -> our records (see the module docstring)."""
    out: list[RequestRecord] = []
    n = len(details.ttfts)
    for i in range(n):
        error = details.errors[i] if i < len(details.errors) else ""
        prompt = details.input_lens[i] if i < len(details.input_lens) else 0
        if error:
            last = error.strip().splitlines()[-1:] or ["failed"]
            out.append(
                RequestRecord(
                    index=i, start=0.0, e2e=0.0, prompt_tokens=prompt, error=last[0][:300]
                )
            )
            continue
        ttft = details.ttfts[i]
        itls = details.itls[i] if i < len(details.itls) else []
        produced = details.output_lens[i] if i < len(details.output_lens) else len(itls) + 1
        times = [ttft]
        for gap in itls:
            times.append(times[-1] + gap)
        tokens = [max(produced - len(itls), 1), *([1] * len(itls))]
        out.append(
            RequestRecord(
                index=i,
                start=0.0,
                ttft=ttft,
                e2e=times[-1],
                chunk_times=times,
                chunk_tokens=tokens,
                prompt_tokens=prompt,
                output_tokens=produced,
            )
        )
    return out


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").rstrip().splitlines()[-lines:])
    except OSError:
        return ""


def _terminate_group(proc: subprocess.Popen[bytes]) -> None:
    """Ask bench_serving to stop (a Ctrl-C's doing: called from the signal handler, so it
    only signals; `proc.wait` then returns)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue


#: Lines bench_serving prints when its own start-up (imports, tokenizer, prompts) is over and
#: requests begin: the warm-up in 0.5.x (printed even for 0 warm-up requests), the initial
#: test request in older builds. The cell's time limit counts from the first of them.
MEASURING = (
    b"Starting warmup with",
    b"Starting initial single prompt test run",
    b"Starting main benchmark run",
)
#: How long bench_serving may take to start measuring: its imports and tokenizer took most of
#: a minute on two busy cores (../shared/sglang-cpu/NOTES.md), which is no part of a cell.
CLIENT_STARTUP_S = 600.0


def _complete(output: Path) -> bool:
    """Whether `output` holds a whole bench_serving result (written once, at its end)."""
    try:
        return bool(output.exists() and read_file(output))
    except InputError:
        return False


def _wait_measuring(
    proc: subprocess.Popen[bytes], log_path: Path, timeout_s: float, poll_s: float = 0.2
) -> tuple[int, str | None]:
    """Wait for bench_serving: (its exit code, why it was stopped or None).

    The cell's limit `timeout_s` counts from the moment its log says requests begin
    (`MEASURING`), not from its start: its start-up is the client's, not the server's, and
    counting it threw away a finished result that landed 3 s before a 60 s cap (issue 42).
    Its start-up has its own allowance, `CLIENT_STARTUP_S`. A child stopped for either limit
    is killed here; the caller still reads a result it finished writing."""
    started = time.monotonic()
    measuring: float | None = None
    seen = b""
    while (code := proc.poll()) is None:
        now = time.monotonic()
        if measuring is None:
            with contextlib.suppress(OSError):
                seen = log_path.read_bytes()[-65536:]
            if any(m in seen for m in MEASURING):
                measuring = now
        if measuring is not None and now - measuring > timeout_s:
            _kill_group(proc)
            return proc.wait(), (
                f"bench_serving timed out after {timeout_s:.0f}s of measuring (limits.cell_timeout)"
            )
        if measuring is None and now - started > CLIENT_STARTUP_S:
            _kill_group(proc)
            return proc.wait(), (
                f"bench_serving did not start sending requests within {CLIENT_STARTUP_S:.0f}s "
                "of its launch (its imports and tokenizer); check engine.client_launch"
            )
        time.sleep(poll_s)
    return code, None


def run_bench_serving(
    config: LoadConfig,
    out_dir: Path,
    prefix: list[str] | None,
    timeout_s: float,
    *,
    tokenizer: str | None = None,
    dataset_name: str = "random-ids",
    env: dict[str, str] | None = None,
) -> tuple[Metrics, list[RequestRecord], list[str]]:
    """Run bench_serving for one cell; (its metrics, per-request records, the argv it ran).

    `out_dir` receives `bench_serving.jsonl` (replaced) and `bench_serving.log` (its stdout and
    stderr). A non-zero exit, a timeout or an output without a result raise `LoadError` with
    the last lines of the log; a complete output file is read whatever ended the child.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / OUTPUT_NAME
    log_path = out_dir / LOG_NAME
    output.unlink(missing_ok=True)
    argv = build_argv(config, output, prefix, tokenizer=tokenizer, dataset_name=dataset_name)
    child_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    if config.api_key is not None:
        child_env["OPENAI_API_KEY"] = config.api_key.get_secret_value()
    with log_path.open("wb") as log:
        try:
            proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=child_env, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise LoadError(
                f"could not start bench_serving ({argv[0]}): {exc.strerror}; set "
                "engine.client_launch to a python that has sglang installed, e.g. "
                "[/opt/sglang/bin/python, -m, sglang.benchmark.serving]"
            ) from exc
        started = time.monotonic()
        try:
            with interrupt.load(lambda: _terminate_group(proc)):
                code, late = _wait_measuring(proc, log_path, timeout_s)
        finally:
            if proc.poll() is None:
                _kill_group(proc)
    if code != 0 and interrupt.requested():
        raise KeyboardInterrupt  # a Ctrl-C stopped it: the cell in flight is not kept
    if code != 0 and _complete(output):
        # its result was on file before it was stopped or failed (late: the cap struck while
        # it wrote or tidied up): a finished measurement is never thrown away
        code = 0
    elif late is not None:
        raise LoadError(f"{late}; last lines of {log_path}:\n{_tail(log_path)}")
    if code != 0:
        raise LoadError(
            f"bench_serving exited with code {code} after "
            f"{time.monotonic() - started:.0f}s; last lines of {log_path}:\n"
            f"{_tail(log_path)}"
        )
    if not output.exists():
        raise LoadError(
            f"bench_serving exited 0 but wrote no {output}; last lines of "
            f"{log_path}:\n{_tail(log_path)}"
        )
    try:
        record: BenchServingRecord = read_file(output)[-1]
    except InputError as exc:  # say which run, and keep its log
        raise LoadError(f"{exc}; last lines of {log_path}:\n{_tail(log_path)}") from exc
    records = records_from_details(record.details) if record.details else []
    return record.metrics, records, argv

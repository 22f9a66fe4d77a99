"""`matrixrun bench-client`: run the built-in load client once against a running server.

The CLI owns the options (`cli/options.py`, kept light so the parser builds without the load
client), printing and exit codes (`cli/commands/bench_client.py`); this module turns the parsed
options into a measurement, returned as the `Metrics` dict (bench_serving's field names)
plus `client_check`, the client's self-check (`selfcheck.py`), and `client_processes`, how
many processes the requests were spread over (`multi.py`).
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from matrixrun.core.errors import InputError
from matrixrun.core.keeping import worst
from matrixrun.load.client import LoadConfig, validate_config
from matrixrun.load.datasets import DatasetConfig
from matrixrun.load.multi import run_load_sync
from matrixrun.load.vocab import Vocab, id_range, read_vocab


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure once; return the metrics as a JSON-ready dict. Raises InputError/LoadError."""
    result = run_load_sync(config_from(args))
    out: dict[str, Any] = result.metrics.model_dump()
    if result.check is not None:
        out["client_check"] = result.check.as_dict()
    out["client_processes"] = result.processes
    errors = Counter(r.error for r in result.records if r.error)
    if errors:
        out["errors"] = dict(errors.most_common(5))  # the commonest failures, with counts
    if result.warmup_failed:
        out["warmup_failed"] = result.warmup_failed
    if result.capped:
        out["capped"] = result.capped
    short = result.short_outputs(args.output_len)
    if short:
        out["short_outputs"] = short
    return out


def config_from(args: argparse.Namespace) -> LoadConfig:
    """The `LoadConfig` a run would build for the same workload (`run/measurer.py`'s
    `_load_config`): every request option a spec has is a flag here, so any server a run
    can measure, bench-client can (a server that refuses ignore_eos or token ids included)."""
    prompt_format, tokenizer, strict = args.prompt_format, args.tokenizer, args.strict_openai
    if strict and args.api != "openai":
        raise InputError("--strict-openai is for --api openai (the native API has no such mode)")
    if prompt_format == "text" and not tokenizer:
        raise InputError(
            "--prompt-format text needs --tokenizer (the model's tokenizer.json or its folder)"
        )
    copy = args.warmup_requests == "cell"  # an unmeasured copy of the measurement first
    return validate_config(
        base_url=args.url,
        api=args.api,
        model=args.model,
        num_prompts=args.num_prompts,
        input_len=args.input_len,
        output_len=args.output_len,
        concurrency=args.concurrency,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        warmup_requests=args.num_prompts if copy else args.warmup_requests,
        warmup_output_len=args.output_len if copy else None,
        seed=args.seed,
        request_timeout_s=args.timeout,
        duration_s=args.duration,
        time_cap_s=args.time_cap,
        api_key=args.api_key,
        processes=args.processes,
        transport=args.transport,
        prompt_format=prompt_format,
        tokenizer=tokenizer,
        strict_openai=strict,
        dataset=_dataset(prompt_format, tokenizer, args.vocab_size),
    )


def _dataset(prompt_format: str, tokenizer: str | None, vocab_size: int | None) -> DatasetConfig:
    """Token ids within the model's vocabulary, by the run's rule (`datasets/resolve.py`):
    SGLang does not check ids, and one beyond its vocabulary kills the server. Without a
    tokenizer or a size, the historical [1000, 30000) (what bench-client always sent)."""
    if prompt_format == "text" or (tokenizer is None and vocab_size is None):
        return DatasetConfig()  # text prompts are made in the tokenizer's own ids
    read = read_vocab(tokenizer)
    if vocab_size is not None:
        vocab = Vocab(vocab_size, read.special if read else frozenset(), "--vocab-size")
    elif read is None:
        raise InputError(
            f"cannot read a vocabulary size from --tokenizer {tokenizer} (no config.json with "
            "vocab_size, tokenizer.json or tokenizer_config.json there); give --vocab-size"
        )
    else:
        vocab = read
    ids = id_range(vocab)
    return DatasetConfig(id_low=ids.low, id_high=ids.high)


def failure_summary(out: dict[str, Any]) -> str | None:
    """One sentence for stderr when requests failed (None when none did): how many, and the
    commonest reasons. bench-client then exits 1, so a script never reads a half-failed
    measurement as a clean one."""
    failed = int(out.get("failed") or 0)
    if not failed:
        return None
    sent = failed + int(out.get("completed") or 0)
    errors: dict[str, int] = out.get("errors") or {}
    reasons = "; ".join(f"{n}x {text}" for text, n in errors.items()) or "no reason recorded"
    return f"{failed} of {sent} requests failed: {reasons}"


def client_warning(out: dict[str, Any]) -> str | None:
    """One sentence for stderr when the self-check found the client could have distorted the
    numbers (None when it kept up)."""
    check = out.get("client_check")
    if not isinstance(check, dict) or not check.get("client_bound"):
        return None
    named = ", ".join(f"{k} (up to {v:.0%})" for k, v in worst(check["affected"], 4))
    return (
        f"warning: the client fell behind (loop lag p99 {check['lag_p99_ms']:.1f} ms, "
        f"{check['coalesced_share']:.1%} of token gaps read together, CPU "
        f"{check['cpu'] if check['cpu'] is not None else '?'}): {named} may be the client's, "
        "not the server's; give the client its own cores (several: --processes N), or lower "
        "the concurrency"
    )


def short_warning(out: dict[str, Any], output_len: int) -> str | None:
    """One sentence for stderr when completed requests ended before `output_len` tokens (None
    when none did): without ignore_eos (`--strict-openai`) the model may stop early, and the
    throughput is then over shorter outputs than asked."""
    short = int(out.get("short_outputs") or 0)
    if not short:
        return None
    return (
        f"warning: {short} of {out.get('completed', '?')} completed requests ended before "
        f"{output_len} output tokens (the model stopped; no ignore_eos was sent): the numbers "
        "are over shorter outputs than asked"
    )

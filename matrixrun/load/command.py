"""`matrixrun bench-client`: run the built-in load client once against a running server.

The CLI (`cli.py`) owns printing and exit codes; this module only declares the options and
turns them into a measurement, returned as the `Metrics` dict (bench_serving's field names)
plus `client_check`, the client's self-check (`selfcheck.py`), and `client_processes`, how
many processes the requests were spread over (`multi.py`).
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from typing import Any

from matrixrun.load.client import validate_config
from matrixrun.load.multi import run_load_sync
from matrixrun.load.selfcheck import worst


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'inf', got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (or inf), got {text}")
    return value


def _processes(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or 'auto', got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (or auto), got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare bench-client's options (names follow bench_serving's where they overlap)."""
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument(
        "--api",
        choices=("sglang", "openai"),
        default="sglang",
        help="sglang: native POST /generate; openai: POST /v1/completions (default: sglang)",
    )
    parser.add_argument("--concurrency", type=int, required=True, help="most requests in flight")
    parser.add_argument("--num-prompts", type=int, required=True, help="measured requests")
    parser.add_argument("--input-len", type=int, required=True, help="prompt tokens per request")
    parser.add_argument("--output-len", type=int, required=True, help="output tokens per request")
    parser.add_argument(
        "--request-rate",
        type=_rate,
        default=math.inf,
        help="Poisson arrival rate in requests/s (default: inf, all at once)",
    )
    parser.add_argument("--warmup-requests", type=int, default=1, help="unmeasured (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="prompt and arrival seed (default 0)")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="per-request timeout in seconds (default 600)"
    )
    parser.add_argument(
        "--model", default=None, help="served model name for --api openai (default: 'default')"
    )
    parser.add_argument(
        "--processes",
        type=_processes,
        default="auto",
        help="client processes to spread the requests over (default auto: one per 256 of "
        "concurrency, at most the usable cores minus one)",
    )
    parser.add_argument(
        "--api-key", default=None, help="bearer token, if the server wants one (never logged)"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure once; return the metrics as a JSON-ready dict. Raises InputError/LoadError."""
    config = validate_config(
        base_url=args.url,
        api=args.api,
        model=args.model,
        num_prompts=args.num_prompts,
        input_len=args.input_len,
        output_len=args.output_len,
        concurrency=args.concurrency,
        request_rate=args.request_rate,
        warmup_requests=args.warmup_requests,
        seed=args.seed,
        request_timeout_s=args.timeout,
        api_key=getattr(args, "api_key", None),
        processes=getattr(args, "processes", "auto"),
    )
    result = run_load_sync(config)
    out: dict[str, Any] = result.metrics.model_dump()
    if result.check is not None:
        out["client_check"] = result.check.as_dict()
    out["client_processes"] = result.processes
    errors = Counter(r.error for r in result.records if r.error)
    if errors:
        out["errors"] = dict(errors.most_common(5))  # the commonest failures, with counts
    if result.warmup_failed:
        out["warmup_failed"] = result.warmup_failed
    return out


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

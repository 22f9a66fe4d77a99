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

from matrixrun.load.client import validate_config
from matrixrun.load.multi import run_load_sync
from matrixrun.load.selfcheck import worst


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

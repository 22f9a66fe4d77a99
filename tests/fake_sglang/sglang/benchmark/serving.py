"""A stand-in for `python -m sglang.benchmark.serving`, for tests of the bench_serving adapter.

It accepts the real client's flags (same names, types and defaults as SGLang 0.5.23's argparse;
an unknown or misspelt flag fails the run exactly as the real one would; the adapter's argv is
also checked against the real wheel's argparse in tests/test_sglang_schema.py), really drives
the server
at --host/--port with matrixrun's own load client (same prompts lengths, concurrency, rate,
warmup, seed), and appends one line in bench_serving's --output-file format (Infinity for an
infinite rate, server_info, metrics named as bench_serving names them, and with
--output-details the per-request lists). So a test exercises the adapter's argv, the
subprocess, the file and its parsing, against numbers that come from a real server.

FAKE_BENCH_SERVING=fail|hang|nofile makes it crash, hang or exit without writing (error tests).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import httpx
from pydantic import SecretStr

from matrixrun.load.client import LoadConfig
from matrixrun.load.multi import run_load_sync


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="sglang", choices=["sglang", "sglang-oai", "vllm"])
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int)
    p.add_argument(
        "--dataset-name", default="sharegpt", choices=["sharegpt", "random", "random-ids"]
    )
    p.add_argument("--model")
    p.add_argument("--tokenizer")
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=1024)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--output-file")
    p.add_argument("--output-details", action="store_true")
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--flush-cache", action="store_true")
    p.add_argument("--flush-cache-timeout", type=float, default=60.0)
    p.add_argument("--tokenize-prompt", action="store_true")
    args = p.parse_args()
    if args.tokenize_prompt and args.backend != "sglang":
        raise AssertionError(
            "`--tokenize-prompt` only compatible with `--backend sglang` currently"
        )
    print(f"benchmark_args={args}", flush=True)

    mode = os.environ.get("FAKE_BENCH_SERVING", "")
    if mode == "nostart":  # never gets past its start-up
        time.sleep(600)
    if mode == "slowstart":  # its imports and tokenizer take a while, as on two busy cores
        time.sleep(float(os.environ.get("FAKE_STARTUP_S", "4")))
    # the real one prints this once its prompts are made, even for 0 warm-up requests
    print(f"Starting warmup with {args.warmup_requests} sequences...", flush=True)
    if mode == "fail":
        print("Traceback (most recent call last):\nRuntimeError: fake bench_serving failed")
        return 1
    if mode == "hang":
        time.sleep(600)
    if mode == "nofile":
        return 0

    base = args.base_url or f"http://{args.host}:{args.port}"
    api = "sglang" if args.backend == "sglang" else "openai"
    key = os.environ.get("OPENAI_API_KEY")
    config = LoadConfig(
        base_url=base, api=api, model=args.model, num_prompts=args.num_prompts,
        input_len=args.random_input_len, output_len=args.random_output_len,
        concurrency=args.max_concurrency or args.num_prompts, request_rate=args.request_rate,
        warmup_requests=args.warmup_requests, seed=args.seed,
        api_key=SecretStr(key) if key else None,
    )  # fmt: skip
    if args.flush_cache:  # the real one flushes between its warm-up and the measured run
        flushed = httpx.post(
            base + "/flush_cache", params={"timeout": args.flush_cache_timeout}, timeout=90
        )
        flushed.raise_for_status()
    result = run_load_sync(config)
    info = httpx.get(base + "/server_info", timeout=10).json() if api == "sglang" else {}
    m = result.metrics.model_dump()
    line = {
        "tag": None, "backend": args.backend, "dataset_name": args.dataset_name,
        "request_rate": args.request_rate, "max_concurrency": args.max_concurrency,
        "random_input_len": args.random_input_len, "random_output_len": args.random_output_len,
        "random_range_ratio": args.random_range_ratio, "server_info": info,
        **{k: (float("nan") if v is None else v) for k, v in m.items() if k != "failed"},
        "api_key_seen": bool(key),
    }  # fmt: skip
    if args.output_details:
        recs = result.records
        line |= {
            "input_lens": [r.prompt_tokens for r in recs],
            "output_lens": [r.output_tokens for r in recs],
            "ttfts": [r.ttft or 0.0 for r in recs],
            "itls": [
                [b - a for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)]
                for r in recs
            ],
            "generated_texts": ["" for _ in recs],
            "errors": [r.error for r in recs],
        }
    with open(args.output_file, "a") as f:
        f.write(json.dumps(line) + "\n")
    if mode == "linger":  # its result is on file, then it takes its time to exit
        time.sleep(600)
    return 0


if __name__ == "__main__":
    sys.exit(main())

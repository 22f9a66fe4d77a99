"""Does a warm-up at the cell's own concurrency remove a real engine's first-pass penalty?

Why: on the lent H200 (../shared/data/README.md) the first pass over concurrency on a fresh
`transformers serve --continuous-batching` ran +109% slower at 8 and +36% at 32 than the
second pass, after a warm-up of 4 requests at concurrency 1. If that penalty is a new batch
shape's first use (kernels compiled or tuned, graphs or caches built per shape), a warm-up of
one wave at the cell's own concurrency (`warmup_requests` = concurrency, sent at most
concurrency at once, as the load client does) should remove it; if not, the verify policy
must keep treating every fresh server's first run of a cell as suspect (`benchmarks/
verdicts13.py`'s `h200` world assumes it must).

Launches cycle through the warm-ups named by `--variants` (`small`: 2 requests, the committed
spec's; `wave`: one wave at the cell's concurrency, outputs capped at the client's
`WARMUP_OUTPUT_LEN`, 32 tokens; `full`: that wave at the cell's own output length, so the
warm-up reaches the cell's sequence lengths too; `pass`: as many warm-up requests as the cell
measures, at its full lengths — an unmeasured copy of the cell), each with two back-to-back
passes;
the penalty is first pass / second pass − 1 per launch and cell. Output tokens per second from
matrixrun's own load client (the runner's `LoadConfig`), one JSON line per cell run, a table
last. Runs on the lent machine through `benchmarks/gpu/warmup.sh`.

    python3 benchmarks/gpu/warmup.py --model /tmp/llama-0.8b --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from matrixrun.load import client
from matrixrun.load.client import LoadConfig
from matrixrun.load.multi import run_load_sync

VARIANTS = ("small", "wave", "full", "pass")
CAPPED = client.WARMUP_OUTPUT_LEN
SERVE = ["python3", "-c", "from transformers.cli.transformers import main; main()", "serve"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(model: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [*SERVE, model, "--host", "127.0.0.1", "--port", str(port), "--continuous-batching"]
    with log.open("ab") as out:
        proc = subprocess.Popen(  # noqa: S603 (a fixed argv, no shell)
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"server not ready in 180 s; see {log}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def cell(port: int, model: str, conc: int, warm: int, seed: int) -> dict[str, float | None]:
    cfg = LoadConfig(
        base_url=f"http://127.0.0.1:{port}",
        api="openai",
        model=model,
        num_prompts=max(2 * conc, 8),
        input_len=512,
        output_len=64,
        concurrency=conc,
        warmup_requests=warm,
        seed=seed,
        request_timeout_s=120,
        prompt_format="text",
        tokenizer=model,
        strict_openai=True,
        processes=1,
    )
    m = run_load_sync(cfg).metrics
    return {
        "tok_s": m.output_throughput,
        "mean_ttft_ms": m.mean_ttft_ms,
        "mean_tpot_ms": m.mean_tpot_ms,
        "dur": m.duration,
    }


def table(rows: list[dict[str, Any]], concs: list[int]) -> str:
    out = ["| warm-up | concurrency | launches | first pass tok/s | second pass tok/s | "
           "penalty per launch (first / second − 1) |", "|---|---:|---:|---|---|---|"]  # fmt: skip
    for variant in VARIANTS:
        for c in concs:
            by: dict[int, dict[int, float]] = {}
            for r in rows:
                if r["variant"] == variant and r["conc"] == c:
                    by.setdefault(r["launch"], {})[r["pass"]] = r["tok_s"]
            pairs = [(v[0], v[1]) for v in by.values() if 0 in v and 1 in v]
            if not pairs:
                continue
            pen = ", ".join(f"{100 * (a / b - 1):+.0f}%" for a, b in pairs)
            first = ", ".join(f"{a:.0f}" for a, _ in pairs)
            second = ", ".join(f"{b:.0f}" for _, b in pairs)
            out.append(f"| {variant} | {c} | {len(pairs)} | {first} | {second} | {pen} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", type=Path, default=Path("/tmp/out"))
    ap.add_argument("--conc", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--launches", type=int, default=4)
    ap.add_argument("--variants", nargs="+", default=["small", "wave"], choices=VARIANTS)
    ap.add_argument("--deadline-s", type=float, default=480, help="no launch starts after it")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    results = args.out / "warmup.jsonl"
    for launch in range(args.launches):
        if time.monotonic() - t0 > args.deadline_s:
            print(f"deadline: {launch} launches run", flush=True)
            break
        variant = args.variants[launch % len(args.variants)]
        # `full`, `pass`: the warm-up's outputs as long as the cell's (the client caps them)
        client.WARMUP_OUTPUT_LEN = 64 if variant in ("full", "pass") else CAPPED
        port = free_port()
        proc = start(args.model, port, args.out / "serve.log")
        try:
            for pas in (0, 1):
                for c in args.conc:
                    warm = {"small": 2, "pass": max(2 * c, 8)}.get(variant, c)
                    got = cell(port, args.model, c, warm, seed=launch)  # same prompts both passes
                    row: dict[str, Any] = {
                        "launch": launch, "variant": variant, "pass": pas, "conc": c,
                        "warmup_requests": warm, **got,
                    }  # fmt: skip
                    rows.append(row)
                    with results.open("a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
        finally:
            stop(proc)
    text = table(rows, args.conc)
    (args.out / "warmup.md").write_text(text + "\n")
    print(text)
    print(f"{len(rows)} cell runs in {time.monotonic() - t0:.0f} s")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())

"""Does a trace replay keep its schedule? Arrival lateness of the built-in client at 100 and
1,000 requests/s.

Writes a Mooncake-format trace (Poisson timestamps at the rate, 64-token prompts sharing one
512-token block id, 4 output tokens) and replays it (`workload.dataset: trace`) with the
built-in client against `tests/fixedserver.py` (a real HTTP server in its own process: TTFT
20 ms, 2 ms between tokens), the concurrency cap far above what is ever in flight, so a
request waits for nothing but its due time. Lateness is when the request was sent minus when
the trace says it was due (`RequestRecord.start` − the trace offset), per request: p50, p99 and
max, with the client's CPU share. One process (the 2-core machine's `processes: auto`).

    .venv/bin/python benchmarks/trace_replay.py [--seconds 5] [--rates 100 1000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from matrixrun.load import LoadConfig, run_load_sync
from matrixrun.load.datasets import Cell, DatasetConfig
from matrixrun.load.datasets.build import arrivals

ROOT = Path(__file__).resolve().parent.parent


def start_server() -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable, str(ROOT / "tests" / "fixedserver.py"), "--port", "0",
        "--ttft-ms", "20", "--itl-ms", "2", "--no-cumulative-text",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)  # noqa: S603 - fixed argv
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{proc.stdout.readline().split()[1]}"


def write_trace(path: Path, rate: float, n: int, seed: int = 0) -> None:
    gaps = np.random.default_rng(seed).exponential(1000.0 / rate, size=n - 1)
    stamps = np.concatenate([[0.0], np.cumsum(gaps)]) + 1_000_000
    rows = [
        {"timestamp": round(float(t), 3), "input_length": 64, "output_length": 4, "hash_ids": [7]}
        for t in stamps
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def replay(url: str, rate: float, seconds: float) -> dict[str, float]:
    n = int(rate * seconds)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        write_trace(trace, rate, n)
        ds = DatasetConfig(kind="trace", path=str(trace))
        cfg = LoadConfig(
            base_url=url, num_prompts=n, input_len=64, output_len=4, concurrency=4096,
            warmup_requests=8, request_timeout_s=60, dataset=ds, processes=1,
        )  # fmt: skip
        due = arrivals(ds, Cell(cfg.seed, n, 64, 4), cfg.request_rate)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        res = run_load_sync(cfg)
        cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    late = np.array([(r.start - due[r.index]) * 1e3 for r in res.records])
    return {
        "rate": rate, "requests": n, "failed": res.metrics.failed,
        "late_p50_ms": float(np.percentile(late, 50)),
        "late_p99_ms": float(np.percentile(late, 99)),
        "late_max_ms": float(late.max()), "client_cpu": cpu,
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rates", type=float, nargs="+", default=[100.0, 1000.0])
    args = p.parse_args()
    proc, url = start_server()
    try:
        print("rate req/s | requests | failed | lateness p50 / p99 / max ms | client CPU")
        for rate in args.rates:
            r = replay(url, rate, args.seconds)
            print(
                f"{r['rate']:>10g} | {r['requests']:>8.0f} | {r['failed']:>6.0f} | "
                f"{r['late_p50_ms']:.2f} / {r['late_p99_ms']:.2f} / {r['late_max_ms']:.2f} | "
                f"{r['client_cpu']:.2f}"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()

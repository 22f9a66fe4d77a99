"""How much does the load client itself distort what it measures, and where does it saturate?

Starts `tests/fixedserver.py` (a real HTTP server in its own process, timing known: TTFT and
inter-token latency fixed, lateness self-reported) and runs the client against it over a grid
of concurrency and event rates, once per transport. For each run it prints the measured
mean/p99 TTFT and ITL against the truth, output throughput against the ideal schedule, the
server's own mean lateness, and the client's CPU use (process time / wall time: near 1.0 means
the client is the bottleneck on its core). The last column, ev/cpu-s, is the client's capacity:
SSE events handled per second of client CPU.

    /work/venv/bin/python benchmarks/client_overhead.py [--quick] [--transport raw httpx]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from matrixrun.load import LoadConfig, run_load_sync

ROOT = Path(__file__).resolve().parent.parent
TTFT_MS = 50.0
OUTPUT_LEN = 64


def start_server(itl_ms: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable, str(ROOT / "tests" / "fixedserver.py"), "--port", "0",
        "--ttft-ms", str(TTFT_MS), "--itl-ms", str(itl_ms), "--no-cumulative-text",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)  # noqa: S603 - fixed argv
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    return proc, f"http://127.0.0.1:{line[1]}"


def get(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url) as r:
        data: dict[str, float] = json.loads(r.read())
        return data


def run_one(url: str, transport: str, conc: int, itl_ms: float) -> dict[str, float]:
    n = max(2 * conc, 32)
    get(url + "/reset")
    cfg = LoadConfig(
        base_url=url, num_prompts=n, input_len=128, output_len=OUTPUT_LEN,
        concurrency=conc, warmup_requests=min(conc, 32), transport=transport,
        request_timeout_s=120,
    )  # fmt: skip
    cpu0, wall0 = time.process_time(), time.perf_counter()
    res = run_load_sync(cfg)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    m = res.metrics
    server = get(url + "/stats")
    waves = math.ceil(n / conc)
    ideal_dur = waves * (TTFT_MS + (OUTPUT_LEN - 1) * itl_ms) / 1e3
    events = sum(len(r.chunk_times) + 1 for r in res.records) + cfg.warmup_requests * 33
    return {
        "transport": transport, "conc": conc, "itl_ms": itl_ms,
        "events_per_s": conc * 1e3 / itl_ms, "failed": m.failed,
        "ttft_err_ms": (m.mean_ttft_ms or 0) - TTFT_MS,
        "p99_ttft_err_ms": (m.p99_ttft_ms or 0) - TTFT_MS,
        "itl_err_ms": (m.mean_itl_ms or 0) - itl_ms,
        "p99_itl_err_ms": (m.p99_itl_ms or 0) - itl_ms,
        "tput_ratio": m.output_throughput / (n * OUTPUT_LEN / ideal_dur),
        "server_late_ms": server["late_mean_ms"],
        "client_cpu": cpu / wall, "ev_per_cpu_s": events / cpu,
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--transport", nargs="+", default=["raw", "httpx"])
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args()
    grid = [(1, 20.0), (16, 20.0), (64, 20.0), (256, 20.0), (256, 10.0), (512, 10.0),
            (1024, 20.0), (1024, 10.0)]  # fmt: skip
    if args.quick:
        grid = [(64, 20.0), (256, 10.0)]
    rows = []
    head = ("transport conc itl_ms ev/s failed ttft_err p99ttft_err itl_err p99itl_err "
            "tput_ratio srv_late cpu ev/cpu-s")  # fmt: skip
    print(head)
    for itl in sorted({i for _, i in grid}):
        proc, url = start_server(itl)
        try:
            for conc, itl_ms in grid:
                if itl_ms != itl:
                    continue
                for tr in args.transport:
                    r = run_one(url, tr, conc, itl_ms)
                    rows.append(r)
                    print(
                        f"{tr:6} {conc:5d} {itl_ms:5.1f} {r['events_per_s']:7.0f} "
                        f"{r['failed']:3.0f} {r['ttft_err_ms']:8.2f} {r['p99_ttft_err_ms']:8.2f} "
                        f"{r['itl_err_ms']:7.3f} {r['p99_itl_err_ms']:7.2f} "
                        f"{r['tput_ratio']:6.3f} {r['server_late_ms']:6.2f} "
                        f"{r['client_cpu']:5.2f} {r['ev_per_cpu_s']:8.0f}",
                        flush=True,
                    )
        finally:
            proc.terminate()
            proc.wait()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

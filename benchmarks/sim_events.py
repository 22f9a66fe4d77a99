"""How many SSE events per second the simulator sustains, and how late it writes them.

Starts `python -m matrixrun.sim` (flat-ish default profile), drives it with a minimal raw-asyncio
HTTP/1.1 client (keep-alive connections, chunked decoding, no JSON parsing, so the client is
as cheap as possible on a small shared machine), and reports per concurrency: events/s and
tokens/s achieved, the modelled event rate the profile asks for, the server's own write and
engine lateness (from /get_server_info after a /flush_cache), and both processes' CPU use.

    python benchmarks/sim_events.py                       # c = 64, 256, 1024; interval 4, 8
    python benchmarks/sim_events.py --concurrency 256 --stream-interval 4 --time-scale 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def http_get(port: int, path: str, method: str = "GET") -> bytes:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n".encode())
    head = await r.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    body = await r.readexactly(length)
    w.close()
    return body


class Counter:
    def __init__(self) -> None:
        self.events = 0
        self.requests = 0
        self.errors = 0


async def worker(port: int, body: bytes, t_end: float, counter: Counter) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    req = (
        b"POST /generate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(body)
    ) + body
    try:
        while time.monotonic() < t_end:
            w.write(req)
            head = await r.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                counter.errors += 1
                return
            while True:  # chunked body: each chunk is one server write of whole events
                size = int((await r.readuntil(b"\r\n"))[:-2], 16)
                data = await r.readexactly(size + 2)
                if size == 0:
                    break
                counter.events += data.count(b"\n\n")
            counter.events -= 1  # the [DONE] line is not a token event
            counter.requests += 1
    finally:
        w.close()


async def measure(port: int, concurrency: int, body: bytes, seconds: float) -> dict[str, Any]:
    await http_get(port, "/flush_cache", "POST")
    counter = Counter()
    t0 = time.monotonic()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    await asyncio.gather(*(worker(port, body, t0 + seconds, counter) for _ in range(concurrency)))
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    info = json.loads(await http_get(port, "/get_server_info"))
    client_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {
        "wall": wall,
        "events": counter.events,
        "requests": counter.requests,
        "errors": counter.errors,
        "client_cpu": client_cpu / wall,
        "stats": info["sim_stats"],
    }


def run_case(args: argparse.Namespace, concurrency: int, interval: int) -> str:
    port = free_port()
    cmd = [
        sys.executable, "-m", "matrixrun.sim", "--port", str(port),
        "--stream-interval", str(interval), "--time-scale", str(args.time_scale),
        "--max-running-requests", "4096",
    ]  # fmt: skip
    if args.profile:
        cmd += ["--profile", args.profile]
    proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, start_new_session=True)  # noqa: S603 (our own argv, no shell)
    try:
        assert proc.stderr is not None
        proc.stderr.readline()  # the "Uvicorn running on" line
        body = json.dumps(
            {
                "input_ids": list(range(1000, 1000 + args.input_len)),
                "sampling_params": {"max_new_tokens": args.output_len, "ignore_eos": True},
                "stream": True,
            }
        ).encode()
        cpu0 = proc_cpu_s(proc.pid)
        res = asyncio.run(measure(port, concurrency, body, args.seconds))
        server_cpu = (proc_cpu_s(proc.pid) - cpu0) / res["wall"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    st = res["stats"]
    wl, el = st["write_lateness_ms"], st["engine_lateness_ms"]
    ev_s = res["events"] / res["wall"]
    tok_s = st["tokens"] / res["wall"]
    return (
        f"| {concurrency:5d} | {interval:3d} | {ev_s:8.0f} | {tok_s:8.0f} | "
        f"{wl['mean_ms']:6.2f} | {wl['p50_ms']:6.2f} | {wl['p99_ms']:7.2f} | {wl['max_ms']:7.1f} | "
        f"{el['p50_ms']:.2f} / {el['p99_ms']:.2f} | {server_cpu:5.0%} | {res['client_cpu']:5.0%} | "
        f"{res['requests']:5d} | {res['errors']} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--stream-interval", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--time-scale", type=float, default=20.0)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--profile", help="profile file (default: the bundled default profile)")
    args = ap.parse_args()
    print(
        f"time_scale {args.time_scale:g}, input {args.input_len}, output {args.output_len}, "
        f"{args.seconds:g} s per case, {os.cpu_count()} CPUs, profile "
        f"{args.profile or 'default'}\n"
    )
    print(
        "| conc | int | events/s | tokens/s | late mean | p50 | p99 | max | engine p50/p99 | "
        "srv CPU | cli CPU | reqs | err |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in args.concurrency:
        for k in args.stream_interval:
            print(run_case(args, c, k), flush=True)


if __name__ == "__main__":
    main()

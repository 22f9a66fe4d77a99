"""Is the client ever silently the bottleneck? Its self-check against a ground-truth server.

Starts `tests/fixedserver.py` (a real streaming HTTP server whose timing is known: TTFT and
inter-token latency fixed, lateness self-reported) pinned to core 0, and runs `matrixrun
bench-client` as its own process under three conditions:

* quiet: the client alone on core 1;
* shared: the client on core 1 beside a process that spins on that core (another job
  competing for the CPU, as the engine's scheduler and tokenizer processes do on a GPU node);
* squeezed: the client on core 0, the server's core.

For each run it prints throughput against the exact best case (every request TTFT + (n − 1) ×
ITL, in waves of `concurrency`), median ITL and mean TTFT against the truth, the server's own
lateness, and what the client's self-check said (flagged or not, and the metrics it named).
The quiet rows are a regression benchmark: at concurrency 1024 and ITL 20 ms the targets are
≥ 95% of the best case, median ITL within 2%, mean TTFT < 100 ms; the script says whether
they hold. The self-check must flag the starved rows whose numbers are off and no quiet row.

    python benchmarks/client.py [--quick] [--write docs/benchmarks.md]   (nox -s bench-client)

Needs `taskset` (util-linux) and at least 2 cores; with fewer it runs unpinned and says so.
`sglang.bench_serving` and vLLM's client are run beside it only where importable (neither is
installed here).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TTFT_MS = 50.0
INPUT_LEN = OUTPUT_LEN = 128
WAVES = 4
MARK_START, MARK_END = "<!-- bench-client:start -->", "<!-- bench-client:end -->"


def pinned(core: int | None, argv: list[str]) -> list[str]:
    if core is None or shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        return argv
    return ["taskset", "-c", str(core), *argv]


@contextlib.contextmanager
def server(itl_ms: float) -> Iterator[str]:
    argv = [
        sys.executable, str(ROOT / "tests" / "fixedserver.py"), "--port", "0",
        "--ttft-ms", str(TTFT_MS), "--itl-ms", str(itl_ms), "--no-cumulative-text",
    ]  # fmt: skip
    proc = subprocess.Popen(pinned(0, argv), stdout=subprocess.PIPE, text=True)  # noqa: S603
    assert proc.stdout is not None
    port = proc.stdout.readline().split()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def spinner(core: int | None) -> Iterator[None]:
    """A process that keeps `core` busy (None: no competition)."""
    if core is None:
        yield
        return
    argv = [sys.executable, "-c", "while True: pass"]
    proc = subprocess.Popen(pinned(core, argv))  # noqa: S603 - fixed argv
    try:
        yield
    finally:
        proc.kill()
        proc.wait(10)


def get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


def bench(url: str, conc: int, core: int) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "matrixrun", "bench-client", "--url", url, "--api", "sglang",
        "--concurrency", str(conc), "--num-prompts", str(WAVES * conc),
        "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN),
        "--warmup-requests", str(min(conc, 32)), "--timeout", "300",
    ]  # fmt: skip
    done = subprocess.run(pinned(core, argv), capture_output=True, text=True, check=True)  # noqa: S603
    out: dict[str, Any] = json.loads(done.stdout)
    out["stderr"] = done.stderr.strip()
    return out


CONDITIONS = {"quiet": (1, None), "shared": (1, 1), "squeezed": (0, None)}


def errors(m: dict[str, Any], itl_ms: float, lateness_ms: float) -> dict[str, float]:
    """(Measured − truth − the server's own lateness) / truth for the metrics whose truth the
    server fixes: what is left is the client's share of the error."""
    truth = {"median_itl_ms": itl_ms, "p99_itl_ms": itl_ms, "mean_tpot_ms": itl_ms}
    truth["mean_ttft_ms"] = TTFT_MS
    late = {"mean_ttft_ms": lateness_ms}
    return {
        k: (m[k] - late.get(k, 0.0)) / v - 1
        for k, v in truth.items()
        if v > 0 and m.get(k) is not None
    }


def judged(m: dict[str, Any], itl_ms: float, lateness_ms: float) -> str:
    """Which metrics were off by more than 10% of the truth beyond the server's lateness, and
    did the self-check name them?"""
    affected = m.get("client_check", {}).get("affected", {})
    off = {k: e for k, e in errors(m, itl_ms, lateness_ms).items() if abs(e) > 0.10}
    missed = sorted(k for k in off if k not in affected)
    named = [f"{k} {e:+.0%}" for k, e in sorted(off.items())]
    if not off:
        return "none"
    return ", ".join(named) + (f" (**missed**: {', '.join(missed)})" if missed else " (named)")


def row(cond: str, conc: int, itl_ms: float, m: dict[str, Any], lateness: float) -> str:
    best = WAVES * conc * OUTPUT_LEN / (WAVES * (TTFT_MS + (OUTPUT_LEN - 1) * itl_ms) / 1e3)
    check = m.get("client_check", {})
    named = sorted(check.get("affected", {}))
    flag = "**flagged**: " + ", ".join(named[:4]) + ("…" if len(named) > 4 else "")
    vs_best = f"{m['output_throughput'] / best:.1%}" if itl_ms > 0 else "–"
    return (
        f"| {cond} | {conc} | {itl_ms:g} | {vs_best} | "
        f"{m['median_itl_ms']:.2f} | {m['p99_itl_ms']:.1f} | {m['mean_ttft_ms']:.0f} | "
        f"{lateness:.1f} | {check.get('lag_p99_ms', float('nan')):.1f} | "
        f"{check.get('coalesced_share', 0):.1%} | {check.get('cpu', 0):.2f} | "
        f"{flag if check.get('client_bound') else 'no'} | {judged(m, itl_ms, lateness)} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="concurrency 64 and 256 only")
    p.add_argument("--write", type=Path, help="replace the table between the markers in FILE")
    args = p.parse_args()
    concs = [64, 256] if args.quick else [64, 256, 1024]
    lines = [
        f"machine: {os.cpu_count()} cores; server pinned to core 0"
        + ("" if shutil.which("taskset") else " (taskset missing: unpinned)"),
        "",
        "| condition | concurrency | ITL (ms) | throughput vs best case | median ITL (ms) | "
        "p99 ITL (ms) | mean TTFT (ms, truth 50) | server lateness (ms) | client lag p99 (ms) "
        "| gaps read together | client CPU | self-check | client's error > 10% of the truth |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    targets: list[str] = []
    for itl_ms in (20.0, 0.0):
        with server(itl_ms) as url:
            for cond, (core, spin) in CONDITIONS.items():
                for conc in concs:
                    with spinner(spin):
                        get(url + "/reset")
                        m = bench(url, conc, core)
                        late = float(get(url + "/stats").get("late_mean_ms", 0.0))
                    lines.append(row(cond, conc, itl_ms, m, late))
                    print(lines[-1], flush=True)
                    if cond == "quiet" and conc == 1024 and itl_ms == 20.0:
                        best = WAVES * 1024 * OUTPUT_LEN / (WAVES * (TTFT_MS + 127 * itl_ms) / 1e3)
                        targets.append(
                            f"quiet 1024 targets: throughput {m['output_throughput'] / best:.1%} "
                            f"(≥ 95%), median ITL {m['median_itl_ms']:.2f} ms (20 ± 2%), "
                            f"TTFT {m['mean_ttft_ms']:.0f} ms (< 100)"
                        )
    text = "\n".join([*lines, "", *targets])
    print(text)
    if args.write:
        doc = args.write.read_text()
        head, _, rest = doc.partition(MARK_START)
        _, _, tail = rest.partition(MARK_END)
        args.write.write_text(f"{head}{MARK_START}\n{text}\n{MARK_END}{tail}")


if __name__ == "__main__":
    main()

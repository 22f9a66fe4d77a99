"""Soak: a small matrix run many times under random faults, checking the invariants each time.

Every scenario runs the real CLI (`python -m matrixrun run … --rehearse`: simulator servers as
real subprocesses, the real load client, the real run directory) with one server fault and/or
one fault of the runner itself, then resumes until the run completes, and checks:

- **nothing lost or duplicated**: every measurement on disk before a resume is still there, in
  order, after it (only a torn last line may go, and its run is measured again); each cell
  has exactly one first measurement and its attempts are 1..n without a gap or a repeat;
- **no process left**: no process carrying the scenario's tag (an environment variable the
  runner passes on to its servers) is alive after the last run, read from /proc;
- **every failure explained**: the report exists, its Failures table has one row per failed
  measurement (naming its server instance), and each partial failure is listed;
- **no traceback** on stderr, and exit codes from {0, 1, 2, 130} (-9 for the SIGKILL itself).

Faults: server crash, hang, HTTP 5xx, malformed SSE, never healthy (server side, through the
simulator's `effects`), SIGKILL of the runner at a random moment, Ctrl-C (SIGINT), a torn
write (half a record appended to results.jsonl), a full disk (RLIMIT_FSIZE on the runner,
inherited by its servers as a shared disk would be: writes past the limit fail with EFBIG).

    python benchmarks/faults.py --runs 30 --seed 1 [--write docs/reliability.md]

Not part of the test suite (minutes); `nox -s soak` runs it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from matrixrun.core.measurement import Measurement  # noqa: E402

TINY = (REPO / "tests" / "specs" / "tiny.yaml").read_text()
SERVER_FAULTS = ["none", "crash", "hang", "5xx", "malformed", "never_healthy"]
RUNNER_FAULTS = ["none", "sigkill", "sigint", "torn", "disk_full"]
TAG = "MATRIXRUN_SOAK_TAG"
BEGIN, END = "<!-- soak:begin -->", "<!-- soak:end -->"


def spec_text(server_fault: str, rng: random.Random) -> str:
    """The tiny spec with one server fault (the simulator's effects) and tight limits, so a
    hang or a server that never becomes healthy costs seconds, not the defaults' minutes."""
    effects = {
        "none": "",
        "crash": f"crash_after_s: {rng.uniform(0.5, 4):.2f}",
        "hang": f"hang_after_s: {rng.uniform(0.3, 3):.2f}",
        "5xx": f"error_rate: {rng.choice([0.05, 0.3, 1.0])}",
        "malformed": f"malformed_rate: {rng.choice([0.05, 0.2, 1.0])}",
        "never_healthy": "slow_start_s: 1000",
    }[server_fault]
    text = TINY.replace(
        "limits: {startup_timeout: 60s, cell_timeout: 60s, request_timeout: 30s}",
        "limits: {startup_timeout: 8s, cell_timeout: 20s, request_timeout: 6s}",
    )
    if effects:
        text = text.replace("    rules:", f"    effects: {{{effects}}}\n    rules:")
    return text


@dataclass
class Step:
    argv: list[str]
    code: int
    stderr: str
    seconds: float


@dataclass
class Scenario:
    server_fault: str
    runner_fault: str
    #: Whether the runner fault happened while the run was still going (a signal sent
    #: after the run ended, or a file limit never reached, tests nothing).
    bit: bool = False
    steps: list[Step] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    measurements: int = 0
    failed: int = 0


def _run(
    argv: list[str],
    env: dict[str, str],
    *,
    signal_after: tuple[signal.Signals, float] | None = None,
    fsize: int | None = None,
    timeout: float = 300,
) -> Step:
    def limit() -> None:
        # a soak started in the background (nohup, `&`) inherits SIGINT ignored, and Python
        # then installs no KeyboardInterrupt handler: Ctrl-C must reach the runner as a user's
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    t0 = time.monotonic()
    proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
        [sys.executable, "-m", "matrixrun", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
    )
    if signal_after is not None:
        sig, after = signal_after
        try:
            proc.wait(after)
        except subprocess.TimeoutExpired:
            proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        err += "\n[soak: the step ran past its timeout and was killed]"
    return Step(argv, proc.returncode, err, time.monotonic() - t0)


def _lines(run_dir: Path) -> list[Measurement]:
    path = run_dir / "results.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(Measurement.model_validate_json(line))
        except ValueError:
            continue  # a torn line: not a measurement (the runner cuts it)
    return out


def _tagged(tag: str) -> list[int]:
    """Live processes whose environment carries `tag` (the runner's servers inherit it)."""
    found = []
    needle = f"{TAG}={tag}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes():
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(proc.name))
        except OSError:
            continue
    return found


def scenario(number: int, rng: random.Random, root: Path) -> Scenario:
    server_fault, runner_fault = rng.choice(SERVER_FAULTS), rng.choice(RUNNER_FAULTS)
    s = Scenario(server_fault, runner_fault)
    work = root / f"s{number:03d}"
    work.mkdir()
    spec = work / "spec.yaml"
    spec.write_text(spec_text(server_fault, rng))
    run_dir, report = work / "run", work / "report.md"
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG: tag, "PYTHONUNBUFFERED": "1"}
    base = ["run", str(spec), "--rehearse", "--report", str(report)]

    first: Step
    if runner_fault in ("sigkill", "sigint"):
        sig = signal.SIGKILL if runner_fault == "sigkill" else signal.SIGINT
        first = _run([*base, "--out", str(run_dir)], env, signal_after=(sig, rng.uniform(0.3, 3.5)))
    elif runner_fault == "disk_full":
        first = _run([*base, "--out", str(run_dir)], env, fsize=rng.randint(2_000, 20_000))
    else:
        first = _run([*base, "--out", str(run_dir)], env)
    s.steps.append(first)
    s.bit = {
        "sigkill": first.code == -9,
        "sigint": first.code == 130,
        "disk_full": "File too large" in first.stderr,
    }.get(runner_fault, runner_fault == "torn")
    torn: tuple[str, int] | None = None
    results = run_dir / "results.jsonl"
    if runner_fault == "torn" and results.exists() and results.read_bytes().strip():
        # what a crash mid-write leaves: the last record cut short, without its newline
        data = results.read_bytes().rstrip(b"\n")
        start = data.rfind(b"\n") + 1
        last = Measurement.model_validate_json(data[start:])
        torn = (last.cell_id, last.attempt)
        results.write_bytes(data[: start + rng.randint(1, len(data) - start - 1)])

    # resume until the run completes (a run that finished is resumed once more: it must
    # measure nothing it already has, and re-measure a torn record)
    for _ in range(3):
        if not (run_dir / "plan.json").exists():
            s.steps.append(_run([*base, "--out", str(run_dir)], env))
        else:
            before = _lines(run_dir)
            step = _run([*base, "--resume", str(run_dir)], env)
            s.steps.append(step)
            after = _lines(run_dir)
            if [m.model_dump() for m in after[: len(before)]] != [m.model_dump() for m in before]:
                s.violations.append("lost: a measurement on disk before a resume is gone")
        if s.steps[-1].code in (0, 1):
            break
    time.sleep(0.3)
    _check(s, run_dir, report, tag)
    if torn is not None and torn not in {(m.cell_id, m.attempt) for m in _lines(run_dir)}:
        s.violations.append(
            f"the torn record (cell {torn[0]}, attempt {torn[1]}) was not re-measured"
        )
    (work / "steps.json").write_text(
        json.dumps([st.__dict__ for st in s.steps] + [{"violations": s.violations}], indent=1)
    )
    return s


def _check(s: Scenario, run_dir: Path, report: Path, tag: str) -> None:
    ms = _lines(run_dir)
    s.measurements, s.failed = len(ms), sum(1 for m in ms if not m.ok)
    plan = (
        json.loads((run_dir / "plan.json").read_text())
        if (run_dir / "plan.json").exists()
        else None
    )
    if plan is not None:
        cells = [c["cell_id"] for g in plan["groups"] for c in g["cells"]]
        firsts = collections.Counter(m.cell_id for m in ms if m.reason == "first")
        if any(firsts[c] != 1 for c in cells):
            s.violations.append(
                f"first measurements per cell: {dict(firsts)} for {len(cells)} cells"
            )
    attempts: dict[str, list[int]] = collections.defaultdict(list)
    for m in ms:
        attempts[m.cell_id].append(m.attempt)
    for cell, seen in attempts.items():
        if seen != list(range(1, len(seen) + 1)):
            s.violations.append(f"duplicated or missing attempts of cell {cell}: {seen}")
    left = _tagged(tag)
    if left:
        s.violations.append(f"processes left running: {left}")
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    for step in s.steps:
        if "Traceback" in step.stderr:
            s.violations.append(f"traceback in `{' '.join(step.argv[:2])}`: {step.stderr[-400:]}")
        if step.code not in (0, 1, 2, 130, -9):
            s.violations.append(f"exit code {step.code}")
    final = s.steps[-1]
    if final.code not in (0, 1):
        s.violations.append(
            f"the run never completed (last exit {final.code}: {final.stderr[-300:]})"
        )
        return
    text = report.read_text() if report.exists() else ""
    if not text:
        s.violations.append("no report")
        return
    failures = text.split("## Failures", 1)[-1].split("\n## ", 1)[0]
    rows = [line for line in failures.splitlines() if line.startswith("| ") and "---" not in line]
    failed = [m for m in ms if not m.ok]
    if len(rows) - (1 if rows else 0) != len(failed):
        s.violations.append(
            f"Failures table has {max(len(rows) - 1, 0)} rows for {len(failed)} failed"
        )
    for m in failed:
        if f"`{m.instance}`" not in failures:
            s.violations.append(f"failed measurement on {m.instance} not in the Failures table")
    for m in ms:
        if m.ok and m.metrics is not None and m.metrics.failed:
            needle = f"attempt {m.attempt}: {m.metrics.failed} of"
            if needle not in failures:
                s.violations.append(f"partial failure of {m.cell_id} attempt {m.attempt} unlisted")


def table(results: list[Scenario], seconds: float, seed: int) -> str:
    kinds = collections.Counter[str]()
    bad = collections.Counter[str]()
    bit = collections.Counter[str]()
    for r in results:
        for kind in (f"server: {r.server_fault}", f"runner: {r.runner_fault}"):
            kinds[kind] += 1
            bad[kind] += bool(r.violations)
        bit[f"runner: {r.runner_fault}"] += r.bit
    codes = collections.Counter(str(st.code) for r in results for st in r.steps)
    lines = [
        BEGIN,
        f"Soak of {len(results)} scenarios (seed {seed}, {seconds / 60:.1f} min, "
        f"{sum(len(r.steps) for r in results)} CLI runs, "
        f"{sum(r.measurements for r in results)} measurements of which "
        f"{sum(r.failed for r in results)} failed): "
        f"**{sum(bool(r.violations) for r in results)} scenarios broke an invariant**.",
        "",
        "| fault | scenarios | of which the runner fault struck mid-run | broke an invariant |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {k} | {kinds[k]} | "
        f"{bit[k] if k.startswith('runner: ') and not k.endswith('none') else ''} | {bad[k]} |"
        for k in sorted(kinds)
    ]
    lines += ["", "Exit codes of every CLI run: " + ", ".join(
        f"{c}: {n}" for c, n in sorted(codes.items(), key=lambda kv: int(kv[0]))
    ) + " (-9 is the SIGKILL itself, 130 a Ctrl-C).", END]  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--write", metavar="MD", help="replace the soak block of this file")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="matrixrun-soak-"))
    t0 = time.monotonic()
    results = []
    for i in range(args.runs):
        r = scenario(i, rng, root)
        results.append(r)
        status = "ok" if not r.violations else "BROKE: " + "; ".join(r.violations)
        codes = ",".join(str(st.code) for st in r.steps)
        print(f"{i:3d} {r.server_fault:>13} + {r.runner_fault:<9} exits {codes:<10} {status}",
              flush=True)  # fmt: skip
    block = table(results, time.monotonic() - t0, args.seed)
    print(block)
    if args.write:
        doc = Path(args.write)
        text = doc.read_text()
        doc.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text,
                              flags=re.S))  # fmt: skip
    if not args.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"run directories kept under {root}")
    return 1 if any(r.violations for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())

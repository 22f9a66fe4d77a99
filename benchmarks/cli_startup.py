"""What a whole `matrixrun` command costs, Python start included: `--version`, `validate`, and
`history --arm cand7 --check` on a 10,000-run store (issue 32: `history` under a second).

Why: the store answers in well under a second (benchmarks/store.py), but a user waits for the
whole command, and the CLI's start-up (building the parser, importing what a command needs) was
most of it. Each command runs `--repeat` times under `/usr/bin/time`; the best wall time and the
best CPU time (user + system) are reported, with the load average before and after (the machine
is shared: wall time on a busy one is mostly waiting, CPU time is the command's own).

    python benchmarks/store.py --runs 10000 --store /tmp/store.sqlite   # fill a store first
    python benchmarks/cli_startup.py --store /tmp/store.sqlite
    git archive COMMIT matrixrun | tar -x -C /tmp/old                    # an earlier version
    python benchmarks/cli_startup.py --store /tmp/store.sqlite --checkout /tmp/old

With `--checkout DIR` the package is imported from DIR instead of this checkout (the editable
install's finder is set aside), through the same few lines the console script runs, so two
versions are timed on the same machine minutes apart.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The console script's body, importing matrixrun from sys.argv[1] rather than the install.
FROM_CHECKOUT = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
sys.path.insert(0, sys.argv.pop(1))
from matrixrun.cli.main import main
sys.argv[0] = "matrixrun"
raise SystemExit(main())
"""


def timed(argv: list[str], repeat: int) -> tuple[float, float, int]:
    """(best wall, best CPU, exit code) of `repeat` runs of argv under /usr/bin/time."""
    walls, cpus, code = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "time"
        for _ in range(repeat):
            proc = subprocess.run(  # noqa: S603 - fixed argv, no shell
                ["/usr/bin/time", "-o", str(out), "-f", "%e %U %S", *argv],
                capture_output=True,
                check=False,
                cwd=ROOT,
            )
            code = proc.returncode
            wall, user, system = map(float, out.read_text().split()[-3:])
            walls.append(wall)
            cpus.append(user + system)
    return min(walls), min(cpus), code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a filled store (benchmarks/store.py)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--checkout", metavar="DIR", help="time the matrixrun package under DIR")
    args = ap.parse_args()
    if args.checkout:
        exe = [sys.executable, "-c", FROM_CHECKOUT, str(Path(args.checkout).resolve())]
    else:
        exe = [shutil.which("matrixrun", path=str(Path(sys.executable).parent)) or "matrixrun"]
    commands = {
        "matrixrun --version": [*exe, "--version"],
        "matrixrun validate spec/glm5_cutedsl.yaml": [*exe, "validate", "spec/glm5_cutedsl.yaml"],
        "matrixrun history --arm cand7 --check (10,000 runs)": [
            *exe, "history", "--store", args.store, "--arm", "cand7", "--check",
        ],
    }  # fmt: skip
    print(f"matrixrun from {args.checkout or 'this checkout'}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"| command (best of {args.repeat}) | wall | CPU | exit |")
    print("|---|---:|---:|---:|")
    for name, argv in commands.items():
        wall, cpu, code = timed(argv, args.repeat)
        print(f"| `{name}` | {wall:.2f} s | {cpu:.2f} s | {code} |")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

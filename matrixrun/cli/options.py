"""The options of each `matrixrun` command (argparse declarations only; `cli.py` runs them).

Kept apart from the command functions so that each file stays one concept: what a command
accepts here, what it does there.
"""

from __future__ import annotations

import argparse


def add_validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC", help="spec files to check")


def add_plan(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--markdown",
        action="store_true",
        help="print the proposal comment: hypothesis, differing flags, command lines, matrix, "
        "cost, validation (exit 2 when the spec is invalid, after printing it)",
    )
    add_history(p)


def add_history(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--history",
        action="append",
        metavar="DIR",
        help="estimate times from earlier run directories under DIR with the same engine, "
        "model and hardware (repeatable)",
    )


def add_schema(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        "-o",
        "--output",
        default="spec/schema.json",
        help="where to write (spec/schema.json)",
    )
    p.add_argument("--check", action="store_true", help="exit 1 if the file is stale")


def add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC")
    p.add_argument(
        "--rehearse",
        action="store_true",
        help="run on the built-in simulator (reports say SIMULATED)",
    )
    p.add_argument(
        "--out",
        "-o",
        "--output",
        metavar="RUN_DIR",
        help="run directory (default runs/<stem>/<time>)",
    )
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run: skip what is measured")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --resume: measure again, once, the cells whose every attempt failed (a "
        "crash, an OOM, a harness bug fixed since); their failed attempts are kept",
    )
    p.add_argument(
        "--report",
        metavar="FILE",
        help="where to copy the report (default reports/<stem>.md; a rehearsal's "
        "runs/<stem>.rehearsal.md, which git ignores)",
    )
    p.add_argument(
        "--ignore-hardware",
        action="store_true",
        help="run even if nvidia-smi does not match the spec's hardware (recorded)",
    )
    p.add_argument(
        "--executor",
        default="local",
        choices=["local", "slurm"],
        help="where server groups run: here one after another (local), or as Slurm jobs "
        "(slurm; needs matrixrun[slurm] and a run directory on a shared file system)",
    )
    p.add_argument("--partition", metavar="P", help="Slurm partition for the jobs")
    p.add_argument(
        "--max-parallel", type=int, metavar="N", help="at most N Slurm jobs queued or running"
    )
    p.add_argument(
        "--slurm-arg",
        action="append",
        metavar="KEY=VALUE",
        help="another sbatch option for every job (repeatable), e.g. account=lab",
    )


def add_analyse(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR")


def add_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument(
        "-o",
        "--output",
        "--out",
        dest="output",
        metavar="FILE",
        help="write here (default RUN_DIR/report.md; - for stdout)",
    )
    p.add_argument("--templates", metavar="DIR", help="override templates from this directory")
    add_fail_on(p)


def add_fail_on(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-on",
        default="never",
        metavar="VERDICTS",
        help="exit 1 when a candidate's overall verdict is one of these (e.g. worse, "
        "worse,mixed or worse,mixed,undecided; default never); worse also fails a candidate "
        "with any worse cell (a mixed one); checked before anything is written",
    )


def add_compare(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a", metavar="RUN_A", help="the run to compare against (baseline)")
    p.add_argument("run_b", metavar="RUN_B", help="the run judged; arms matched by name")
    p.add_argument(
        "--out", "-o", "--output", required=True, metavar="RUN_DIR", help="run directory to write"
    )
    p.add_argument(
        "--labels", nargs=2, metavar=("A", "B"), help="names of the two runs (default: dir names)"
    )
    add_fail_on(p)


def add_ingest(p: argparse.ArgumentParser) -> None:
    from matrixrun.ingest.formats.run import FORMATS

    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="result files or folders: sglang.bench_serving JSONL, vllm bench serve JSON, a vllm "
        "bench sweep directory, guidellm JSON, aiperf exports (genai_bench run files are "
        "recognised and refused: their throughputs are not bench_serving's); see docs/ingest.md",
    )
    p.add_argument("--baseline", required=True, metavar="ARM", help="the baseline arm")
    p.add_argument(
        "--out", "-o", "--output", required=True, metavar="RUN_DIR", help="run directory to write"
    )
    p.add_argument("--threshold", default="3%", help="practical margin (default 3%%)")
    p.add_argument(
        "--noise",
        metavar="PCT",
        help="declared run-to-run spread (e.g. 2%%), used where nothing is measured",
    )
    p.add_argument(
        "--arm-field",
        default="tag",
        help="line field naming the arm (default tag, else the file name)",
    )
    p.add_argument(
        "--axis-field",
        default="max_concurrency",
        help="line field giving the sweep point (default max_concurrency)",
    )
    p.add_argument(
        "--point-field",
        action="append",
        metavar="FIELD",
        help="a further line field that tells sweep points apart (repeatable)",
    )
    p.add_argument(
        "--servers",
        choices=["same", "fresh", "per-file"],
        default=None,
        help="where repeated lines ran: same (one server per arm, repeats are warm reruns; "
        "the default), fresh (each repeat on a freshly launched server), per-file (each file "
        "is one server launch: how sweeps are run by hand)",
    )
    p.add_argument(
        "--fresh-server",
        action="store_true",
        help="the same as --servers fresh",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        help="read every input as this format (default: detect each one)",
    )
    p.add_argument(
        "--mix-formats",
        action="store_true",
        help="compare files of different clients anyway (metrics they define differently "
        "are left out)",
    )
    p.add_argument(
        "--sweep-serve",
        choices=("arms", "launches"),
        default="arms",
        help="vllm bench sweep: serve combinations are arms (default) or launches of one arm",
    )
    p.add_argument(
        "--metrics",
        metavar="PRIMARY[,SECONDARY...]",
        help="the metric the verdict is on, then the secondary ones, comma-separated "
        "(default output_throughput,median_ttft_ms,median_tpot_ms,median_itl_ms; any of "
        "mean/median/std/p90/p95/p99 _ttft_ms, _tpot_ms, _itl_ms, _e2e_latency_ms, or a "
        "throughput)",
    )
    p.add_argument(
        "--allow-difference",
        action="append",
        choices=("model", "gpu", "dataset", "client-version"),
        metavar="FIELD",
        help="compare runs that differ in this (model, gpu, dataset, client-version) anyway; "
        "the report says so in its first lines (repeatable)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what was understood (arms, points, repeats, servers) and write nothing",
    )


def add_post(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help="post its verdict (report.md)")
    p.add_argument("--plan", metavar="SPEC", help="post the proposal of SPEC instead")
    add_history(p)
    p.add_argument("--repo", required=True, metavar="OWNER/NAME")
    p.add_argument("--pr", required=True, type=int, metavar="N", help="pull request number")
    p.add_argument(
        "--experiment",
        help="comment key (default: the spec's experiment; for an ingested run its arms)",
    )
    p.add_argument(
        "--token-env",
        default="GITHUB_TOKEN",
        help="environment variable holding the token (default GITHUB_TOKEN)",
    )
    p.add_argument(
        "--api-url",
        metavar="URL",
        help="API root (default $GITHUB_API_URL, else https://api.github.com)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the request instead of sending it (the token is never printed)",
    )
    p.add_argument(
        "--fail-on",
        default="never",
        metavar="VERDICTS",
        help="exit 1 after posting when a candidate's overall verdict is one of these "
        "(e.g. worse, or worse,mixed; default never); worse also fails a candidate with any "
        "worse cell",
    )


def add_bench_client(p: argparse.ArgumentParser) -> None:
    from matrixrun.load.command import add_arguments

    add_arguments(p)

"""The options of each `matrixrun` command (argparse declarations only; `cli/commands/` runs
them).

Kept apart from the command functions so that each file stays one concept: what a command
accepts here, what it does there. And kept light: building the parser (`matrixrun --version`,
`--help`, and every command's start) imports this module and argparse only. So the few lists
of choices that live with the code that reads them (ingest's formats and the identity fields
it compares, vllm sweep's serve modes, the executors) are written here as plain data;
tests/test_cli_startup.py asserts each equals the list it mirrors.
"""

from __future__ import annotations

import argparse
import math

#: `ingest --format`: matrixrun.ingest.formats.run.FORMATS, in its order, each with the client
#: that writes it (matrixrun.ingest.formats.CLIENT) and what ingest takes. `ingest --help`
#: (its one-line description and its FILE help) is built from this table, so the help cannot
#: leave out a format the code reads, nor name one it does not (it once named four clients
#: when ingest read seven).
INGEST_FORMATS: dict[str, tuple[str, str]] = {
    "bench_serving": ("sglang.bench_serving", "sglang.bench_serving JSONL"),
    "vllm": ("vLLM", "vllm bench serve or benchmark_serving.py --save-result JSON (v0.8 "
             "layout on)"),
    "vllm_sweep": ("vLLM", "a vllm bench sweep serve directory"),
    "vllm_table": ("vLLM", "vLLM's nightly benchmark_results.json"),
    "guidellm": ("guidellm", "guidellm JSON report"),
    "aiperf": ("aiperf", "aiperf profile_export_aiperf.json or its artifact directory"),
    "genai_bench": ("genai-bench", "genai-bench run files or experiment folder"),
    "inference_perf": ("inference-perf", "inference-perf stage_N_lifecycle_metrics.json or "
                       "its results folder"),
    "llmperf": ("llmperf", "llmperf *_summary.json or *_individual_responses.json"),
}  # fmt: skip
#: Formats ingest recognises and refuses, with why (ingest/formats/genai_bench.py says more).
INGEST_REFUSED = {"genai_bench": "its throughputs are not bench_serving's"}


def ingest_description() -> str:
    """`ingest`'s one line: the clients whose files it reads, and those it refuses."""
    read = dict.fromkeys(c for f, (c, _) in INGEST_FORMATS.items() if f not in INGEST_REFUSED)
    refused = dict.fromkeys(INGEST_FORMATS[f][0] for f in INGEST_REFUSED)
    *most, last = read
    return (
        f"build a run directory from the result files of {', '.join(most)} or {last} "
        f"({', '.join(refused)} files are recognised and refused)"
    )


def _ingest_files_help() -> str:
    """`ingest FILE`'s help: every format, as --format names it."""
    kinds = [
        f"{what} [{fmt}]" + (f" (recognised and refused: {INGEST_REFUSED[fmt]})"
                             if fmt in INGEST_REFUSED else "")
        for fmt, (_, what) in INGEST_FORMATS.items()
    ]  # fmt: skip
    return (
        "result files or folders, each one's format detected from its content (--format "
        f"names one for all): {'; '.join(kinds)}; see docs/ingest.md"
    )


#: `ingest --allow-difference`: matrixrun.ingest.formats.checks.IDENTITY.
IDENTITY_FIELDS = ("model", "gpu", "dataset", "client-version")
#: `ingest --sweep-serve`: matrixrun.ingest.formats.vllm_sweep.SweepServe.
SWEEP_SERVE = ("arms", "launches")
#: `run --executor`: matrixrun.run.executors.EXECUTORS.
EXECUTORS = ("local", "slurm")


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
        choices=EXECUTORS,
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
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help=_ingest_files_help(),
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
    _add_ingest_mapping(p)
    _add_ingest_formats(p)
    p.add_argument(
        "--metrics",
        metavar="PRIMARY[,SECONDARY...]",
        help="the metric the verdict is on, then the secondary ones, comma-separated "
        "(default output_throughput,median_ttft_ms,median_tpot_ms,median_itl_ms; any of "
        "mean/median/std/p90/p95/p99 _ttft_ms, _tpot_ms, _itl_ms, _e2e_latency_ms, or a "
        "throughput)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what was understood (arms, points, repeats, servers) and write nothing",
    )


def _add_ingest_mapping(p: argparse.ArgumentParser) -> None:
    """How result lines become arms, sweep points and repeats, and where the repeats ran."""
    p.add_argument(
        "--arm-field",
        default="tag",
        help="run field naming the arm (default tag; else each format's own: vLLM's label, "
        "the file or folder name; see docs/ingest.md)",
    )
    p.add_argument(
        "--axis-field",
        default="max_concurrency",
        help="run field giving the sweep point (default max_concurrency; where no run has one, "
        "the one of request_rate, random_input_len, random_output_len that varies)",
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


def _add_ingest_formats(p: argparse.ArgumentParser) -> None:
    """Which reader reads the files, and which differences between them are allowed."""
    p.add_argument(
        "--format",
        choices=tuple(INGEST_FORMATS),
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
        choices=SWEEP_SERVE,
        default="arms",
        help="vllm bench sweep: serve combinations are arms (default) or launches of one arm",
    )
    p.add_argument(
        "--allow-difference",
        action="append",
        choices=IDENTITY_FIELDS,
        metavar="FIELD",
        help="compare runs that differ in this (model, gpu, dataset, client-version) anyway; "
        "the report says so in its first lines (repeatable)",
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


def add_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        metavar="PATH_OR_URL",
        help="the results store: a SQLite file or postgresql://… (default: $MATRIXRUN_STORE, "
        "else $XDG_DATA_HOME/matrixrun/store.sqlite; `off` turns it off)",
    )


def add_history_command(p: argparse.ArgumentParser) -> None:
    add_store_option(p)
    p.add_argument("--engine", help="only runs of this engine kind (sglang, vllm, command …)")
    p.add_argument("--model", help="only arms whose model path contains this")
    p.add_argument("--gpu", help="only arms whose GPU name contains this")
    p.add_argument("--flag", help="only arms that set this server flag")
    p.add_argument(
        "--arm", help="only this arm; also its primary metric across engine versions (a chart)"
    )
    p.add_argument("--metric", help="with --arm: the metric (default: the runs' primary)")
    p.add_argument("--at", type=float, metavar="X", help="with --arm: the point to chart")
    p.add_argument("--simulated", action="store_true", help="simulated runs instead of real")
    p.add_argument("--limit", type=int, default=20, help="runs listed (default 20)")
    p.add_argument(
        "--spec", metavar="SPEC", help="has each arm of SPEC been measured before, and where"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="with --arm: exit 1 if the newest engine version regressed against the one before",
    )
    p.add_argument(
        "--threshold", default="5%", help="--check: the smallest regression that counts (5%%)"
    )
    p.add_argument("--alpha", type=float, default=0.05, help="--check: the test's α (0.05)")


def add_store_command(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    rebuild = sub.add_parser(
        "rebuild",
        help="index run directories (and every run directory under a folder) into the store",
    )
    rebuild.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    rebuild.add_argument(
        "--fresh", action="store_true", help="empty the store first (else runs are replaced)"
    )
    add_store_option(rebuild)
    status = sub.add_parser("status", help="where the store is, its schema version and size")
    add_store_option(status)


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'inf', got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (or inf), got {text}")
    return value


def _processes(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or 'auto', got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (or auto), got {text}")
    return value


def _warmup(text: str) -> int | str:
    if text == "cell":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number or 'cell', got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0 (or cell), got {text}")
    return value


def add_bench_client(parser: argparse.ArgumentParser) -> None:
    """Declare bench-client's options (names follow bench_serving's where they overlap)."""
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument(
        "--api",
        choices=("sglang", "openai"),
        default="sglang",
        help="sglang: native POST /generate; openai: POST /v1/completions (default: sglang)",
    )
    parser.add_argument("--concurrency", type=int, required=True, help="most requests in flight")
    parser.add_argument("--num-prompts", type=int, required=True, help="measured requests")
    parser.add_argument("--input-len", type=int, required=True, help="prompt tokens per request")
    parser.add_argument("--output-len", type=int, required=True, help="output tokens per request")
    parser.add_argument(
        "--request-rate",
        type=_rate,
        default=math.inf,
        help="Poisson arrival rate in requests/s (default: inf, all at once)",
    )
    parser.add_argument(
        "--burstiness",
        type=float,
        default=1.0,
        help="gamma shape of the gaps between arrivals at a finite --request-rate "
        "(workload.burstiness; 1 = Poisson, below 1 burstier)",
    )
    parser.add_argument(
        "--warmup-requests",
        type=_warmup,
        default=1,
        help="unmeasured requests first (default 1, outputs capped at 32 tokens), or 'cell': "
        "an unmeasured copy of the measurement (as workload.warmup_requests: cell)",
    )
    parser.add_argument("--seed", type=int, default=0, help="prompt and arrival seed (default 0)")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="per-request timeout in seconds (default 600)"
    )
    parser.add_argument(
        "--model", default=None, help="served model name for --api openai (default: 'default')"
    )
    parser.add_argument(
        "--processes",
        type=_processes,
        default="auto",
        help="client processes to spread the requests over (default auto: one per 256 of "
        "concurrency, at most the usable cores minus one)",
    )
    parser.add_argument(
        "--api-key", default=None, help="bearer token, if the server wants one (never logged)"
    )
    _add_bench_client_requests(parser)


def _add_bench_client_requests(parser: argparse.ArgumentParser) -> None:
    """What bench-client's requests are, as a run's spec can say it (engine.prompt_format,
    engine.strict_openai, model.tokenizer, model.vocab_size, workload.duration, the time cap),
    so a server the runner can measure bench-client can measure too."""
    parser.add_argument(
        "--prompt-format",
        choices=("token_ids", "text"),
        default="token_ids",
        help="token_ids: random token ids (default); text: the same prompts as text of exactly "
        "--input-len tokens of --tokenizer, for servers that refuse token ids "
        "(engine.prompt_format; needs pip install 'matrixrun[text]')",
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="the model's tokenizer.json or its folder (a model folder with config.json too): "
        "text prompts are made with it, and token ids are drawn within its vocabulary",
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="tokens in the model's vocabulary, where --tokenizer cannot say (model.vocab_size); "
        "without either, ids come from [1000, 30000), which a smaller vocabulary cannot take",
    )
    parser.add_argument(
        "--strict-openai",
        action="store_true",
        help="with --api openai: send only OpenAI completions fields, no ignore_eos, for "
        "servers that answer it with 422 (engine.strict_openai); outputs may then end short, "
        "counted as short_outputs",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop sending new requests after this many seconds (workload.duration; "
        "--num-prompts is then an upper bound)",
    )
    parser.add_argument(
        "--time-cap",
        type=float,
        default=None,
        help="cancel what has not finished this many seconds after the start and report the "
        "requests that did (a run's limits.cell_timeout)",
    )
    parser.add_argument(
        "--transport",
        choices=("raw", "httpx"),
        default="raw",
        help="the client's HTTP implementation: raw (default, what runs use) or httpx (the "
        "reference, for cross-checking)",
    )

"""Make the golden result files of other benchmark clients by running the real clients.

`matrixrun ingest` reads the output of vLLM's `bench serve` and `bench sweep`, guidellm, aiperf
and genai-bench. Its tests must run on files those tools really wrote, not on imitations, so
this script installs nothing itself but drives each tool (installed from PyPI into its own
virtualenv, never the project's) against the simulator (`python -m matrixrun.sim`, a real
server process on 127.0.0.1) and copies what the tool wrote to `tests/golden/<tool>/`.

Two simulated servers stand for two arms: `base` (the default profile) and `cutedsl`
(`--moe-runner-backend flashinfer_cutedsl`, whose decode steps are ~10% faster at small
batches). Runs are tiny (a few prompts of 64 tokens in, 32 out) so the files stay a few KB and
need no trimming: whatever a tool wrote is committed as written, except where noted below.

The clients need a tokenizer and may not download one, so the script writes a word-level
Hugging Face tokenizer (`tokenizer.json`, no weights) whose words are the simulator's tokens:
`t<N>` is id N (see `matrixrun/sim/tokens.py`), so a prompt of N tokens for the client is N
tokens for the server, and the generated words count back to the same number.

    python benchmarks/golden_clients.py --tools /work/tools [--only vllm guidellm] [--keep DIR]
        [--golden DIR]

`--tools DIR` holds one virtualenv per tool: `vllm-venv` (pip install vllm pandas: the sweep
writes its summary.csv with pandas, part of vllm[bench]), `guidellm-venv`
(pip install guidellm), `aiperf-venv` (pip install aiperf), `genai-bench-venv`
(pip install genai-bench). A tool whose virtualenv is missing is skipped with a message.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"  # --golden DIR writes elsewhere (to check the script)
MODEL = "golden-model"
UNKNOWN = "t999"
INPUT_LEN, OUTPUT_LEN, NUM_PROMPTS = 64, 32, 8
CONCURRENCIES = (1, 4)
#: arm name -> extra simulator flags
ARMS: dict[str, list[str]] = {
    "base": [],
    "cutedsl": ["--moe-runner-backend", "flashinfer_cutedsl"],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_tokenizer(path: Path) -> Path:
    """A word-level tokenizer in the Hugging Face file format: id N is the word `tN`.

    A word it does not know (guidellm builds prompts from English text) becomes `t999`, an
    ordinary token rather than a special one, so decoding keeps it and the simulator still
    counts one token per word."""
    path.mkdir(parents=True, exist_ok=True)
    special = ["<pad>", "<s>", "</s>"]
    vocab = {w: i for i, w in enumerate(special)}
    vocab.update({f"t{i}": i for i in range(len(special), 31000)})
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": w,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, w in enumerate(special)
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNKNOWN},
    }
    (path / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        # no unk_token here: transformers would count it as special and drop it on decode
        "pad_token": "<pad>",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
        "chat_template": (
            "{% for m in messages %}{{ m['content'] }}{% if not loop.last %} {% endif %}"
            "{% endfor %}"
        ),
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 31000}))
    return path


def sim_command(port: int, flags: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "matrixrun.sim", "--model-path", MODEL,
        "--host", "127.0.0.1", "--port", str(port), *flags,
    ]  # fmt: skip


def wait_ready(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


@contextmanager
def simulator(flags: list[str]) -> Iterator[str]:
    """One simulator process for the block; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen(  # noqa: S603 - our own argv
        sim_command(port, flags), cwd=ROOT, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]  # noqa: S603


def tool(tools: Path, venv: str, exe: str) -> Path | None:
    path = tools / venv / "bin" / exe
    if not path.exists():
        print(f"skip: {path} not found (pip install it into {tools / venv})", file=sys.stderr)
        return None
    return path


def vllm_bench_args(vllm: Path, url: str, tok: Path) -> list[str]:
    return [
        str(vllm), "bench", "serve", "--backend", "vllm", "--base-url", url, "--model", MODEL,
        "--tokenizer", str(tok), "--dataset-name", "random",
        "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN),
        "--num-prompts", str(NUM_PROMPTS), "--request-rate", "inf", "--ignore-eos",
        "--seed", "0", "--disable-tqdm",
    ]  # fmt: skip


def make_vllm(tools: Path, tok: Path, work: Path) -> None:
    """`vllm bench serve --save-result`: one JSON per run, with vLLM's default percentiles
    (p99 only, no e2el). Each arm at each concurrency with `--label ARM`, then `cutedsl` once
    more at the highest concurrency without a label, as `cutedsl.json` (its arm then comes from
    the file name, and it is a repeat of the labelled run on the same server)."""
    vllm = tool(tools, "vllm-venv", "vllm")
    if vllm is None:
        return
    out = GOLDEN / "vllm"
    out.mkdir(parents=True, exist_ok=True)
    for arm, flags in ARMS.items():
        with simulator(flags) as url:
            runs = [(f"{arm}-c{c}.json", c, ["--label", arm]) for c in CONCURRENCIES]
            if arm == "cutedsl":
                runs.append(("cutedsl.json", CONCURRENCIES[-1], []))
            for name, conc, label in runs:
                run([
                    *vllm_bench_args(vllm, url, tok), "--max-concurrency", str(conc),
                    *label, "--save-result", "--result-dir", str(work),
                    "--result-filename", name,
                ])  # fmt: skip
                shutil.copy(work / name, out / name)


def make_vllm_sweep(tools: Path, tok: Path, work: Path) -> None:
    """`vllm bench sweep serve`: two serve combinations (the arms), two concurrencies, two
    runs each, the simulator launched by the sweep itself as its --serve-cmd."""
    vllm = tool(tools, "vllm-venv", "vllm")
    if vllm is None:
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = work / "serve_params.json"
    serve.write_text(json.dumps({
        "base": {"moe_runner_backend": "flashinfer_cutlass"},
        "cutedsl": {"moe_runner_backend": "flashinfer_cutedsl"},
    }))  # fmt: skip
    bench = work / "bench_params.json"
    bench.write_text(json.dumps([{"max_concurrency": c} for c in CONCURRENCIES]))
    sweep_out = work / "sweep"
    run([
        str(vllm), "bench", "sweep", "serve",
        "--serve-cmd", " ".join(sim_command(port, [])),
        "--bench-cmd", " ".join(vllm_bench_args(vllm, url, tok)),
        "--after-bench-cmd", f"curl -s -X POST {url}/flush_cache",
        "--serve-params", str(serve), "--bench-params", str(bench),
        "--num-runs", "2", "-o", str(sweep_out), "--experiment-name", "golden",
    ])  # fmt: skip
    dest = GOLDEN / "vllm_sweep" / "golden"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(sweep_out / "golden", dest)


#: The guidellm metrics ingest reads or names in docs/ingest.md; the report's others are cut.
GUIDELLM_METRICS = (
    "request_totals", "requests_per_second", "request_concurrency", "request_latency",
    "prompt_token_count", "output_token_count", "time_to_first_token_ms",
    "time_per_output_token_ms", "inter_token_latency_ms", "output_tokens_per_second",
)  # fmt: skip


def trim_guidellm(path: Path) -> None:
    """Cut a guidellm report to a committable size (~120 KB a benchmark as written): drop each
    benchmark's per-request `requests` lists and the metrics not in GUIDELLM_METRICS (the
    text/image/audio breakdowns alone are 45 KB). What stays is byte-for-byte guidellm's."""
    report = json.loads(path.read_text())
    for bench in report["benchmarks"]:
        bench.pop("requests", None)
        bench["metrics"] = {k: v for k, v in bench["metrics"].items() if k in GUIDELLM_METRICS}
    path.write_text(json.dumps(report) + "\n")


def make_guidellm(tools: Path, tok: Path, work: Path) -> None:
    """guidellm's `run`: a concurrent profile at each concurrency (one benchmark each), one
    output file per arm; `base` is named by `--label arm=base`, `cutedsl` by its file name.
    `sample_size=0` keeps no prompt or output text per request; guidellm still writes each
    request's timings and many breakdowns, which `trim_guidellm` cuts."""
    guidellm = tool(tools, "guidellm-venv", "guidellm")
    if guidellm is None:
        return
    out = GOLDEN / "guidellm"
    out.mkdir(parents=True, exist_ok=True)
    for arm, flags in ARMS.items():
        with simulator(flags) as url:
            path = work / f"{arm}.json"
            run([
                str(guidellm), "run",
                "--backend", f"kind=openai_http,target={url},model={MODEL},"
                "request_format=/v1/completions",
                "--profile", "kind=concurrent,streams=1",
                "--override", "profile.streams", ",".join(map(str, CONCURRENCIES)),
                "--constraint", f"kind=max_requests,count={NUM_PROMPTS}",
                "--tokenizer", f"kind=huggingface_auto,model={tok}",
                "--data", f"kind=synthetic_text,prompt_tokens={INPUT_LEN},"
                f"output_tokens={OUTPUT_LEN}",
                "--metrics", "kind=generative,sample_size=0",
                "--output", f"kind=json,path={path}", "--disable-progress",
                *(["--label", f"arm={arm}"] if arm == "base" else []),
            ])  # fmt: skip
            shutil.copy(path, out / path.name)
            trim_guidellm(out / path.name)


def make_aiperf(tools: Path, tok: Path, work: Path) -> None:
    """aiperf's `profile` with a concurrency sweep (`--concurrency 1,4`): one artifact folder
    per arm, a `concurrency_N/` folder per step. Only each step's
    `profile_export_aiperf.json` (the summary export) is kept; the per-request
    `profile_export.jsonl`, CSVs, logs and aggregates beside it are not committed. aiperf
    loads a local tokenizer only with HF_HUB_OFFLINE unset (it then resolves the path
    itself; nothing is downloaded)."""
    aiperf = tool(tools, "aiperf-venv", "aiperf")
    if aiperf is None:
        return
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    for arm, flags in ARMS.items():
        with simulator(flags) as url:
            art = work / "aiperf" / arm
            if art.exists():
                shutil.rmtree(art)
            run([
                str(aiperf), "profile", "--model", MODEL, "--url", url,
                "--endpoint-type", "completions", "--streaming",
                "--concurrency", ",".join(map(str, CONCURRENCIES)),
                "--request-count", str(NUM_PROMPTS), "--isl", str(INPUT_LEN),
                "--osl", str(OUTPUT_LEN), "--tokenizer", str(tok),
                "--artifact-dir", str(art), "--ui-type", "none",
            ], env=env)  # fmt: skip
            for conc in CONCURRENCIES:
                src = art / f"concurrency_{conc}" / "profile_export_aiperf.json"
                dest = GOLDEN / "aiperf" / arm / f"concurrency_{conc}"
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, dest / src.name)


def make_genai_bench(tools: Path, tok: Path, work: Path) -> None:
    """genai-bench's `benchmark` (text-to-text, over the simulator's /v1/chat/completions):
    one experiment folder per arm, one JSON per concurrency. The run JSONs and
    `experiment_metadata.json` are kept as written; the plots and the .xlsx are not."""
    genai = tool(tools, "genai-bench-venv", "genai-bench")
    if genai is None:
        return
    for arm, flags in ARMS.items():
        with simulator(flags) as url:
            base = work / "genai-bench"
            if (base / arm).exists():
                shutil.rmtree(base / arm)
            run([
                str(genai), "benchmark", "--api-backend", "openai", "--api-base", url,
                "--api-key", "unused", "--task", "text-to-text", "--api-model-name", MODEL,
                "--model-tokenizer", str(tok),
                "--traffic-scenario", f"D({INPUT_LEN},{OUTPUT_LEN})",
                *[a for c in CONCURRENCIES for a in ("--num-concurrency", str(c))],
                "--max-requests-per-run", str(NUM_PROMPTS), "--max-time-per-run", "1",
                "--experiment-base-dir", str(base), "--experiment-folder-name", arm,
                "--log-dir", str(base / "logs"),
            ], cwd=work)  # fmt: skip
            dest = GOLDEN / "genai_bench" / arm
            dest.mkdir(parents=True, exist_ok=True)
            for f in (base / arm).glob("*.json"):
                shutil.copy(f, dest / f.name)


MAKERS = {
    "vllm": make_vllm,
    "vllm_sweep": make_vllm_sweep,
    "guidellm": make_guidellm,
    "aiperf": make_aiperf,
    "genai_bench": make_genai_bench,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=Path, required=True, help="folder of tool virtualenvs")
    parser.add_argument("--only", nargs="*", choices=sorted(MAKERS), help="these tools only")
    parser.add_argument("--keep", type=Path, help="keep the working folder here")
    parser.add_argument("--golden", type=Path, help="write here instead of tests/golden")
    args = parser.parse_args()
    if args.golden:
        global GOLDEN
        GOLDEN = args.golden.resolve()
    work = args.keep or Path(tempfile.mkdtemp(prefix="golden-clients-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded: the tokenizer is local
    tok = write_tokenizer(work / "tokenizer")
    for name in args.only or MAKERS:
        MAKERS[name](args.tools, tok, work)


if __name__ == "__main__":
    main()

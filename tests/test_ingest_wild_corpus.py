"""Every file of the shared wild corpus (`../shared/wild/`, listed in its SOURCES.md) read
with numbers equal to its own fields, or refused in one sentence naming it; and the natural
comparisons SOURCES.md names, refused where they are not one and decided where the files
decide them. Expected values are taken from the raw files here, never from the readers.

The corpus is not in the repository (its files are read in place, never copied): CI has it
at `../shared/wild/`; elsewhere, without it, the module is skipped with one line.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from matrixrun.core.errors import InputError
from matrixrun.ingest.command import ingest
from matrixrun.ingest.formats import detect, load, read, vllm
from matrixrun.report.inputs import read_inputs
from matrixrun.report.sections import server_side
from matrixrun.rundir.results import RunDir

WILD = Path(__file__).resolve().parent.parent.parent / "shared" / "wild"
if not (WILD / "SOURCES.md").is_file():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{WILD}/SOURCES.md is missing: CI must provide the wild corpus")
    pytest.skip(f"no wild corpus at {WILD} (CI provides it)", allow_module_level=True)

SOURCES = (WILD / "SOURCES.md").read_text()
LLMK8S = WILD / "surajssd__llm-k8s" / "results_serving_meta-llama-Llama-3.3-70B-Instruct"
NO_IB, IB = LLMK8S / "02_tp4_pp2_no_IB", LLMK8S / "03_tp4_pp2_IB"
IPERF = WILD / "kubernetes-sigs__inference-perf" / "demos" / "kubecon-na-2025"
GENAI = WILD / "sgl-project__genai-bench"
LLMPERF = WILD / "ray-project__llmperf-leaderboard" / "raw_data"
FILES = sorted(p for p in WILD.rglob("*") if p.is_file() and p.name != "SOURCES.md")
STATS = ("mean", "median", "std", "p90", "p95", "p99")


def raw(path: Path) -> Any:
    return json.loads(path.read_text())


def refusal(given: Path | list[Path], baseline: str = "x", **kw: Any) -> str:
    """The one sentence `load` refuses with (it must name a file)."""
    paths = given if isinstance(given, list) else [given]
    with pytest.raises(InputError) as err:
        load(paths, baseline, **kw)
    text = str(err.value)
    assert "\n" not in text and "Traceback" not in text
    assert any(str(p) in text or p.name in text for p in paths), text
    return text


def test_sources_lists_every_folder_and_the_corpus_is_whole() -> None:
    """SOURCES.md names each repository folder; the file counts it states hold."""
    for folder in {p.relative_to(WILD).parts[0] for p in FILES}:
        assert f"## {folder}" in SOURCES, folder
    assert len([p for p in FILES if p.parent.name == "results"]) == 96
    assert len(list((LLMPERF / "summary").glob("*.json"))) == 19
    assert len(list((LLMPERF / "individual").glob("*.json"))) == 8


# ---------------------------------------------------------------- every file: read or refused


def _kind(p: Path) -> str:
    """What each corpus file is, by where SOURCES.md says it came from and its content."""
    if p.suffix == ".commands" or p.suffix == ".yaml":
        return "sidecar"
    if p.name == "benchmark_results.json":
        return "vllm_table"
    if "llm-k8s" in str(p):
        return "vllm"
    if "inference-perf" in str(p):
        return (
            "iperf_stage"
            if re.fullmatch(r"stage_\d+_lifecycle_metrics\.json", p.name)
            else "iperf_other"
        )
    if "genai-bench" in str(p):
        return "genai"
    return "llmperf"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(WILD)) for p in FILES])
def test_every_file_is_read_or_refused_in_one_sentence(path: Path) -> None:
    kind = _kind(path)
    if kind in ("sidecar", "iperf_other", "genai"):
        text = refusal(path)
        if kind == "genai":
            assert "genai-bench 0.0.2" in text
        return
    runs = read(path)
    assert runs, path
    for run in runs:
        m = run.record.metrics
        assert m.completed > 0 and m.duration > 0 and m.output_throughput > 0


@pytest.mark.parametrize("path", sorted(LLMK8S.glob("*/serving_*.json")), ids=lambda p: p.name)
def test_vllm_v083_numbers_are_the_files_own(path: Path) -> None:
    """benchmark_serving.py v0.8.3: aggregates as written, failures from `errors`, the rate
    "inf" or a number, the sidecar's gpu_type as hardware; no e2e, no p90/p95 invented."""
    data, side = raw(path), raw(path.with_suffix(".commands"))
    assert detect(path) == "vllm"
    (run,) = read(path)
    m = run.record.metrics
    assert m.completed == data["completed"] and m.duration == data["duration"]
    assert m.failed == sum(1 for e in data["errors"] if e)
    assert m.output_throughput == data["output_throughput"]
    assert m.total_throughput == data["total_token_throughput"]
    assert m.input_throughput == pytest.approx(data["total_input_tokens"] / data["duration"])
    for fam in ("ttft", "tpot", "itl"):
        for stat in ("mean", "median", "std", "p99"):
            assert getattr(m, f"{stat}_{fam}_ms") == data[f"{stat}_{fam}_ms"]
        assert getattr(m, f"p90_{fam}_ms") is None and getattr(m, f"p95_{fam}_ms") is None
    assert m.mean_e2e_latency_ms is None and m.concurrency is None
    rate = data["request_rate"]
    assert run.record.request_rate == (math.inf if rate == "inf" else float(rate))
    assert run.identity["gpu"] == side["gpu_type"]
    assert run.identity["model"] == data["model_id"]
    assert "request_goodput:" in data and "v0.8" in run.tool


@pytest.mark.parametrize("path", [NO_IB / "benchmark_results.json", IB / "benchmark_results.json"])
def test_nightly_table_rows_are_their_own_fields(path: Path) -> None:
    rows = raw(path)
    runs = read(path)
    assert len(runs) == len(rows)
    for row, run in zip(rows, runs, strict=True):
        m = run.record.metrics
        assert m.completed == row["# of req."]
        assert m.request_throughput == row["Tput (req/s)"]
        assert m.output_throughput == row["Output Tput (tok/s)"]
        assert m.total_throughput == row["Total Tput (tok/s)"]
        assert m.duration == pytest.approx(row["# of req."] / row["Tput (req/s)"])
        assert m.median_tpot_ms == row["Median TPOT (ms)"] and m.p99_itl_ms == row["P99 ITL (ms)"]
        assert m.p90_ttft_ms is None and m.std_ttft_ms is None
        assert run.identity["gpu"] == row["GPU"]
        rate = row["Test name"].rsplit("_qps_", 1)[1]
        assert run.record.request_rate == (math.inf if rate == "inf" else float(rate))
    # The rate-inf row copies the result file of that run, to the last digit.
    (inf,) = [r for r in runs if r.record.request_rate == math.inf]
    own = raw(next(path.parent.glob("*_qps_inf.json")))
    assert inf.record.metrics.duration == pytest.approx(own["duration"], rel=1e-12)
    assert inf.record.metrics.total_output_tokens == own["total_output_tokens"]


STAGES = sorted(IPERF.glob("*/results/stage_*_lifecycle_metrics.json"))


@pytest.mark.parametrize("path", STAGES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_inference_perf_stage_in_seconds_becomes_ms(path: Path) -> None:
    data = raw(path)
    (run,) = read(path)
    m, s = run.record.metrics, data["successes"]
    assert m.completed == s["count"] and m.failed == data["failures"]["count"]
    assert m.output_throughput == s["throughput"]["output_tokens_per_sec"]
    assert m.request_throughput == s["throughput"]["requests_per_sec"]
    assert m.duration == pytest.approx(s["count"] / s["throughput"]["requests_per_sec"])
    assert m.total_output_tokens == round(s["output_len"]["mean"] * s["count"])
    for ours, theirs in (("ttft", "time_to_first_token"), ("e2e_latency", "request_latency")):
        for stat in ("mean", "median", "p90", "p95", "p99"):
            want = s["latency"][theirs][stat] * 1000
            assert getattr(m, f"{stat}_{ours}_ms") == pytest.approx(want, rel=1e-12)
        assert getattr(m, f"std_{ours}_ms") is None
    for stat in STATS:  # lines, not tokens: left out, never converted
        assert getattr(m, f"{stat}_tpot_ms") is None and getattr(m, f"{stat}_itl_ms") is None
    assert run.record.request_rate == data["load_summary"]["requested_rate"]
    assert run.identity["model"] == "meta-llama/Meta-Llama-3-8B-Instruct"
    prom = raw(path.with_name(path.name.replace("lifecycle", "prometheus")))
    assert run.server_side["rate"] == prom["successes"]["rate"]
    assert m.model_dump().get("rate") is None  # the server's numbers stay beside, not inside


def _scrape_of(source: str) -> dict[str, Any]:
    """The Prometheus report beside a run's lifecycle report (`source` is `path:line`)."""
    life = Path(source.rsplit(":", 1)[0])
    return raw(life.with_name(life.name.replace("lifecycle", "prometheus")))["successes"]


def test_the_report_shows_the_servers_scrape_beside_the_clients_never_in_the_verdict(
    tmp_path: Path,
) -> None:
    """Issue 47: "server-side metrics shown beside the client's when present, never mixed into
    the verdict". They were kept in ingest.json and the summary only. Each row's server
    numbers are the scrape's own fields (seconds × 1000), the client's the lifecycle
    report's; a scrape over another window (stage 0: 937 scraped, 60 sent) is said; and the
    verdict is the same when the scrapes are not there at all."""
    arms = ("vllm", "vllm+eagle")
    out = ingest([str(IPERF / a / "results") for a in arms], baseline="vllm", out=tmp_path / "r")
    assert out is not None
    inputs = read_inputs(RunDir(out))
    rows = server_side.rows_of(
        inputs.measurements, server_side.scrapes_of(inputs.ingest), "request_rate"
    )
    scrapes = [
        p for a in arms for p in (IPERF / a / "results").glob("stage_*_prometheus_metrics.json")
    ]
    assert len(rows) == len(scrapes) > 0
    for row in rows:
        prom, life = _scrape_of(row.source), raw(Path(row.source.rsplit(":", 1)[0]))
        assert row.scraped == prom["count"]
        assert row.sent == life["successes"]["count"] + life["failures"]["count"]
        assert row.pairs["req/s"] == (
            life["successes"]["throughput"]["requests_per_sec"],
            prom["rate"],
        )
        for column, key in (("mean TTFT (ms)", "time_to_first_token"),
                            ("mean e2e (ms)", "request_latency")):  # fmt: skip
            client, server = row.pairs[column]
            assert server == pytest.approx(prom[key]["mean"] * 1000, rel=1e-12)
            assert client == pytest.approx(life["successes"]["latency"][key]["mean"] * 1000)
        tpot = row.pairs["mean TPOT (ms)"]  # the client's is left out: not bench_serving's
        assert tpot == (None, pytest.approx(prom["time_per_output_token"]["mean"] * 1000))
    report = (out / "report.md").read_text()
    shown = report.split("## Server-side metrics (not compared)")[1].split("\n## ")[0]
    stage0 = _scrape_of(str(STAGE0))
    assert (
        f"| `vllm` | 1 | 60 / {stage0['count']} | 1.017 / {stage0['rate']:.4g} | 31.13 / 1,795 |"
        in shown
    )
    assert f"`vllm` at request_rate 1: {stage0['count']} scraped, 60 sent" in shown
    assert "Shown, never compared: the verdict is the client's alone" in shown
    assert report.index("**Verdict") < report.index("## Server-side")
    view = server_side.of(inputs.measurements, inputs.ingest, "request_rate")
    assert view is not None and len(view.rows) == len(rows)
    assert server_side.drop_table(view) == "the server-side metrics table"  # the size budget's
    assert view.rows == [] and view.window and server_side.drop_table(view) is None
    # without the scrapes the verdict is the same: nothing of them went into it
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(IPERF / "config.yaml", bare / "config.yaml")
    for a in arms:
        shutil.copytree(IPERF / a, bare / a, ignore=shutil.ignore_patterns("*prometheus*"))
    out2 = ingest([str(bare / a / "results") for a in arms], baseline="vllm", out=tmp_path / "r2")
    assert out2 is not None
    assert json.loads((out2 / "ingest.json").read_text())["server_side"] == {}
    assert raw(out2 / "verdict.json") == raw(out / "verdict.json")
    assert "## Server-side" not in (out2 / "report.md").read_text()


@pytest.mark.parametrize("path", sorted((LLMPERF / "summary").glob("*.json")), ids=lambda p: p.name)
def test_llmperf_summary_numbers_are_its_own(path: Path) -> None:
    data = raw(path)
    (run,) = read(path)
    m = run.record.metrics
    n = data["results_num_completed_requests"]
    assert m.completed == n and m.failed == data["results_number_errors"]
    assert m.output_throughput == data["results_mean_output_throughput_token_per_s"]
    assert m.request_throughput * 60 == pytest.approx(
        data["results_num_completed_requests_per_min"]
    )
    assert m.median_ttft_ms == pytest.approx(data["results_ttft_s_quantiles_p50"] * 1000)
    assert m.p99_e2e_latency_ms == pytest.approx(
        data["results_end_to_end_latency_s_quantiles_p99"] * 1000
    )
    want_std = data["results_ttft_s_stddev"] * math.sqrt((n - 1) / n) * 1000
    assert m.std_ttft_ms == pytest.approx(want_std)
    assert m.mean_itl_ms is None
    assert run.record.max_concurrency == data["num_concurrent_requests"]
    assert run.identity["model"] == data["model"]
    individual = LLMPERF / "individual" / path.name
    if not individual.is_file():  # llmperf's inter_token_latency_s includes the TTFT
        assert m.median_tpot_ms is None and "tpot" in run.definitions


@pytest.mark.parametrize(
    "path", sorted((LLMPERF / "individual").glob("*.json")), ids=lambda p: p.name
)
def test_llmperf_requests_give_tpot_as_bench_serving_defines_it(path: Path) -> None:
    rows = [r for r in raw(path) if r["error_code"] is None]
    (run,) = read(path)
    m = run.record.metrics
    assert m.completed == len(rows)
    tpot = [(r["end_to_end_latency_s"] - r["ttft_s"]) / (r["number_output_tokens"] - 1) * 1000
            for r in rows if r["number_output_tokens"] > 1]  # fmt: skip
    assert m.median_tpot_ms == pytest.approx(float(np.median(tpot)))
    assert m.p99_tpot_ms == pytest.approx(float(np.percentile(tpot, 99)))
    assert m.median_ttft_ms == pytest.approx(float(np.median([r["ttft_s"] for r in rows])) * 1000)
    # The summary and its requests are one run, counted once when both are given.
    partner = "together_70b" if path.stem == "anyscale_70b" else "anyscale_70b"
    both = load([LLMPERF / "summary" / path.name, path, LLMPERF / "summary" / f"{partner}.json"],
                partner, allow_differences=["model"])  # fmt: skip
    assert len(both.runs) == 2


def test_genai_bench_folder_without_result_is_refused_naming_it() -> None:
    folder = GENAI / "regression_main_50req"
    for given in (folder, folder / "experiment_metadata.json"):
        text = refusal(given)
        assert "no result file" in text and "regression_main_50req" in text


# ------------------------------------------------------------------------- natural pairs

IB_FILES = sorted(LLMK8S.glob("*/serving_*.json"))


def test_infiniband_pair_refused_for_its_hardware_record_unless_allowed() -> None:
    text = refusal(IB_FILES, "02_tp4_pp2_no_IB")
    assert "gpu" in text and "Standard_ND96asr_v4 x 2" in text
    got = load(IB_FILES, "02_tp4_pp2_no_IB", allow_differences=["gpu"])
    assert got.result.settings.axis == "request_rate"  # found: max_concurrency null everywhere
    assert {m.arm for m in got.result.measurements} == {"02_tp4_pp2_no_IB", "03_tp4_pp2_IB"}
    assert {m.point["request_rate"] for m in got.result.measurements} == {4.0, "inf"}


def _cell(run_dir: Path, metric: str, x: Any) -> dict[str, Any]:
    verdict = raw(run_dir / "verdict.json")
    for cand in verdict["slices"][0]["candidates"]:
        for met in cand["metrics"]:
            if met["metric"] == metric:
                for series in met["series"]:
                    for cell in series["cells"]:
                        if cell["point"]["request_rate"] == x:
                            return dict(cell)
    raise AssertionError(f"no {metric} cell at {x}")


def test_infiniband_at_rate_inf_the_verdict_follows_the_files(tmp_path: Path) -> None:
    """Single runs decide nothing alone (no noise estimate); with a declared 2% noise the
    rate-inf TTFT, 14% lower with InfiniBand in the files, is better, and the report opens
    with the hardware difference."""
    base = raw(NO_IB / next(NO_IB.glob("*_qps_inf.json")).name)
    cand = raw(IB / next(IB.glob("*_qps_inf.json")).name)
    change = cand["median_ttft_ms"] / base["median_ttft_ms"] - 1
    assert change < -0.10
    alone = ingest([str(p) for p in IB_FILES], baseline="02_tp4_pp2_no_IB", out=tmp_path / "a",
                   allow_differences=["gpu"], metrics="median_ttft_ms")  # fmt: skip
    assert alone is not None and _cell(alone, "median_ttft_ms", "inf")["verdict"] == "undecided"
    out = ingest([str(p) for p in IB_FILES], baseline="02_tp4_pp2_no_IB", out=tmp_path / "b",
                 allow_differences=["gpu"], metrics="median_ttft_ms", noise="2%")  # fmt: skip
    assert out is not None
    cell = _cell(out, "median_ttft_ms", "inf")
    assert cell["verdict"] == "better"
    assert cell["change"] == pytest.approx(change, rel=1e-6)
    assert raw(out / "ingest.json")["axis_found"].startswith("request_rate")
    report = (out / "report.md").read_text()
    assert "Read first:** the arms differ in gpu" in report.split("**Verdict")[0]


def test_nightly_tables_pair_the_same_way() -> None:
    tables = [NO_IB / "benchmark_results.json", IB / "benchmark_results.json"]
    assert "gpu" in refusal(tables, "tp4_pp2_no_IB")
    got = load(tables, "tp4_pp2_no_IB", allow_differences=["gpu"])
    assert len({str(m.point["request_rate"]) for m in got.result.measurements}) == 4
    assert "failed requests not recorded (counted as 0, not measured)" in got.summary()
    assert any(c["kind"] == "failures_not_recorded" for c in got.caveats)
    # The table and the result files it copies are one measurement given twice.
    assert "same run" in refusal([tables[0], *NO_IB.glob("serving_*.json")], "tp4_pp2_no_IB")


@pytest.mark.parametrize(
    "candidate",
    [
        "vllm+batch_size",
        "vllm+chunking_and_prefix_caching",
        "vllm+eagle",
        "vllm+quantization",
        "vllm+v0_engine",
    ],
)
def test_inference_perf_baseline_against_each_change(candidate: str) -> None:
    """Stages sweep each server's own rates: only the requested rates both ran compare
    (stage 0, rate 1.0, in every folder); the others are a caveat, never paired by index."""
    got = load([IPERF / "vllm" / "results", IPERF / candidate / "results"], "vllm")
    rates = {a: {raw(p)["load_summary"]["requested_rate"]
                 for p in (IPERF / a / "results").glob("stage_*_lifecycle_metrics.json")}
             for a in ("vllm", candidate)}  # fmt: skip
    shared = rates["vllm"] & rates[candidate]
    assert 1.0 in shared
    points = {m.point["request_rate"] for m in got.result.measurements}
    assert points == rates["vllm"] | rates[candidate]
    lonely = [c for c in got.caveats if c["kind"] == "one_arm_points"]
    assert bool(lonely) == (rates["vllm"] != rates[candidate])
    assert "server-side (Prometheus scrape, shown, not compared)" in got.summary()
    # stage 0's scrape counted 937 requests where the client sent 60: said, not passed over
    assert "the scrape counted 937 requests where the client sent 60" in got.summary()
    assert "left out: median_tpot_ms" in got.summary()


def test_llmperf_providers_differ_in_model_and_sizes_are_refused() -> None:
    s = LLMPERF / "summary"
    text = refusal([s / "anyscale_70b.json", s / "together_70b.json"], "anyscale_70b")
    assert raw(s / "anyscale_70b.json")["model"] in text and "model" in text
    assert "model" in refusal([s / "anyscale_70b.json", s / "anyscale_7b.json"], "anyscale_70b")
    others = sorted(p for p in s.glob("*_70b.json") if p.name != "anyscale_70b.json")
    got = load([s / "anyscale_70b.json", *others], "anyscale_70b", allow_differences=["model"])
    assert len(got.result.settings.candidates) == len(others)
    assert any(c["kind"] == "differs" and c["field"] == "model" for c in got.caveats)


def test_genai_bench_builds_are_refused() -> None:
    folders = [GENAI / "regression_main_branch", GENAI / "regression_feature_no_flag"]
    assert "run_duration" in refusal(folders, "regression_main_branch")


# --------------------------------------------- files not seen: by content, refused not guessed

#: Every corpus file that is read alone (a per-request llmperf file needs its summary).
READ_ALONE = sorted(
    [*LLMK8S.glob("*/serving_*.json"), *LLMK8S.glob("*/benchmark_results.json"), *STAGES,
     *(LLMPERF / "summary").glob("*.json")]
)  # fmt: skip


@pytest.mark.parametrize("path", READ_ALONE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_file_under_another_name_is_read_the_same(path: Path, tmp_path: Path) -> None:
    """Detection is by content: the same bytes as `result.json`, in a folder of another
    name, give the same format, tool and numbers (a sidecar or a Prometheus report that sat
    beside the file is not there to be read; an llmperf summary's per-request file is, as
    `individual/result.json`, since llmperf's pairing is by name)."""
    copy = tmp_path / "summary" / "result.json"
    copy.parent.mkdir()
    shutil.copy(path, copy)
    individual = LLMPERF / "individual" / path.name
    if path.parent == LLMPERF / "summary" and individual.is_file():
        (tmp_path / "individual").mkdir()
        shutil.copy(individual, tmp_path / "individual" / "result.json")
    assert detect(copy) == detect(path)
    want, got = read(path), read(copy)
    assert [r.tool for r in got] == [r.tool for r in want]
    assert [r.record.metrics for r in got] == [r.record.metrics for r in want]


def _renamed(data: Any, keys: tuple[str, ...]) -> Any:
    """The data with the key at `keys` renamed (`*` first: in every row of a list)."""
    out = json.loads(json.dumps(data))
    for node in out if keys[0] == "*" else [out]:
        for k in keys[1:-1] if keys[0] == "*" else keys[:-1]:
            node = node[k]
        node[keys[-1] + "_v2"] = node.pop(keys[-1])
    return out


TABLE = NO_IB / "benchmark_results.json"
V083 = next(NO_IB.glob("*_qps_inf.json"))
STAGE0 = IPERF / "vllm" / "results" / "stage_0_lifecycle_metrics.json"
SUMMARY = LLMPERF / "summary" / "anyscale_70b.json"
#: `vllm bench serve` 0.33's layout (a golden file: the corpus has only v0.8's).
LATER = Path(__file__).resolve().parent / "golden" / "vllm" / "base-c1.json"


@pytest.mark.parametrize(
    ("path", "keys"),
    [
        (V083, ("total_token_throughput",)),  # was read as an sglang.bench_serving line
        (V083, ("output_throughput",)),
        (V083, ("completed",)),
        (V083, ("duration",)),
        (TABLE, ("*", "# of req.")),
        (TABLE, ("*", "Output Tput (tok/s)")),
        (STAGE0, ("failures", "count")),  # was read as 0 failed requests
        (STAGE0, ("successes", "throughput", "requests_per_sec")),
        (STAGE0, ("successes", "count")),
        (SUMMARY, ("results_number_errors",)),  # was read as 0 failed requests
        (SUMMARY, ("results_num_completed_requests_per_min",)),
        (SUMMARY, ("results_number_output_tokens_mean",)),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else "/".join(v),
)
def test_a_layout_it_does_not_know_is_refused_not_guessed(
    path: Path, keys: tuple[str, ...], tmp_path: Path
) -> None:
    """A known client's file with a field it always writes renamed (as a later version
    might): one sentence naming the file and the missing field, or saying that the file is
    no format ingest knows; never read as another client's, never a count taken as 0."""
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(_renamed(raw(path), keys)))
    text = refusal(changed)
    assert f"'{keys[-1]}'" in text or keys[-1] in text or "not a result file ingest knows" in text


def test_a_vllm_file_without_failures_says_so_before_the_verdict(tmp_path: Path) -> None:
    """A --save-result file with neither `failed` nor the per-request `errors` (a layout not
    seen: v0.8 writes `errors`, 0.33 `failed`) is read, but its failures are not recorded: the
    report's first lines say so, so "0 failed requests" is not read as a check passed."""
    for arm, src in (("a", NO_IB), ("b", IB)):
        data = raw(next(src.glob("*_qps_inf.json")))
        data.pop("errors")
        (tmp_path / f"{arm}.json").write_text(json.dumps({**data, "model_id": "m"}))
    out = ingest([str(tmp_path / "a.json"), str(tmp_path / "b.json")], baseline="a",
                 out=tmp_path / "r")  # fmt: skip
    assert out is not None
    caveats = raw(out / "ingest.json")["caveats"]
    assert [c["arms"] for c in caveats if c["kind"] == "failures_not_recorded"] == [
        {"a": vllm.UNRECORDED, "b": vllm.UNRECORDED}
    ]
    first = (out / "report.md").read_text().split("**Verdict")[0]
    assert "failed requests are not recorded for `a`, `b`" in first


def test_the_docs_table_covers_every_corpus_folder_and_file() -> None:
    """docs/ingest.md's format × version table names each repository of SOURCES.md, and its
    file counts add up to the corpus."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "ingest.md").read_text()
    table = docs.split("## Read or refused, format by version")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    for folder in {p.relative_to(WILD).parts[0] for p in FILES}:
        repo = folder.replace("__", "/")
        assert repo in table, f"{repo} ({folder}/) is not in the table"
    counts = [int(row.split("|")[3].strip().split()[0]) for row in rows[1:]]
    assert sum(counts) == len(FILES)


# ------------------------------------------------------- not a comparison: refused, or allowed


def _all_failed(data: Any, path: Path) -> Any:
    """The file as a run whose every request failed would have written it."""
    if path == V083:
        return {**data, "errors": ["Internal Server Error"] * len(data["errors"])}
    if path == STAGE0:
        return {**data, "successes": {**data["successes"], "count": 0}}
    if path == LATER:
        return {**data, "completed": 0, "failed": data["num_prompts"], "output_throughput": 0.0}
    return {**data, "results_num_completed_requests": 0, "results_number_errors": 150}


@pytest.mark.parametrize("path", [V083, LATER, STAGE0, SUMMARY], ids=lambda p: p.name)
def test_a_file_whose_every_request_failed_is_refused_in_its_words(
    path: Path, tmp_path: Path
) -> None:
    """Every layout alike: vLLM's current one was kept as a failed measurement, counted
    against its arm, while v0.8's, inference-perf's and llmperf's were refused."""
    dead = tmp_path / "dead.json"
    dead.write_text(json.dumps(_all_failed(raw(path), path)))
    text = refusal(dead)
    assert "every request failed" in text


def test_runs_over_different_datasets_are_refused_unless_allowed(tmp_path: Path) -> None:
    """The nightly runner's sidecar names the dataset (`--dataset-name`): two arms over
    different datasets are refused naming both, and allowed they are a first-line caveat."""
    for arm, dataset in (("a", "sharegpt"), ("b", "random")):
        (tmp_path / arm).mkdir()
        shutil.copy(V083, tmp_path / arm / V083.name)
        side = raw(V083.with_suffix(".commands"))
        side["client_command"] = side["client_command"].replace("sharegpt ", f"{dataset} ")
        side["client_command"] = side["client_command"].replace("=sharegpt", f"={dataset}")
        (tmp_path / arm / V083.with_suffix(".commands").name).write_text(json.dumps(side))
    files = [tmp_path / "a" / V083.name, tmp_path / "b" / V083.name]
    text = refusal(files, "a")
    assert "differ in dataset (sharegpt vs random)" in text
    got = load(files, "a", allow_differences=["dataset"])
    assert [c["field"] for c in got.caveats if c["kind"] == "differs"] == ["dataset"]


def test_runs_of_different_client_versions_are_refused_unless_allowed(tmp_path: Path) -> None:
    """llmperf's summary schema version is the client's version record."""
    for name, version in (("a", "2023-08-31"), ("b", "2024-01-01")):
        (tmp_path / f"{name}.json").write_text(json.dumps({**raw(SUMMARY), "version": version}))
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    text = refusal(files, "a")
    assert "differ in client version" in text and "2024-01-01" in text
    assert load(files, "a", allow_differences=["client-version"]).caveats


@pytest.mark.parametrize("key", ["latency", "throughput", "prompt_len"])
def test_a_stage_section_of_another_type_is_refused_naming_it(key: str, tmp_path: Path) -> None:
    """`successes.latency` as a string raised AttributeError out of the reader."""
    data = raw(STAGE0)
    data["successes"][key] = "x"
    changed = tmp_path / "stage.json"
    changed.write_text(json.dumps(data))
    assert f"successes.{key} is 'x', not an object" in refusal(changed)


def test_the_v08_layout_and_a_later_vllm_are_different_client_versions() -> None:
    """vLLM writes no version, but v0.8's layout is its own: a v0.8 file against one of
    `vllm bench serve` 0.33 (the golden files) is refused naming both layouts, unless allowed."""
    later = Path(__file__).parent / "golden" / "vllm" / "base-c1.json"
    text = refusal([V083, later], "02_tp4_pp2_no_IB", allow_differences=["model"])
    assert "differ in client version (benchmark_serving.py, v0.8 layout vs vllm bench" in text
    got = load([V083, later], "base", allow_differences=["model", "client-version", "dataset"],
               axis_field="request_rate")  # fmt: skip
    assert {c["field"] for c in got.caveats if c["kind"] == "differs"} >= {"client-version"}


# ------------------------------------------------ the report's settle command, as printed

GOLDEN = Path(__file__).resolve().parent / "golden"


def _unlabelled(src: Path, dest: Path) -> None:
    dest.write_text(json.dumps({**raw(src), "label": None}))


#: (name, how each input is made in the test's folder, the ingest's own arguments): inputs
#: whose arms come from their file or folder names, which a `.run2` copy must not change.
SETTLE_CASES: dict[str, tuple[dict[str, Path], list[str]]] = {
    "infiniband": ({"a/x_qps_inf.json": V083, "a/x_qps_inf.commands": V083.with_suffix(
        ".commands"), "b/x_qps_inf.json": next(IB.glob("*_qps_inf.json")),
        "b/x_qps_inf.commands": next(IB.glob("*_qps_inf.commands"))},
        ["--baseline", "a", "--allow-difference", "gpu"]),
    "vllm-unlabelled": ({"base.json": GOLDEN / "vllm" / "base-c1.json",
                         "cutedsl.json": GOLDEN / "vllm" / "cutedsl-c1.json"},
                        ["--baseline", "base"]),
    "inference-perf": ({"vllm/results": IPERF / "vllm" / "results",
                        "tuned/results": IPERF / "vllm+batch_size" / "results"},
                       ["--baseline", "vllm"]),
    "llmperf": ({"summary/anyscale_70b.json": SUMMARY,
                 "summary/together_70b.json": LLMPERF / "summary" / "together_70b.json"},
                ["--baseline", "anyscale_70b", "--allow-difference", "model"]),
    "aiperf": ({"base": GOLDEN / "aiperf" / "base", "cutedsl": GOLDEN / "aiperf" / "cutedsl"},
               ["--baseline", "base"]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(SETTLE_CASES))
def test_the_settle_command_runs_as_the_report_prints_it(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report's "Settle it" ended in `--out .` (the run directory itself, which ingest
    refuses to overwrite) and left out the options given (`--allow-difference gpu`: the pair
    would be refused); its second files, `x.2.json`, were new arms wherever the arm came from
    a file or folder name. Run as printed, from where the ingest ran, with a copy of each
    input as its second run, it writes a new run directory with the same arms, each point's
    second run a fresh-server repeat."""
    from matrixrun.cli.main import main

    made, args = SETTLE_CASES[case]
    for name, src in made.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, tmp_path / name)
        elif case == "vllm-unlabelled":
            _unlabelled(src, tmp_path / name)
        else:
            shutil.copy(src, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    inputs = [n for n in made if not n.endswith(".commands")]
    assert main(["ingest", *inputs, *args, "--out", "r"]) == 0, capsys.readouterr().err
    report = (tmp_path / "r" / "report.md").read_text()
    command = re.search(r"Settle it[^`]*`matrixrun ([^`#]+)", report)
    assert command is not None, report
    words = shlex.split(command.group(1))
    assert words[words.index("--out") + 1] == "r.2"
    assert all(a in words for a in args)  # every option of the first ingest
    for name in made:  # the second runs, where the command says: copies of the first
        first, second = tmp_path / name, tmp_path / name
        second = first.with_name(f"{first.stem}.run2{first.suffix}")
        if first.is_dir():
            shutil.copytree(first, second)
        else:
            shutil.copy(first, second)
    assert main(words) == 0, capsys.readouterr().err
    before = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").open()]
    after = [json.loads(x) for x in (tmp_path / "r.2" / "results.jsonl").open()]
    assert {m["arm"] for m in after} == {m["arm"] for m in before}
    assert len(after) == 2 * len(before)
    assert sorted(m["reason"] for m in after) == sorted(
        ["first"] * len(before) + ["fresh_server"] * len(before)
    )


def test_datasets_allowed_to_differ_are_each_arms_own_in_the_setup(tmp_path: Path) -> None:
    """With --allow-difference dataset the datasets stay what each file says (the Setup
    lists both), not blanked by the mapping that lets them be compared."""
    for arm, dataset in (("a", "sharegpt"), ("b", "random")):
        (tmp_path / arm).mkdir()
        shutil.copy(V083, tmp_path / arm / V083.name)
        side = raw(V083.with_suffix(".commands"))
        side["client_command"] = side["client_command"].replace("=sharegpt", f"={dataset}")
        (tmp_path / arm / V083.with_suffix(".commands").name).write_text(json.dumps(side))
    files = [str(tmp_path / "a" / V083.name), str(tmp_path / "b" / V083.name)]
    out = ingest(files, baseline="a", out=tmp_path / "r", allow_differences=["dataset"])
    assert out is not None
    report = (out / "report.md").read_text()
    assert "- **dataset:** sharegpt, random" in report
    assert "the arms differ in dataset" in report.split("**Verdict")[0]

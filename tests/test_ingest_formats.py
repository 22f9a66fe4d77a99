"""Other clients' result files → Measurements, on files the real tools wrote (tests/golden/).

The golden files come from `benchmarks/golden_clients.py`: vLLM 0.33.0's `bench serve` and
`bench sweep serve`, guidellm 0.8.1, aiperf 0.13.0 and genai-bench 0.0.5, run against the
simulator as two arms (`base`, and `cutedsl` whose decode steps are ~10% shorter at small
batches, after a one-off 400 ms compile penalty).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from matrixrun.analysis import analyse
from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.ingest.formats import detect, load, read
from matrixrun.ingest.formats.vllm_sweep import combination

GOLDEN = Path(__file__).parent / "golden"
VLLM = GOLDEN / "vllm"
SWEEP = GOLDEN / "vllm_sweep" / "golden"
GUIDELLM = GOLDEN / "guidellm"
BENCH_SERVING = GOLDEN / "bench_serving"
LABELLED = [VLLM / f"{arm}-c{c}.json" for arm in ("base", "cutedsl") for c in (1, 4)]


def cell(ms: list[Measurement], arm: str, concurrency: int) -> list[Measurement]:
    return [m for m in ms if m.arm == arm and m.point == {"concurrency": concurrency}]


def raw(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


# ---------------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        (VLLM / "base-c1.json", "vllm"),
        (SWEEP, "vllm_sweep"),
        (SWEEP.parent, "vllm_sweep"),
        (GUIDELLM / "base.json", "guidellm"),
        (BENCH_SERVING / "steady.jsonl", "bench_serving"),
        (BENCH_SERVING / "fast_decode.jsonl", "bench_serving"),
    ],
)
def test_detects_each_real_format(path: Path, fmt: str) -> None:
    assert detect(path) == fmt


def test_unknown_file_names_the_formats_and_the_flag(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"throughput": 3}')
    with pytest.raises(InputError) as err:
        detect(other)
    text = str(err.value)
    assert text.startswith(f"{other}: not a result file ingest knows")
    assert "--format" in text and "guidellm" in text


def test_a_sweep_summary_file_points_at_the_directory() -> None:
    summary = next(SWEEP.glob("*/summary.json"))
    with pytest.raises(InputError, match="pass the sweep's directory"):
        detect(summary)


def test_forced_format_reports_what_is_missing() -> None:
    with pytest.raises(InputError) as err:
        read(BENCH_SERVING / "steady.jsonl", "vllm")
    assert "steady.jsonl" in str(err.value)


# ------------------------------------------------------------------------------- vLLM serve


def test_vllm_files_map_field_by_field() -> None:
    ingested = load(LABELLED, "base")
    ms = ingested.result.measurements
    assert ingested.result.arms == ["base", "cutedsl"]
    assert [(m.arm, m.point) for m in ms] == [
        ("base", {"concurrency": 1}),
        ("base", {"concurrency": 4}),
        ("cutedsl", {"concurrency": 1}),
        ("cutedsl", {"concurrency": 4}),
    ]
    for m, path in zip(ms, LABELLED, strict=True):
        data = raw(path)
        assert m.metrics is not None
        met = m.metrics
        assert (met.completed, met.failed) == (data["completed"], data["failed"])
        assert met.output_throughput == data["output_throughput"]
        assert met.total_throughput == data["total_token_throughput"]
        assert met.input_throughput == pytest.approx(data["total_input_tokens"] / data["duration"])
        assert met.median_tpot_ms == data["median_tpot_ms"]
        assert met.p99_ttft_ms == data["p99_ttft_ms"]
        # vLLM's default percentiles are p99 only, and no e2el: nothing is invented
        assert met.p90_ttft_ms is None and met.mean_e2e_latency_ms is None
        assert met.concurrency is None
        assert m.client == "vllm" and m.extra["format"] == "vllm"
        assert m.extra["request_rate"] == "inf"
    assert ingested.client == "vllm"


def test_unlabelled_file_takes_its_name_and_repeats_the_labelled_run() -> None:
    ingested = load([*LABELLED, VLLM / "cutedsl.json"], "base")
    assert raw(VLLM / "cutedsl.json")["label"] is None
    reps = cell(ingested.result.measurements, "cutedsl", 4)
    assert [(m.attempt, m.reason, m.instance) for m in reps] == [
        (1, "first", "cutedsl#1"),
        (2, "manual", "cutedsl#1"),
    ]
    summary = ingested.summary()
    assert "repeats (runs per arm @ point): cutedsl @ 4: 2" in summary
    assert "arms: base (baseline), cutedsl" in summary


def test_vllm_summary_says_what_was_computed_and_not_checked() -> None:
    summary = load(LABELLED, "base").summary()
    assert "computed: input_throughput = total_input_tokens / duration" in summary
    assert "defined differently: itl: vLLM counts one inter-token gap per streamed chunk" in summary
    assert "not checked: these files record no dataset or lengths" in summary
    assert "64/32" in summary  # the mean lengths the files imply
    assert "points (concurrency): 1, 4" in summary


def test_vllm_bad_field_names_the_file_and_field(tmp_path: Path) -> None:
    data = raw(VLLM / "base-c1.json")
    data["completed"] = "eight"
    bad = tmp_path / "base-c1.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        load([bad, VLLM / "cutedsl-c1.json"], "base")
    assert str(err.value).startswith(f"{bad}: 'completed' is 'eight', not a finite number")


@pytest.mark.parametrize(
    ("failed", "said"), [(8, "every request failed"), (0, "no request completed")]
)
def test_vllm_run_with_nothing_completed_is_refused(failed: int, said: str, tmp_path: Path) -> None:
    """Was kept as a failed measurement (counted against its arm in the verdict); refused now,
    as the v0.8 layout, vLLM's nightly table, inference-perf and llmperf refuse theirs: a run
    that completed nothing measured nothing of the server (issue 47)."""
    data = raw(VLLM / "base-c1.json")
    data.update(completed=0, failed=failed, total_output_tokens=0, output_throughput=0.0,
                request_throughput=0.0, errors=["", "Server disconnected"])  # fmt: skip
    dead = tmp_path / "base-c1.json"
    dead.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        load([dead, VLLM / "cutedsl-c1.json"], "base")
    assert str(err.value) == (
        f"{dead}: {said} (completed 0, failed {failed}, the first error: 'Server disconnected'):"
        " there is no measurement to compare; fix the server or the client and rerun, or leave"
        " the file out"
    )


# ------------------------------------------------------------------------------- vLLM sweep


def test_sweep_directory_names() -> None:
    assert combination("SERVE--base-BENCH--max_concurrency=4") == ("base", "max_concurrency=4")
    assert combination("BENCH--max_concurrency=4") == (None, "max_concurrency=4")
    assert combination("SERVE--tp=2-ep=1") == ("tp=2-ep=1", None)


def test_sweep_serve_combinations_are_arms_and_runs_are_repeats() -> None:
    ingested = load([SWEEP], "base")
    ms = ingested.result.measurements
    assert ingested.result.arms == ["base", "cutedsl"]
    assert len(ms) == 8
    base1 = cell(ms, "base", 1)
    assert [(m.attempt, m.reason, m.instance) for m in base1] == [
        (1, "first", "base#1"),
        (2, "manual", "base#1"),
    ]
    first = raw(SWEEP / "SERVE--base-BENCH--max_concurrency=1" / "run=0.json")
    assert first["run_number"] == 0 and first["moe_runner_backend"] == "flashinfer_cutlass"
    met = base1[0].metrics
    assert met is not None
    # a sweep asks for e2el: mapped, and concurrency computed from it
    assert met.mean_e2e_latency_ms == first["mean_e2el_ms"]
    assert met.concurrency == pytest.approx(
        first["mean_e2el_ms"] / 1000 * first["completed"] / first["duration"]
    )
    assert all(m.extra["format"] == "vllm_sweep" and m.client == "vllm" for m in ms)
    assert "servers: base#1 (4 runs), cutedsl#1 (4 runs)" in ingested.summary()


def test_sweep_runs_to_a_verdict_with_their_own_noise() -> None:
    """Two runs per cell on one server: the warm σ is measured, not declared."""
    ingested = load([SWEEP], "base")
    v = analyse(ingested.result.measurements, ingested.result.settings)
    assert v.sigma and v.sigma[0].source == "warm"
    tpot = {m.metric: m for m in v.slices[0].candidates[0].metrics}["median_tpot_ms"]
    changes = [c.change for s in tpot.series for c in s.cells]
    assert all(c < 0 for c in changes)  # cutedsl's decode steps are shorter


def test_sweep_serve_combinations_as_launches_of_one_arm(tmp_path: Path) -> None:
    ingested = load(
        [SWEEP, VLLM / "base-c1.json", VLLM / "base-c4.json"], "base", sweep_serve="launches"
    )
    ms = [m for m in ingested.result.measurements if m.arm == "golden"]  # the experiment name
    c1 = [m for m in ms if m.point == {"concurrency": 1}]
    assert [(m.instance, m.reason) for m in c1] == [
        ("golden@base", "first"),
        ("golden@base", "manual"),
        ("golden@cutedsl", "fresh_server"),
        ("golden@cutedsl", "fresh_server"),
    ]


def test_sweep_run_order_is_numeric_and_failures_are_listed(tmp_path: Path) -> None:
    sweep = tmp_path / "golden"
    shutil.copytree(SWEEP, sweep)
    combo = sweep / "SERVE--base-BENCH--max_concurrency=1"
    run1 = raw(combo / "run=1.json")
    for n in range(2, 11):
        (combo / f"run={n}.json").write_text(json.dumps(dict(run1, run_number=n)))
    (combo / "run=11.failure.json").write_text('{"run_number": 11, "error": "boom"}')
    ingested = load([sweep], "base")
    base1 = cell(ingested.result.measurements, "base", 1)
    assert [m.extra["source"].rsplit("/", 1)[1] for m in base1][-3:] == [
        "run=8.json:1",
        "run=9.json:1",
        "run=10.json:1",
    ]
    assert [m.attempt for m in base1] == list(range(1, 12))
    assert "not ingested (the sweep recorded it as failed)" in ingested.summary()


# ---------------------------------------------------------------------------------- guidellm


def test_guidellm_reports_map_field_by_field() -> None:
    ingested = load([GUIDELLM / "base.json", GUIDELLM / "cutedsl.json"], "base")
    ms = ingested.result.measurements
    assert ingested.result.arms == ["base", "cutedsl"]  # --label arm=base; the file name
    assert [m.point for m in ms[:2]] == [{"concurrency": 1}, {"concurrency": 4}]
    report = raw(GUIDELLM / "base.json")
    for m, bench in zip(ms[:2], report["benchmarks"], strict=True):
        metrics, duration = bench["metrics"], bench["duration"]
        assert m.metrics is not None
        met = m.metrics
        out = metrics["output_token_count"]["successful"]["total_sum"]
        assert met.output_throughput == pytest.approx(out / duration)
        done = metrics["request_totals"]["successful"]
        assert met.request_throughput == pytest.approx(done / duration)
        itl = metrics["inter_token_latency_ms"]["successful"]
        assert met.median_tpot_ms == itl["median"] and met.p99_tpot_ms == itl["percentiles"]["p99"]
        assert met.median_itl_ms is None  # guidellm has no per-chunk gaps
        lat = metrics["request_latency"]["successful"]
        assert met.mean_e2e_latency_ms == pytest.approx(lat["mean"] * 1000)
        ttft = metrics["time_to_first_token_ms"]["successful"]
        assert met.median_ttft_ms == ttft["median"]
    summary = ingested.summary()
    assert "guidellm 0.8.1" in summary
    assert "left out: median_itl_ms: guidellm records no per-chunk gaps" in summary
    assert "median_itl_ms" not in ingested.result.settings.secondary


def test_guidellm_tpot_refused_when_output_lengths_differ(tmp_path: Path) -> None:
    report = raw(GUIDELLM / "cutedsl.json")
    for bench in report["benchmarks"]:
        bench["metrics"]["output_token_count"]["successful"]["min"] = 7.0
    path = tmp_path / "cutedsl.json"
    path.write_text(json.dumps(report))
    ingested = load([GUIDELLM / "base.json", path], "base")
    cut = [m for m in ingested.result.measurements if m.arm == "cutedsl"]
    assert all(m.metrics is not None and m.metrics.median_tpot_ms is None for m in cut)
    assert "output lengths differ between requests" in ingested.summary()


# ------------------------------------------------------------------------------------ mixing


def test_mixing_clients_is_refused_by_default() -> None:
    with pytest.raises(InputError) as err:
        load([VLLM / "base-c1.json", BENCH_SERVING / "fast_decode.jsonl"], "base")
    text = str(err.value)
    assert "base-c1.json was measured by vllm" in text
    assert "fast_decode.jsonl was measured by bench_serving" in text
    assert "--mix-formats" in text


def test_mixing_when_allowed_leaves_out_what_is_defined_differently() -> None:
    ingested = load(
        [VLLM / "base-c1.json", VLLM / "base-c4.json", GUIDELLM / "cutedsl.json"],
        "base",
        mix_formats=True,
    )
    for m in ingested.result.measurements:
        assert m.metrics is not None
        assert m.metrics.median_itl_ms is None and m.metrics.median_tpot_ms is None
        assert m.metrics.median_ttft_ms is not None
    assert ingested.result.settings.secondary == ["median_ttft_ms"]
    assert "left out: median_tpot_ms: not comparable across clients" in ingested.summary()
    assert ingested.client == "vllm + guidellm"


# ------------------------------------------------------------------------------------ aiperf

AIPERF = GOLDEN / "aiperf"


def test_aiperf_artifact_directories_map_field_by_field() -> None:
    ingested = load([AIPERF / "base", AIPERF / "cutedsl"], "base")
    ms = ingested.result.measurements
    assert ingested.result.arms == ["base", "cutedsl"]  # the artifact directories' names
    assert [m.point for m in ms] == [{"concurrency": c} for c in (1, 4, 1, 4)]
    export = raw(AIPERF / "base" / "concurrency_4" / "profile_export_aiperf.json")
    met = ms[1].metrics
    assert met is not None
    duration = export["benchmark_duration"]["avg"]
    assert met.duration == duration
    assert met.output_throughput == pytest.approx(export["total_osl"]["avg"] / duration)
    assert met.request_throughput == pytest.approx(export["request_count"]["avg"] / duration)
    assert met.median_tpot_ms == export["inter_token_latency"]["p50"]
    assert met.median_itl_ms == export["inter_chunk_latency"]["p50"]
    assert met.p99_ttft_ms == export["time_to_first_token"]["p99"]
    assert met.mean_e2e_latency_ms == export["request_latency"]["avg"]
    # aiperf records the asked-for lengths: the workload check applies
    assert (ms[1].extra["random_input_len"], ms[1].extra["random_output_len"]) == (64, 32)
    assert ms[1].client == "aiperf" and "aiperf 0.13.0" in ingested.summary()
    assert "not checked" not in ingested.summary()


def test_aiperf_export_file_and_detection() -> None:
    export = AIPERF / "cutedsl" / "concurrency_1" / "profile_export_aiperf.json"
    assert detect(export) == "aiperf" and detect(AIPERF / "base") == "aiperf"
    run = read(export)[0]
    assert run.record.tag == "cutedsl"  # above aiperf's concurrency_N folder


def test_aiperf_latencies_with_failures_are_left_out(tmp_path: Path) -> None:
    src = AIPERF / "cutedsl" / "concurrency_4" / "profile_export_aiperf.json"
    data = raw(src)
    data["error_request_count"] = {"unit": "requests", "avg": 2.0}
    dest = tmp_path / "cutedsl" / "concurrency_4"
    dest.mkdir(parents=True)
    (dest / src.name).write_text(json.dumps(data))
    ingested = load([AIPERF / "base", tmp_path / "cutedsl"], "base")
    m = cell(ingested.result.measurements, "cutedsl", 4)[0]
    assert m.metrics is not None and m.metrics.failed == 2
    assert m.metrics.median_ttft_ms is None and m.metrics.median_tpot_ms is None
    assert "statistics include failed requests" in ingested.summary()


# ------------------------------------------------------------------------------- genai-bench

GENAI = GOLDEN / "genai_bench"


def test_genai_bench_is_recognised_and_refused_with_the_reason() -> None:
    run_file = next((GENAI / "base").glob("*_num_concurrency_4_*.json"))
    assert detect(run_file) == "genai_bench" and detect(GENAI / "base") == "genai_bench"
    duration = raw(run_file)["aggregated_metrics"]["run_duration"]
    # the stop check runs once a second: the window ends just after a whole second
    assert duration - int(duration) < 0.1
    with pytest.raises(InputError) as err:
        load([GENAI / "base", GENAI / "cutedsl"], "base")
    text = str(err.value)
    version = raw(GENAI / "base" / "experiment_metadata.json")["benchmark_version"]
    assert text.startswith(
        f"{GENAI / 'base'}: genai-bench {version} output; its throughputs divide by"
    )
    assert "once-a-second check" in text and "rerun the comparison with" in text


def test_genai_bench_throughput_hides_what_its_latencies_show() -> None:
    """Why the refusal: at concurrency 4 cutedsl's TPOT is ~10% lower, yet both arms' output
    throughputs agree within 1% (0.01% in these files), as both runs ended at the same whole
    second."""
    base, cut = (
        raw(next((GENAI / arm).glob("*_num_concurrency_4_*.json")))["aggregated_metrics"]
        for arm in ("base", "cutedsl")
    )
    tput = cut["mean_output_throughput_tokens_per_s"] / base["mean_output_throughput_tokens_per_s"]
    tpot = cut["stats"]["tpot"]["p50"] / base["stats"]["tpot"]["p50"]
    assert tput == pytest.approx(1.0, abs=0.01)
    assert tpot < 0.95


# --------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("name", "text", "fmt", "message"),
    [
        ("broken.json", "{not json", None, "not valid JSON (Expecting property name"),
        ("v.json", '{"duration": 1}', "vllm", "missing 'completed'; is this a file written by"),
        ("g.json", '{"benchmarks": [{"duration": 1}]}', "guidellm", "benchmarks[0]: no 'metrics'"),
        (
            "a.json",
            '{"aiperf_version": "0.13.0", "benchmark_duration": {"unit": "ms", "avg": 5}}',
            None,
            "'benchmark_duration' is in 'ms', not 'sec' as aiperf 0.1 to 0.13 write it; "
            "this export (aiperf 0.13.0)",
        ),
        ("x.json", '{"rps": 3}', None, "not a result file ingest knows"),
    ],
)
def test_bad_input_is_one_sentence_naming_file_and_field(
    tmp_path: Path, name: str, text: str, fmt: Any, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load([path, VLLM / "cutedsl-c1.json"], "base", format=fmt)
    assert str(err.value).startswith(f"{path}")
    assert message in str(err.value)


def _nodes(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of a JSON document's keys, two levels deep, the second level's first eight
    keys of each object (a list: its first element); an aiperf export has ~750 otherwise."""
    out: list[tuple[Any, ...]] = []
    if isinstance(data, dict):
        for k, v in list(data.items())[: 8 if prefix else None]:
            out.append((*prefix, k))
            if len(prefix) < 1:
                out += _nodes(v, (*prefix, k))
    elif isinstance(data, list) and data and not prefix:
        out += _nodes(data[0], (0,))
    return out


@pytest.mark.parametrize(
    "path",
    [GUIDELLM / "base.json", GOLDEN / "aiperf" / "base" / "concurrency_1" /
     "profile_export_aiperf.json", VLLM / "base-c1.json"],
    ids=lambda p: p.parent.name + "/" + p.name,
)  # fmt: skip
def test_a_field_of_another_type_is_one_sentence_never_a_traceback(
    path: Path, tmp_path: Path
) -> None:
    """Every key (two levels deep) set to a string, then a number, where the client writes
    something else: the file is read or refused in one sentence naming it. A guidellm report
    whose `config` was a number, or an aiperf export whose `input_config` was a string,
    raised AttributeError out of the reader."""
    data = json.loads(path.read_text())
    changed = tmp_path / path.name
    for keys in _nodes(data):
        for value in ("x", -1):
            copy = json.loads(json.dumps(data))
            node = copy
            for k in keys[:-1]:
                node = node[k]
            node[keys[-1]] = value
            changed.write_text(json.dumps(copy))
            try:
                read(changed)
            except InputError as err:
                assert "\n" not in str(err) and str(changed) in str(err), (keys, value)

"""What files from the wild do to a verdict, on the golden files rewritten as other versions
and setups write them (each test says which fields it changes and why, and checks the
numbers against the untouched file): older layouts, windows that outlast the requests, float
token sums, runs of other models or with speculative decoding, points one arm lacks, and the
messages each client's user reads. The real third-party files are in test_ingest_corpus.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrixrun.core.errors import InputError
from matrixrun.ingest.command import ingest
from matrixrun.ingest.formats import load, read

GOLDEN = Path(__file__).parent / "golden"
VLLM = GOLDEN / "vllm"
GUIDELLM = GOLDEN / "guidellm"
AIPERF = GOLDEN / "aiperf"
STEADY = GOLDEN / "bench_serving" / "steady.jsonl"


def raw(path: Path) -> Any:
    return json.loads(path.read_text())


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


# ------------------------------------------------------------------------- older layouts


def test_older_sglang_lines_get_throughputs_from_counts_and_duration(tmp_path: Path) -> None:
    """Late-2024 bench_serving wrote no request_throughput, input_throughput or
    total_throughput: the line is still detected and read, those three computed as
    bench_serving defines them, and the summary says so."""
    line = json.loads(STEADY.read_text().splitlines()[0])
    for key in ("request_throughput", "input_throughput", "total_throughput"):
        line.pop(key)
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(line) + "\n")
    assert read(old)[0].format == "bench_serving"
    got = read(old)[0].record.metrics
    full = read(STEADY)[0].record.metrics
    for key in ("request_throughput", "input_throughput", "total_throughput"):
        assert getattr(got, key) == pytest.approx(getattr(full, key), rel=1e-9), key
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({**line, "tag": "other"}) + "\n")
    summary = load([old, other], "steady").summary()
    assert "computed: request_throughput = completed / duration" in summary


def test_a_guidellm_window_that_outlasts_its_requests_is_replaced_by_their_span(
    tmp_path: Path,
) -> None:
    """guidellm 0.5 can write its nominal measurement window as `duration`, minutes after
    the last request ended: throughput and concurrency come from the requests' span
    instead (here the golden report with its window stretched by 205 s)."""
    data = raw(GUIDELLM / "base.json")
    bench = data["benchmarks"][0]
    true_duration = bench["duration"]
    bench["duration"] += 205.0
    bench["scheduler_metrics"]["measure_end_time"] += 205.0
    stretched = write(tmp_path / "stretched.json", data)
    got = read(stretched)[0]
    want = read(GUIDELLM / "base.json")[0].record.metrics
    assert got.record.metrics.duration == pytest.approx(true_duration, rel=1e-9)
    assert got.record.metrics.output_throughput == pytest.approx(want.output_throughput)
    assert got.record.metrics.concurrency == pytest.approx(want.concurrency)
    assert "measurement window" in got.derived["duration"]


def test_float_token_sums_are_counts(tmp_path: Path) -> None:
    data = raw(GUIDELLM / "base.json")
    total = data["benchmarks"][0]["metrics"]["output_token_count"]["successful"]
    whole = total["total_sum"]
    total["total_sum"] = whole - 1.7e-12  # what guidellm wrote: 1748.9999999999998
    got = read(write(tmp_path / "f.json", data))[0].record.metrics
    assert got.total_output_tokens == round(whole)
    total["total_sum"] = whole + 0.5  # half a token is not a count
    with pytest.raises(InputError, match="not a count"):
        read(write(tmp_path / "g.json", data))


def test_aiperf_without_total_isl_takes_the_per_request_average(tmp_path: Path) -> None:
    """aiperf before 0.13 names its phase instead of giving it a kind, and writes no
    total_isl for some datasets: the totals are the per-request average × request count."""
    src = AIPERF / "base" / "concurrency_4" / "profile_export_aiperf.json"
    data = raw(src)
    for phase in data["input_config"]["phases"]:
        phase["name"] = phase.pop("kind")
    data.pop("total_isl")
    got = read(write(tmp_path / "base" / "concurrency_4" / src.name, data))[0]
    want = read(src)[0].record
    assert got.record.metrics.total_input_tokens == want.metrics.total_input_tokens
    assert got.record.max_concurrency == want.max_concurrency == 4
    assert "this aiperf version wrote no total_isl" in got.derived["total_input_tokens"]


def test_aiperf_step_folders_are_points_and_setups_stay_apart(tmp_path: Path) -> None:
    """Exports laid out as GPU/workload/cN: `c1`, `c4` are sweep points (their names are
    the runs' concurrency), and the two GPUs' `agent` folders are two arms, never one
    arm's repeats."""
    for gpu in ("5090", "h200"):
        for c in (1, 4):
            src = AIPERF / "base" / f"concurrency_{c}" / "profile_export_aiperf.json"
            write(tmp_path / gpu / "agent" / f"c{c}" / src.name, raw(src))
    ingested = load([tmp_path / "5090", tmp_path / "h200"], "5090/agent")
    assert ingested.result.arms == ["5090/agent", "h200/agent"]
    assert sorted(m.point["concurrency"] for m in ingested.result.measurements) == [1, 1, 4, 4]
    assert {m.attempt for m in ingested.result.measurements} == {1}


# -------------------------------------------------------------- what a verdict must not hide


def _vllm(tmp_path: Path, name: str, **changes: Any) -> Path:
    data = raw(VLLM / name)
    data.update(changes)
    return write(tmp_path / name, data)


def test_arms_of_different_models_are_refused_or_said_first(tmp_path: Path) -> None:
    other = _vllm(tmp_path, "cutedsl-c1.json", model_id="Qwen/Qwen3.5-27B")
    with pytest.raises(InputError) as err:
        load([VLLM / "base-c1.json", other], "base")
    text = str(err.value)
    assert "differ in model" in text and "Qwen/Qwen3.5-27B" in text
    assert "--allow-difference model" in text
    out = ingest(
        [str(VLLM / "base-c1.json"), str(other)],
        baseline="base",
        out=tmp_path / "run",
        allow_differences=["model"],
    )
    assert out is not None
    head = (out / "report.md").read_text().split("**Verdict")[0]
    assert "the arms differ in model" in head and "Qwen/Qwen3.5-27B" in head


def test_speculative_decoding_leaves_itl_out_and_the_report_says_why(tmp_path: Path) -> None:
    spec = _vllm(tmp_path, "cutedsl-c1.json", spec_decode_acceptance_length=2.9)
    ingested = load([VLLM / "base-c1.json", spec], "base")
    assert all(m.metrics.median_itl_ms is None for m in ingested.result.measurements if m.metrics)
    assert "median_itl_ms" not in ingested.result.settings.secondary
    out = ingest([str(VLLM / "base-c1.json"), str(spec)], baseline="base", out=tmp_path / "r")
    assert out is not None
    head = (out / "report.md").read_text().split("**Verdict")[0]
    assert "speculative decoding in `cutedsl`" in head and "ITL is left out" in head
    assert json.loads((out / "ingest.json").read_text())["caveats"][0]["kind"] == "spec_decode"


def test_points_only_one_arm_ran_are_listed(tmp_path: Path) -> None:
    files = [str(VLLM / n) for n in ("base-c1.json", "base-c4.json", "cutedsl-c1.json")]
    out = ingest(files, baseline="base", out=tmp_path / "run")
    assert out is not None
    head = (out / "report.md").read_text().split("**Verdict")[0]
    assert "concurrency 4 (only `base`)" in head


def test_a_run_whose_requests_all_failed_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """Such a run was a failed measurement counted against its arm (its failed requests then
    listed in the failures section); it is refused now, as every other layout refuses one
    (issue 47), and no run directory is left behind."""
    failed = _vllm(tmp_path, "cutedsl-c4.json", completed=0, failed=8, request_throughput=0.0,
                   output_throughput=0.0, total_token_throughput=0.0)  # fmt: skip
    files = [str(VLLM / "base-c1.json"), str(VLLM / "base-c4.json"), str(VLLM / "cutedsl-c1.json")]
    with pytest.raises(InputError) as err:
        ingest([*files, str(failed)], baseline="base", out=tmp_path / "run")
    assert str(err.value).startswith(f"{failed}: every request failed (completed 0, failed 8)")
    assert not (tmp_path / "run").exists()


def test_a_rate_axis_names_its_value_once(tmp_path: Path) -> None:
    files = [str(VLLM / "base-c1.json"), str(VLLM / "cutedsl-c1.json")]
    out = ingest(files, baseline="base", out=tmp_path / "run", axis_field="request_rate")
    assert out is not None
    report = (out / "report.md").read_text()
    assert "request_rate request_rate" not in report and "at request_rate inf" in report


# -------------------------------------------------------------------- choosing the metrics


def test_metrics_choose_the_primary_and_the_secondaries(tmp_path: Path) -> None:
    """p99s can be chosen; a secondary no file holds (vLLM wrote no e2el percentiles here)
    is left out with the reason, not silently."""
    files = [str(VLLM / "base-c1.json"), str(VLLM / "cutedsl-c1.json")]
    shown: list[str] = []
    out = ingest(files, baseline="base", out=tmp_path / "run", show=shown.append,
                 metrics="p99_ttft_ms,median_tpot_ms,p99_tpot_ms,p99_e2e_latency_ms")  # fmt: skip
    assert out is not None
    analysis = json.loads((out / "settings.json").read_text())["analysis"]
    assert analysis["primary"] == "p99_ttft_ms"
    assert analysis["secondary"] == ["median_tpot_ms", "p99_tpot_ms"]
    assert "left out: p99_e2e_latency_ms: no input has it" in shown[0]
    assert "Verdict on `p99_ttft_ms`" in (out / "report.md").read_text()
    with pytest.raises(InputError, match="did you mean 'p99_ttft_ms'"):
        ingest(files, baseline="base", out=tmp_path / "r2", metrics="p99_ttft")


# ---------------------------------------------------------------- each client's own words


def test_a_vllm_user_is_told_about_label_not_tag() -> None:
    with pytest.raises(InputError) as err:
        load([VLLM / "base-c1.json", VLLM / "base-c4.json"], "base")
    text = str(err.value)
    assert "--label" in text and "--tag" not in text and "bench_serving" not in text


def test_a_guidellm_rate_profile_gets_guidellm_advice(tmp_path: Path) -> None:
    data = raw(GUIDELLM / "base.json")
    for bench in data["benchmarks"]:
        bench["config"]["strategy"] = {"type_": "constant", "rate": 2.0}
    with pytest.raises(InputError) as err:
        load([write(tmp_path / "rate.json", data), GUIDELLM / "cutedsl.json"], "base")
    text = str(err.value)
    assert "rate or throughput profile" in text and "--axis-field request_rate" in text
    assert "bench_serving" not in text and "every benchmark has" in text


def test_an_old_sglang_rate_sweep_finds_its_axis_from_the_files(tmp_path: Path) -> None:
    """Late-2024 bench_serving rate sweeps: max_concurrency null on every line and
    request_rate 1..16; the axis is the one field that varies, found without --axis-field,
    and a second varying field makes ingest ask instead of guessing."""
    line = json.loads(STEADY.read_text().splitlines()[0])
    paths = []
    for arm in ("base", "cand"):
        lines = [
            {**line, "tag": arm, "max_concurrency": None, "request_rate": r} for r in (1, 4, 16)
        ]
        path = tmp_path / f"{arm}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        paths.append(path)
    got = load(paths, "base")
    assert got.result.settings.axis == "request_rate"
    assert {m.point["request_rate"] for m in got.result.measurements} == {1.0, 4.0, 16.0}
    assert "axis found from the files: request_rate" in got.summary()
    mixed = [{**line, "tag": "cand", "max_concurrency": None, "request_rate": r,
              "random_input_len": n} for r, n in ((1, 128), (4, 256))]  # fmt: skip
    paths[1].write_text("".join(json.dumps(x) + "\n" for x in mixed))
    with pytest.raises(InputError, match="pass --axis-field request_rate"):
        load(paths, "base")

"""bench_serving files → Measurements, on the real golden files, and on to a verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from matrixrun.analysis import analyse
from matrixrun.core.errors import InputError
from matrixrun.core.measurement import Measurement
from matrixrun.ingest.records import DEFAULT_SECONDARY, measurements_from_files
from matrixrun.report import wording
from matrixrun.report.sections import noise

GOLDEN = Path(__file__).parent / "golden" / "bench_serving"
FILES = [GOLDEN / f"{n}.jsonl" for n in ("fast_prefill", "fast_decode", "steady")]


def lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(t) for t in (GOLDEN / f"{name}.jsonl").read_text().splitlines()]


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_golden_files_become_measurements() -> None:
    result = measurements_from_files(FILES, "fast_prefill")
    ms = result.measurements
    assert result.arms == ["fast_prefill", "fast_decode", "steady"]
    assert len(ms) == len(result.records) == 7
    assert [(m.arm, m.point) for m in ms[:3]] == [
        ("fast_prefill", {"concurrency": 1}),
        ("fast_prefill", {"concurrency": 8}),
        ("fast_prefill", {"concurrency": 64}),
    ]
    for m in ms:
        assert m.client == "bench_serving" and not m.simulated
        assert (m.attempt, m.reason, m.instance) == (1, "first", f"{m.arm}#1")
        assert m.extra["request_rate"] == "inf"  # results.jsonl is strict JSON
        line = {1: 1, 8: 2, 64: 3, 4: 1}[m.point["concurrency"]]
        assert m.extra["source"] == f"{GOLDEN / m.arm}.jsonl:{line}"
        assert Measurement.model_validate_json(m.model_dump_json()) == m
    # both arms at concurrency 8 share the point, not the cell
    c8 = [m for m in ms if m.point == {"concurrency": 8}]
    assert len({m.point_id for m in c8}) == 1 and len({m.cell_id for m in c8}) == 2
    assert len({m.point_id for m in ms}) == 4  # 1, 8, 64 and steady's 4
    s = result.settings
    assert (s.baseline, s.candidates, s.margin, s.axis) == (
        "fast_prefill",
        ["fast_decode", "steady"],
        0.03,
        "concurrency",
    )
    assert s.primary == "output_throughput" and s.secondary == DEFAULT_SECONDARY


def test_ids_are_stable_across_ingests() -> None:
    a = measurements_from_files(FILES, "fast_prefill").measurements
    b = measurements_from_files(FILES, "fast_prefill").measurements
    assert [(m.point_id, m.cell_id) for m in a] == [(m.point_id, m.cell_id) for m in b]


def test_golden_files_to_verdict_with_a_prior() -> None:
    """fast_decode: 15 ms vs 20 ms per token (throughput up ~26%, TPOT −25%), 90 ms vs 50 ms
    TTFT (worse). With a declared 1% prior every cell is decided; steady shares no point."""
    result = measurements_from_files(FILES, "fast_prefill", noise=0.01)
    v = analyse(result.measurements, result.settings)
    decode = v.slices[0].candidates[0]
    by_metric = {m.metric: m for m in decode.metrics}
    assert by_metric["output_throughput"].overall.verdict == "better"
    assert by_metric["median_tpot_ms"].overall.verdict == "better"
    assert by_metric["median_ttft_ms"].overall.verdict == "worse"
    tpot = [c.change for s in by_metric["median_tpot_ms"].series for c in s.cells]
    assert tpot == pytest.approx([-0.25] * 3, abs=0.01)
    assert v.overall["steady"].verdict == "undecided"
    assert any("steady shares no measured point" in noise.caveat(c, v) for c in v.caveats)


def test_without_a_prior_single_runs_are_inconclusive() -> None:
    result = measurements_from_files(FILES[:2], "fast_prefill")
    v = analyse(result.measurements, result.settings)
    assert v.overall["fast_decode"].verdict == "undecided"
    assert "no noise estimate" in wording.overall(v.overall["fast_decode"], v.settings)


@pytest.mark.parametrize(
    ("servers", "instance2", "reason2"),
    [
        ("same", "fast_decode#1", "manual"),
        ("fresh", "fast_decode#2", "fresh_server"),
    ],
)
def test_repeats_in_file_order(tmp_path: Path, servers: Any, instance2: str, reason2: str) -> None:
    decode = lines("fast_decode")
    rerun = dict(decode[1], output_throughput=decode[1]["output_throughput"] * 1.01)
    path = write(tmp_path / "fast_decode.jsonl", [*decode, rerun])
    result = measurements_from_files([FILES[0], path], "fast_prefill", servers=servers)
    reps = [
        m for m in result.measurements if m.arm == "fast_decode" and m.point["concurrency"] == 8
    ]
    assert [(m.attempt, m.instance, m.reason) for m in reps] == [
        (1, "fast_decode#1", "first"),
        (2, instance2, reason2),
    ]
    assert reps[0].cell_id == reps[1].cell_id
    v = analyse(result.measurements, result.settings)
    assert v.sigma[0].source == ("warm" if servers == "same" else "fresh_server")


def test_one_file_per_server_launch(tmp_path: Path) -> None:
    first = write(tmp_path / "run1.jsonl", lines("fast_decode"))
    second = write(tmp_path / "run2.jsonl", lines("fast_decode"))
    result = measurements_from_files([FILES[0], first, second], "fast_prefill", servers="per_file")
    decode = [m for m in result.measurements if m.arm == "fast_decode"]
    assert {m.instance for m in decode} == {"fast_decode@run1", "fast_decode@run2"}
    assert [m.reason for m in decode] == ["first"] * 3 + ["fresh_server"] * 3


def test_arm_from_file_name_when_no_tag(tmp_path: Path) -> None:
    untagged = [{k: v for k, v in r.items() if k != "tag"} for r in lines("fast_decode")]
    path = write(tmp_path / "cutedsl.jsonl", untagged)
    result = measurements_from_files([FILES[0], path], "fast_prefill")
    assert result.arms == ["fast_prefill", "cutedsl"]


def test_arm_field_reaches_into_server_info(tmp_path: Path) -> None:
    recs = lines("fast_decode")
    for r in recs:
        r["server_info"]["moe_runner_backend"] = "flashinfer_cutedsl"
    path = write(tmp_path / "x.jsonl", recs)
    base = lines("fast_prefill")
    for r in base:
        r["server_info"]["moe_runner_backend"] = "flashinfer_cutlass"
    bpath = write(tmp_path / "y.jsonl", base)
    result = measurements_from_files(
        [bpath, path], "flashinfer_cutlass", arm_field="server_info.moe_runner_backend"
    )
    assert result.arms == ["flashinfer_cutlass", "flashinfer_cutedsl"]


def test_axis_field_and_extra_point_fields(tmp_path: Path) -> None:
    base, cand = lines("fast_prefill"), lines("fast_decode")
    for r in base + cand:
        r["max_concurrency"] = 8
    for i, r in enumerate(base + cand):
        r["random_input_len"] = [128, 256, 512][i % 3]
    paths = [write(tmp_path / "a.jsonl", base), write(tmp_path / "b.jsonl", cand)]
    result = measurements_from_files(paths, "fast_prefill", axis_field="random_input_len")
    assert result.settings.axis == "input_len"
    assert [m.point for m in result.measurements[:3]] == [{"input_len": n} for n in (128, 256, 512)]
    both = measurements_from_files(paths, "fast_prefill", point_fields=["random_input_len"])
    assert both.measurements[0].point == {"concurrency": 8, "input_len": 128}


def test_differing_workload_at_one_point_is_refused(tmp_path: Path) -> None:
    cand = lines("fast_decode")
    cand[1]["random_input_len"] = 1024
    path = write(tmp_path / "fast_decode.jsonl", cand)
    with pytest.raises(InputError) as err:
        measurements_from_files([FILES[0], path], "fast_prefill")
    text = str(err.value)
    assert "fast_prefill.jsonl:2 and " in text and "fast_decode.jsonl:2" in text
    assert "random_input_len differs (128 vs 1024)" in text
    assert "--point-field random_input_len" in text


@pytest.mark.parametrize(
    ("baseline", "message"),
    [
        ("fast_prefil", "did you mean 'fast_prefill'?"),
        ("cutlass", "pass --baseline with one of them"),
    ],
)
def test_unknown_baseline(baseline: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        measurements_from_files(FILES, baseline)


def test_one_arm_is_not_a_comparison() -> None:
    with pytest.raises(InputError, match="only one arm"):
        measurements_from_files(FILES[:1], "fast_prefill")


def test_missing_axis_field(tmp_path: Path) -> None:
    recs = lines("fast_decode")
    recs[2]["max_concurrency"] = None
    path = write(tmp_path / "fast_decode.jsonl", recs)
    with pytest.raises(InputError, match=r"fast_decode\.jsonl:3: no 'max_concurrency' field"):
        measurements_from_files([FILES[0], path], "fast_prefill")


def test_copy_of_the_golden_files_matches_shared_when_present() -> None:
    shared = Path(__file__).parents[2] / "shared" / "golden" / "bench_serving"
    if not shared.is_dir():
        pytest.skip("no shared/ beside the checkout")
    for f in FILES:
        assert f.read_bytes() == (shared / f.name).read_bytes()

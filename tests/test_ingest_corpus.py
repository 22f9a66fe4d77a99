"""Every file of the corpus of real third-party results (tests/corpus/, PROVENANCE.json):
result files people committed to public repositories, written by the real clients.

Each file is either read, with every number checked against the raw file through the field
mapping docs/ingest.md documents (computed here from the raw JSON, independently of the
readers), or refused in one sentence that names the client, its version and what to do.
The files are kept byte for byte as committed: their git blob ids are in PROVENANCE.json.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from matrixrun.core.errors import InputError
from matrixrun.core.metrics import METRIC_NAMES
from matrixrun.ingest.formats import detect, load, read

CORPUS = Path(__file__).parent / "corpus"
PROVENANCE = json.loads((CORPUS / "PROVENANCE.json").read_text())
ENTRIES: list[dict[str, Any]] = PROVENANCE["files"]
#: Licenses that allow keeping a copy in this repository (SPDX ids).
REDISTRIBUTABLE = {"Apache-2.0", "MIT", "BSD-2-Clause", "BSD-3-Clause", "ISC", "CC-BY-4.0"}
STATS = {"mean": "mean", "median": "median", "std": "std_dev"}
PCTS = ("p90", "p95", "p99")


def raw(entry: dict[str, Any]) -> Any:
    return json.loads((CORPUS / entry["file"]).read_text())


def by_expectation(kind: str) -> list[Any]:
    return [pytest.param(e, id=e["file"]) for e in ENTRIES if e["expect"] == kind]


# ------------------------------------------------------------------------- the corpus itself


def test_every_file_has_provenance_and_a_license_that_allows_the_copy() -> None:
    listed = {e["file"] for e in ENTRIES}
    on_disk = {
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name != "PROVENANCE.json"
    }
    assert on_disk == listed
    for e in ENTRIES:
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]), e["file"]
        assert e["license"] in REDISTRIBUTABLE, e["file"]
        assert e["repo"].count("/") == 1 and e["path"] and e["client"] and e["client_version"]
        assert e["expect"] in ("read", "refused")


@pytest.mark.parametrize("entry", [pytest.param(e, id=e["file"]) for e in ENTRIES])
def test_files_are_as_their_authors_committed_them(entry: dict[str, Any]) -> None:
    data = (CORPUS / entry["file"]).read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert blob == entry["blob"]


# ----------------------------------------------------------------- expected values, per client


def aiperf_expected(d: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """docs/ingest.md's aiperf table applied to the raw export: (metrics, point)."""
    if "records" in d:  # the early layout: metrics under records, the load under loadgen
        load = d["input_config"]["loadgen"]
        d = {("time_to_first_token" if k == "ttft" else k): v for k, v in d["records"].items()}
        d["input_config"] = {"phases": [{"name": "profiling", "concurrency": load["concurrency"]}]}
    duration = d["benchmark_duration"]["avg"]
    n = d["request_count"]["avg"]
    failed = (d.get("error_request_count") or {}).get("avg", 0)
    total_in = d["total_isl"]["avg"] if "total_isl" in d else d["input_sequence_length"]["avg"] * n
    total_out = (
        d["total_osl"]["avg"] if "total_osl" in d else d["output_sequence_length"]["avg"] * n
    )
    m: dict[str, Any] = {
        "duration": duration,
        "completed": n,
        "failed": failed,
        "total_input_tokens": round(total_in),
        "total_output_tokens": round(total_out),
        "request_throughput": n / duration,
        "input_throughput": total_in / duration,
        "output_throughput": total_out / duration,
        "total_throughput": (total_in + total_out) / duration,
    }
    keys = {"mean": "avg", "median": "p50", "std": "std", "p90": "p90", "p95": "p95", "p99": "p99"}
    families = {
        "ttft": "time_to_first_token",
        "tpot": "inter_token_latency",
        "itl": "inter_chunk_latency",
        "e2e_latency": "request_latency",
    }
    for ours, theirs in families.items():
        # with failures, the families aiperf computes over failed requests too are left out
        kept = theirs in d and (not failed or ours == "itl")
        for stat, key in keys.items():
            m[f"{stat}_{ours}_ms"] = d[theirs].get(key) if kept else None
    mean_e2e = m["mean_e2e_latency_ms"]
    m["concurrency"] = None if mean_e2e is None else mean_e2e / 1000 * n / duration
    phase = next(
        p for p in d["input_config"]["phases"] if "profiling" in (p.get("kind"), p.get("name"))
    )
    return m, {"concurrency": phase["concurrency"]}


def _dist(d: dict[str, Any], scale: float = 1.0) -> dict[str, float]:
    out = {ours: d[theirs] * scale for ours, theirs in STATS.items()}
    out.update({p: d["percentiles"][p] * scale for p in PCTS})
    return out


def guidellm_expected(b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """docs/ingest.md's guidellm table applied to one raw benchmark: (metrics, point)."""
    met = b["metrics"]
    duration = b["duration"]
    sm = b.get("scheduler_metrics")
    if sm:  # the requests' span where the window outlasts them
        span = min(sm["measure_end_time"], sm["request_end_time"]) - max(
            sm["measure_start_time"], sm["request_start_time"]
        )
        duration = span if abs(span - duration) > 0.005 * duration else duration
    totals = met.get("request_totals") or b["request_totals"]  # beside the metrics before 0.4
    n = totals["successful"]
    total_in = met["prompt_token_count"]["successful"]["total_sum"]
    total_out = met["output_token_count"]["successful"]["total_sum"]
    m: dict[str, Any] = {
        "duration": duration,
        "completed": n,
        "failed": totals["errored"],
        "total_input_tokens": round(total_in),
        "total_output_tokens": round(total_out),
        "request_throughput": n / duration,
        "input_throughput": total_in / duration,
        "output_throughput": total_out / duration,
        "total_throughput": (total_in + total_out) / duration,
    }
    for stat, v in _dist(met["time_to_first_token_ms"]["successful"]).items():
        m[f"{stat}_ttft_ms"] = v
    for stat, v in _dist(met["request_latency"]["successful"], 1000.0).items():
        m[f"{stat}_e2e_latency_ms"] = v
    out = met["output_token_count"]["successful"]
    equal = out["min"] == out["max"]
    for stat, v in _dist(met["inter_token_latency_ms"]["successful"]).items():
        m[f"{stat}_tpot_ms"] = v if equal else None
    m["concurrency"] = m["mean_e2e_latency_ms"] / 1000 * n / duration
    strategy = (b.get("config") or b.get("args") or {})["strategy"]
    point = {"concurrency": 1 if strategy["type_"] == "synchronous" else strategy.get("streams")}
    return m, point


def expected_runs(entry: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    d = raw(entry)
    if entry["client"] == "aiperf":
        return [aiperf_expected(d)]
    if entry["client"] == "guidellm":
        return [guidellm_expected(b) for b in d["benchmarks"]]
    raise AssertionError(f"no expected mapping for {entry['client']}")


# ------------------------------------------------------------------------------ the readings


@pytest.mark.parametrize("entry", by_expectation("read"))
def test_read_files_match_the_source_field_by_field(entry: dict[str, Any]) -> None:
    runs = read(CORPUS / entry["file"])
    expected = expected_runs(entry)
    assert len(runs) == len(expected)
    for run, (metrics, point) in zip(runs, expected, strict=True):
        got = run.record.metrics.model_dump()
        for name in METRIC_NAMES:
            want = metrics.get(name)
            if want is None:
                assert got[name] is None, name
            else:
                assert got[name] == pytest.approx(want, rel=1e-12), name
        for key in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
            assert got[key] == metrics[key], key
        assert {"concurrency": run.record.max_concurrency} == point
        assert run.tool.startswith(entry["client"])


@pytest.mark.parametrize("entry", by_expectation("refused"))
def test_refused_files_say_client_version_and_what_to_do(entry: dict[str, Any]) -> None:
    path = CORPUS / entry["file"]
    for given in (path, path.parent):  # the file, and its folder as a person would pass it
        with pytest.raises(InputError) as err:
            load([given], "baseline")
        text = str(err.value)
        assert "\n" not in text and text.startswith(str(given))
        assert entry["client"] in text and entry["client_version"] in text
        assert re.search(r"\b(rerun|pass|ingest|leave)\b", text)


def test_detection_names_every_read_file_by_its_client() -> None:
    for e in ENTRIES:
        if e["expect"] == "read":
            assert detect(CORPUS / e["file"]) == e["client"]


def test_two_real_aiperf_exports_compare_as_two_arms() -> None:
    """The audit's two exports of one benchmark (plain and through the operator) are two
    arms at one point, nothing refused: same model, same aiperf version."""
    files = [CORPUS / e["file"] for e in ENTRIES if "baseline-chat" in e["file"]]
    ingested = load(files, "bare")
    assert ingested.result.arms == ["bare", "operator"]
    assert [m.point for m in ingested.result.measurements] == [{"concurrency": 4}] * 2
    assert ingested.caveats == []
    summary = ingested.summary()
    assert "aiperf 0.8.0" in summary and "0/0" not in summary


def test_real_exports_of_different_models_are_refused() -> None:
    """aiperf's gpt-oss-20b example against the audit's mock model: refused in one sentence
    naming both models, unless the difference is allowed (then it is a caveat)."""
    early = CORPUS / "ai-dynamo+aiperf/examples/artifacts/run1/profile_export_aiperf.json"
    audit = CORPUS / "ai-dynamo+aiperf/tests/_artifacts/audit/baseline-chat/bare"
    with pytest.raises(InputError) as err:
        load([early, audit / "profile_export_aiperf.json"], "run1")
    assert "openai/gpt-oss-20b vs mock-model" in str(err.value)
    allowed = load(
        [early, audit / "profile_export_aiperf.json"], "run1", allow_differences=["model"]
    )
    assert allowed.caveats[0]["kind"] == "differs" and allowed.caveats[0]["field"] == "model"

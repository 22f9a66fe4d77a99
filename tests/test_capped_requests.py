"""Cut and unsent requests counted as what they are (issue 44): a request the cell's time cap
cut, or one that never left the client, is a failure with its reason; a run that lost any is
not compared (measured again once where the policy may); a server silent while requests wait
on it is named (`load/idle.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_load_client import config, fixed_server

from matrixrun.core.measurement import Failure, Measurement
from matrixrun.core.metrics import Metrics
from matrixrun.core.timescale import TimeScale
from matrixrun.load.cell import measure_cell
from matrixrun.load.client import CUT, WAITED
from matrixrun.load.idle import idle_gaps, threshold
from matrixrun.load.records import RequestRecord

pytestmark = pytest.mark.timeout(120)


def rec(i: int, start: float, chunks: list[float], e2e: float, error: str = "") -> RequestRecord:
    return RequestRecord(
        index=i, start=start, e2e=e2e, chunk_times=chunks, chunk_tokens=[1] * len(chunks),
        prompt_tokens=8, output_tokens=len(chunks), error=error, ttft=chunks[0] if chunks else None,
    )  # fmt: skip


# ------------------------------------------------------------------------ idle gaps (pure)


def test_a_silence_with_requests_outstanding_is_found_with_its_length_and_count() -> None:
    # two requests stream until 1 s; two more sent at 0.5 s get one token, then nothing until
    # the cap cuts them at 10 s: silent from 1.0 s (the last byte) to 10 s, 2 outstanding
    records = [
        rec(0, 0.0, [0.1, 0.5, 1.0], 1.0),
        rec(1, 0.0, [0.1, 0.5, 0.9], 0.9),
        rec(2, 0.5, [0.05], 9.5, CUT),
        rec(3, 0.5, [0.05], 9.5, CUT),
        rec(4, 10.0, [], 0.0, WAITED),  # never sent: not outstanding at the server
    ]
    gaps = idle_gaps(records, 3.0)
    assert len(gaps) == 1
    assert gaps[0].at == pytest.approx(1.0) and gaps[0].length == pytest.approx(9.0)
    assert gaps[0].outstanding == 2


def test_a_server_that_keeps_streaming_or_has_nothing_to_do_is_not_idle() -> None:
    streaming = [rec(i, 0.0, [0.5 * k for k in range(1, 21)], 10.0) for i in range(4)]
    assert idle_gaps(streaming, 1.0) == []
    # quiet between two requests, with none outstanding: the client's pause, not the server's
    apart = [rec(0, 0.0, [0.1, 0.2], 0.2), rec(1, 8.0, [0.1, 0.2], 0.2)]
    assert idle_gaps(apart, 1.0) == []


def test_the_threshold_grows_with_the_cell() -> None:
    assert threshold([rec(0, 0.0, [1.0], 10.0)], 3.0) == 3.0
    assert threshold([rec(0, 0.0, [1.0], 100.0)], 3.0) == pytest.approx(10.0)


# ------------------------------------------------------------------ a cell against a server


def test_a_cell_whose_server_holds_requests_is_a_failed_run_with_reasons_and_its_silence() -> None:
    """Every fourth request stalls after one token (the H200's lost requests): 12 of 24 finish,
    4 are cut in flight, 8 never sent. The run is a failure (`Failure.CAPPED`: its throughput
    would be over the survivors) that keeps its metrics for the counts, the reasons by count,
    and the server's silence before the cap, in modelled time (scale 10: a 20 s cap is 2 s)."""
    scale = TimeScale(10.0)
    with fixed_server("--ttft-ms", "20", "--itl-ms", "5", "--stall-every", "4") as url:
        cfg = config(url, num_prompts=24, time_cap_s=20.0, request_timeout_s=200.0)
        run = measure_cell(cfg, scale, cell_timeout_s=20.0)
    assert run.failure == Failure.CAPPED and run.metrics is not None
    assert (run.metrics.completed, run.metrics.failed) == (12, 12)
    assert run.error is not None and "4 requests in flight cut and 8 never sent" in run.error
    assert "12 of 24 requests finished" in run.error and "not compared" in run.error
    capped = run.extra["capped"]
    assert (capped["cut_requests"], capped["never_sent"], capped["completed"]) == (4, 8, 12)
    assert run.extra["request_errors"] == {WAITED: 8, CUT: 4}
    gaps = run.extra["idle_gaps"]
    assert len(gaps) == 1 and gaps[0]["outstanding"] == 4
    # silent from the last finished request (about 1 s of server time) to the cap (2 s)
    assert 5.0 < gaps[0]["for_s"] <= 20.0
    assert "the server sent nothing for" in run.error


def test_a_cell_that_fits_its_cap_is_not_touched() -> None:
    with fixed_server("--ttft-ms", "20", "--itl-ms", "5") as url:
        run = measure_cell(config(url, num_prompts=8, time_cap_s=60.0), TimeScale(1.0), 60.0)
    assert run.error is None and run.failure is None
    assert not {"capped", "idle_gaps", "request_errors"} & set(run.extra)


# ------------------------------------------------------------- analysis, report and policy


def measurement(arm: str, attempt: int = 1, *, capped: bool = False, **kw: Any) -> Measurement:
    """A measurement of `arm` at concurrency 16: 16 requests done at ~100 tok/s, or (capped)
    4 done and 12 cut as the H200 run had it."""
    done, failed = (4, 12) if capped else (16, 0)
    extra: dict[str, Any] = {}
    error = failure = None
    if capped:
        extra = {
            "capped": {"after_s": 60.0, "cut_requests": 12, "never_sent": 0, "completed": 4,
                       "total": 16},
            "request_errors": {CUT: 12},
            "idle_gaps": [{"at_s": 5.0, "for_s": 55.0, "outstanding": 12}],
        }  # fmt: skip
        error, failure = "the cell's time cap came first: … not compared", Failure.CAPPED
    metrics = Metrics(
        duration=10.0, completed=done, failed=failed, total_input_tokens=100 * done,
        total_output_tokens=100 * done, request_throughput=done / 10, input_throughput=10 * done,
        output_throughput=45.5 if capped else 100.0 + attempt, total_throughput=20 * done,
    )  # fmt: skip
    return Measurement(
        cell_id=f"{arm}-c16", point_id="c16", arm=arm, group_id=arm, point={"concurrency": 16},
        attempt=attempt, instance=f"{arm}#{attempt}", metrics=metrics, error=error,
        failure=failure, extra=extra, **kw,
    )  # fmt: skip


def test_a_capped_run_is_not_compared_and_its_cut_requests_count_as_failed() -> None:
    from matrixrun.analysis.samples import arm_sample

    sample = arm_sample("cb", [measurement("cb", capped=True)], "output_throughput")
    assert sample.n == 0 and sample.mean is None  # no throughput over the 4 survivors
    assert (sample.failed_requests, sample.total_requests) == (12, 16)
    assert sample.failed_measurements == 1 and sample.capped == 0  # not a compared capped run


def test_the_report_counts_and_names_the_cut_requests_and_the_silence() -> None:
    from matrixrun.report.sections.failures import failures_of

    f = failures_of([measurement("base"), measurement("cb", capped=True)], "concurrency")
    assert len(f.measurements) == 1 and f.measurements[0][1] == "`cb`"
    assert f.requests == [
        "`cb` at concurrency 16, attempt 1: 12 of 16 requests failed (75.0%): 12 cut by the "
        "cell's time cap; the run is not compared"
    ]
    said = " ".join(f.limited)
    assert "the server sent nothing for 55.0 s while 12 requests were outstanding" in said
    assert "capped at" not in said  # the failed run's own row says it; no second sentence


def test_the_policy_measures_a_capped_cell_once_more_and_then_leaves_it() -> None:
    from matrixrun.core.rerun_reason import WhyKind
    from matrixrun.verify.policy import capped_once

    first = [measurement("cb", capped=True)]
    assert capped_once("cb-c16", first)
    assert not capped_once("cb-c16", [*first, measurement("cb", 2, capped=True)])
    crashed = first[0].model_copy(update={"failure": Failure.SERVER_DIED})
    assert not capped_once("cb-c16", [crashed])  # a crash is reported, not retried
    assert WhyKind.CAPPED.value == "capped"


# --------------------------------------------------------------- a whole run on the simulator


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_run_whose_server_holds_requests_counts_them_and_compares_no_survivors(
    tmp_path: Path,
) -> None:
    """The H200 run, rehearsed: the candidate's simulated server reads some requests and never
    answers them (`hold_rate`). Its capped runs are failures with their reasons; the Checks line
    counts their cut and unsent requests; no cell of it shows a throughput over the survivors
    (it is undecided, or measured on its rerun); each capped cell was measured once more."""
    from test_runner import TINY, mr

    from matrixrun.core.verdict import Verdict
    from matrixrun.rundir.results import RunDir

    spec = tmp_path / "held.yaml"
    spec.write_text(
        TINY.replace("cell_timeout: 60s", "cell_timeout: 8s").replace(
            "        set: {step_ms: [[1, 10], [8, 12]]}",
            "        set: {step_ms: [[1, 10], [8, 12]]}\n    effect_rules:\n"
            "      - when: {moe_runner_backend: flashinfer_cutedsl}\n"
            "        set: {hold_rate: 0.3}",
        )
    )
    run, report = tmp_path / "run", tmp_path / "r.md"
    res = mr("run", str(spec), "--rehearse", "--out", str(run), "--report", str(report))
    assert res.returncode == 1, res.stderr[-2000:]  # failed measurements: not a clean run
    assert "Traceback" not in res.stderr
    ms = RunDir(run).measurements()
    capped = [m for m in ms if m.failure in (Failure.CAPPED, Failure.CAPPED_EMPTY)]
    assert capped and {m.arm for m in capped} == {"fast"}
    cut = sum(m.metrics.failed for m in capped if m.metrics is not None)
    assert cut > 0
    for m in capped:  # every cut or unsent request is a failure with its reason
        reasons = m.extra["request_errors"]
        assert set(reasons) <= {CUT, WAITED, "never sent: it was due after the cell's time cap"}
        assert m.metrics is not None and sum(reasons.values()) == m.metrics.failed
    # a cell whose first run the cap cut is measured once more
    for cell_id in {m.cell_id for m in capped if m.attempt == 1}:
        assert len([m for m in ms if m.cell_id == cell_id]) >= 2
    verdict = Verdict.model_validate_json((run / "verdict.json").read_text())
    for _, _, c in verdict.comparisons():
        fast = [m for m in ms if m.point_id == c.point_id and m.arm == "fast" and m.ok]
        assert c.candidate.n <= len(fast)  # only whole runs are compared
        if not fast:  # undecided, with no number for the candidate
            assert c.verdict not in ("better", "worse", "same") and c.candidate.mean is None
    text = report.read_text()
    failed = sum(c.candidate.failed_requests + c.baseline.failed_requests
                 for _, _, c in verdict.comparisons())  # fmt: skip
    assert failed >= cut and f"{failed} failed requests" in text
    assert "cut by the cell's time cap" in text or "never sent" in text
    assert "the run is not compared" in text

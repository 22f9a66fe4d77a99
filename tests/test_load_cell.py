"""One cell at the load seam: the time scale applied on the way in and out, and every cell
failure mapped to one sentence (against a real closed port and a real server)."""

from __future__ import annotations

import math

import pytest
from simserver import free_port

from matrixrun.core.measurement import Failure
from matrixrun.core.metrics import Metrics
from matrixrun.core.timescale import REAL, TimeScale
from matrixrun.load.cell import in_server_time, measure_cell
from matrixrun.load.client import LoadConfig


def config(**kw: object) -> LoadConfig:
    base: dict[str, object] = dict(
        base_url="http://127.0.0.1:9",
        num_prompts=4,
        input_len=8,
        output_len=4,
        concurrency=2,
        request_rate=10.0,
        request_timeout_s=30.0,
        duration_s=60.0,
        time_cap_s=120.0,
    )
    return LoadConfig.model_validate({**base, **kw})


def test_modelled_time_becomes_server_time() -> None:
    fast = in_server_time(config(), TimeScale(4.0))
    assert (fast.request_rate, fast.request_timeout_s) == (40.0, 7.5)
    assert (fast.duration_s, fast.time_cap_s) == (15.0, 30.0)
    assert in_server_time(config(), REAL) == config()
    assert math.isinf(in_server_time(config(request_rate=math.inf), TimeScale(4.0)).request_rate)


def test_metrics_come_back_in_modelled_time() -> None:
    m = Metrics.model_validate(
        {
            "completed": 4,
            "duration": 1.0,
            "total_input_tokens": 32,
            "total_output_tokens": 16,
            "request_throughput": 4.0,
            "input_throughput": 32.0,
            "output_throughput": 16.0,
            "total_throughput": 48.0,
            "mean_ttft_ms": 10.0,
        }
    )
    back = TimeScale(4.0).modelled(m)
    assert (back.duration, back.output_throughput, back.mean_ttft_ms) == (4.0, 4.0, 40.0)
    assert back.completed == 4


def test_an_unreachable_server_is_the_cell_s_error_not_an_exception() -> None:
    run = measure_cell(config(base_url=f"http://127.0.0.1:{free_port()}"), REAL, 30.0)
    assert run.metrics is None and run.records == []
    assert run.error is not None and "is the server running?" in run.error
    assert run.failure is Failure.LOAD


def test_a_time_scale_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        TimeScale(0.0)

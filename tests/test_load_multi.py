"""The load client spread over several processes (`matrixrun/load/multi.py`): the same cell
measured by 2 processes and by 1 against the fixed-timing server, `auto`'s choice, and what
happens when a process fails (a clear error, no process left behind)."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import pytest
from test_load_client import (  # noqa: F401 - server: a fixture
    check_timing,
    config,
    fixed_server,
    lateness_ms,
    server,
)

from matrixrun.core.errors import InputError, LoadError
from matrixrun.load import run_load_sync
from matrixrun.load.multi import auto_processes, resolve_processes, shares
from matrixrun.load.prompts import arrival_offsets

pytestmark = pytest.mark.timeout(90)


def test_auto_takes_one_process_per_256_slots_within_the_free_cores() -> None:
    assert auto_processes(256, 16) == 1
    assert auto_processes(257, 16) == 2
    assert auto_processes(1024, 16) == 4
    assert auto_processes(4096, 8) == 7  # cores − 1: one is left for the parent and the rest
    assert auto_processes(1024, 2) == 1  # a second process would only share the other core
    assert auto_processes(1024, 1) == 1


def test_a_cell_is_never_split_thinner_than_its_requests_or_slots() -> None:
    url = "http://127.0.0.1:1"
    assert resolve_processes(config(url, processes=8, concurrency=4)) == 4
    assert resolve_processes(config(url, processes=8, num_prompts=3, concurrency=8)) == 3
    assert resolve_processes(config(url, concurrency=1024), cores=lambda: 16) == 4
    assert resolve_processes(config(url, concurrency=1024), cores=lambda: 2) == 1


def test_shares_partition_the_requests_and_add_up_to_the_concurrency() -> None:
    cfg = config("http://127.0.0.1:1", num_prompts=11, concurrency=5, warmup_requests=1)
    parts = shares(cfg, 3)
    assert sorted(i for s in parts for i in s.indices) == list(range(11))
    assert all(i % 3 == w for w, s in enumerate(parts) for i in s.indices)
    assert sum(s.concurrency for s in parts) == 5
    assert [s.warmup for s in parts] == [1, 1, 1]  # each process warms its own path


def test_two_processes_measure_what_one_does(server: str) -> None:  # noqa: F811
    kw = dict(num_prompts=32, concurrency=8, output_len=20, warmup_requests=2)
    one = run_load_sync(config(server, processes=1, **kw))
    two = run_load_sync(config(server, processes=2, **kw))
    assert (one.processes, two.processes) == (1, 2)
    assert [r.index for r in two.records] == list(range(32))
    for res in (one, two):
        m = res.metrics
        assert (m.completed, m.failed, m.total_output_tokens) == (32, 0, 32 * 20)
        check_timing(m, 20, waves=4, late=lateness_ms(res, server))  # 4 waves of 8, as with one
    # both processes started at the common instant: the first wave of each is at ~0
    first = [min(r.start for r in two.records if r.index % 2 == w) for w in (0, 1)]
    assert two.check is not None  # each process's start is late by at most its loop's lag
    assert max(first) < 0.02 + two.check.lag_max_ms / 1e3, first
    assert two.check is not None and len(two.check.as_dict()) > 0
    assert two.client_cpu is not None and two.client_cpu > 0
    assert mp.active_children() == []  # every child reaped


def test_arrivals_keep_their_global_offsets_across_processes(server: str) -> None:  # noqa: F811
    cfg = config(server, processes=2, num_prompts=12, concurrency=12, request_rate=40.0)
    res = run_load_sync(cfg)
    offsets = arrival_offsets(cfg.seed, cfg.num_prompts, cfg.request_rate)
    late = res.check.lag_max_ms / 1e3 if res.check is not None else 0.0
    for r in res.records:
        assert r.start == pytest.approx(offsets[r.index], abs=0.02 + late), (r.index, r.start)


def test_an_unreachable_server_is_the_same_error_as_with_one_process() -> None:
    with pytest.raises(LoadError, match="could not connect"):
        run_load_sync(config("http://127.0.0.1:1", processes=2, warmup_requests=1))
    assert mp.active_children() == []


def test_bad_input_in_a_process_is_the_same_input_error() -> None:
    cfg = config("http://127.0.0.1:1", processes=2, prompt_format="text", tokenizer=None)
    with pytest.raises(InputError, match="needs a tokenizer"):
        run_load_sync(cfg)


def test_a_killed_process_fails_the_cell_and_leaves_nothing_behind() -> None:
    with fixed_server("--ttft-ms", "40", "--itl-ms", "50") as url:
        cfg = config(url, processes=2, num_prompts=8, concurrency=4, output_len=60)

        def kill_one() -> None:  # once both children run, kill one mid-cell
            deadline = time.monotonic() + 30
            while len(mp.active_children()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.5)  # past the start-up, inside the ~3 s of measured requests
            victim = mp.active_children()[0]
            victim.kill()

        killer = threading.Thread(target=kill_one)
        killer.start()
        with pytest.raises(LoadError, match=r"client process \d of 2 exited \(code -9\)"):
            run_load_sync(cfg)
        killer.join()
    assert mp.active_children() == []


def test_bench_client_spreads_and_says_so(server: str) -> None:  # noqa: F811
    import argparse

    from matrixrun.cli.options import add_bench_client
    from matrixrun.load import command as bench_client

    parser = argparse.ArgumentParser()
    add_bench_client(parser)
    argv = ["--url", server, "--concurrency", "4", "--num-prompts", "8", "--input-len", "16",
            "--output-len", "8", "--processes", "2"]  # fmt: skip
    out = bench_client.run(parser.parse_args(argv))
    assert out["completed"] == 8 and out["client_processes"] == 2
    assert "client_check" in out
    for bad in ("0", "two"):
        with pytest.raises(SystemExit):
            parser.parse_args([*argv, "--processes", bad])


def test_the_spec_takes_processes_as_a_number_or_auto() -> None:
    from pathlib import Path

    from matrixrun.core.errors import SpecError
    from matrixrun.spec import parse_spec

    root = Path(__file__).resolve().parent.parent
    example = (root / "spec" / "glm5_cutedsl.yaml").read_text().split("\nestimate:")[0] + "\n"
    assert parse_spec(example).workload.processes == "auto"
    given = example.replace("seed: 1}", "seed: 1, processes: 3}", 1)
    assert given != example and parse_spec(given).workload.processes == 3
    with pytest.raises(SpecError, match=r"workload\.processes"):
        parse_spec(example.replace("seed: 1}", "seed: 1, processes: 0}", 1))

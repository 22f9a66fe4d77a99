"""The results store (matrixrun/store/) against real run directories: the committed H200 runs
(reports/runs/, measured on an H200 by this project) and the golden bench_serving ingest.
Every case that touches a database runs on SQLite and on a real PostgreSQL server
(tests/store_backends.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from matrixrun.cli.main import main
from matrixrun.plan import expand
from matrixrun.rundir.settings import analysis_settings
from matrixrun.spec import load_spec
from matrixrun.store import schema as t
from matrixrun.store.db import Store
from matrixrun.store.extract import extract
from matrixrun.store.prior import prepare
from matrixrun.store.record import record_run, run_dirs

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "reports" / "runs"
H200 = ["h200_transformers_cb-6", "h200_transformers_cb-7", "h200_transformers_cb_calibration"]


def copy_runs(dest: Path, names: list[str] = H200) -> list[Path]:
    out = []
    for name in names:
        target = dest / name
        shutil.copytree(
            RUNS / name, target, ignore=shutil.ignore_patterns("logs", "requests", "*.png")
        )
        out.append(target)
    return out


def history(store: str, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["history", "--store", store, *args])
    return code, capsys.readouterr().out


def test_recorded_runs_and_a_rebuilt_store_give_the_same_answers(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = copy_runs(tmp_path / "runs", [*H200, "golden-ingest"])
    for d in dirs:
        assert record_run(d, store_url) is None
    asks = [(), ("--arm", "cb"), ("--flag", "continuous-batching"), ("--engine", "command")]
    before = [history(store_url, *a, capsys=capsys) for a in asks]
    spec_answer = history(
        store_url, "--spec", str(ROOT / "spec/h200_transformers_cb.yaml"), capsys=capsys
    )
    assert "4 run(s) match" in before[0][1]
    assert "3 run(s) match" in before[2][1]  # the ingest sets no flag
    assert "| transformers 5.17.0, torch 2.11.0+cu130 | 2026-12-01 | 3 |" in before[1][1]
    assert "measured 4 of this spec's 4 point(s)" in spec_answer[1]
    # the same run recorded twice is replaced, not doubled
    assert record_run(dirs[0], store_url) is None
    assert history(store_url, capsys=capsys) == before[0]

    store = Store(store_url)
    store.clear()
    store.close()
    assert main(["store", "rebuild", "--store", store_url, str(tmp_path / "runs")]) == 0
    capsys.readouterr()
    assert [history(store_url, *a, capsys=capsys) for a in asks] == before
    again = history(
        store_url, "--spec", str(ROOT / "spec/h200_transformers_cb.yaml"), capsys=capsys
    )
    assert again == spec_answer


def test_a_run_that_borrowed_noise_is_stored_with_its_own(store_url: str, tmp_path: Path) -> None:
    """cb-7 borrowed the calibration run's noise: the store keeps cb-7's own σ (its df without
    the calibration's), so pooling both never counts the calibration run twice."""
    (d,) = copy_runs(tmp_path, ["h200_transformers_cb-7"])
    rec = extract(d)
    pooled = {s["metric"]: s for s in json.loads((d / "verdict.json").read_text())["sigma"]}
    own = rec.sigmas["output_throughput"]
    assert pooled["output_throughput"]["history_df"] == 16.0
    assert own.history is None and own.run_df < pooled["output_throughput"]["run_df"]


def test_auto_pools_the_newest_real_runs_of_the_same_engine_model_and_hardware(
    store_url: str, tmp_path: Path
) -> None:
    dirs = copy_runs(tmp_path / "runs")
    for d in dirs:
        assert record_run(d, store_url) is None
    spec = load_spec(ROOT / "spec/h200_transformers_cb_calibration.yaml")
    assert spec.verify.noise_from == "auto"
    run = tmp_path / "new"
    resolved, error = prepare(spec, run, rehearse=False, store=store_url)
    assert error is None and resolved.verify.noise_from == str((run / "prior.json").resolve())
    prior = json.loads((run / "prior.json").read_text())
    # the calibration run first (its launch part is pooled by df), then the newest
    assert [Path(r).name for r in prior["runs"]] == [
        "h200_transformers_cb_calibration",
        "h200_transformers_cb-7",
        "h200_transformers_cb-6",
    ]
    own = {d.name: extract(d).sigmas["output_throughput"] for d in dirs}
    pooled = prior["sigmas"]["output_throughput"]
    assert pooled["run_df"] == pytest.approx(sum(s.run_df for s in own.values()), abs=0.05)
    settings = analysis_settings(resolved, expand(resolved))
    assert settings.noise_from is not None and settings.noise_from.startswith("the results store")
    assert "transformers 5.17.0" in settings.noise_from
    # a rehearsal borrows nothing; another engine finds nothing; `none` asks nothing
    assert (
        prepare(spec, tmp_path / "r", rehearse=True, store=store_url)[0].verify.noise_from == "none"
    )
    other = spec.model_copy(update={"engine": spec.engine.model_copy(update={"kind": "vllm"})})
    assert (
        prepare(other, tmp_path / "o", rehearse=False, store=store_url)[0].verify.noise_from
        == "none"
    )
    assert not (tmp_path / "o" / "prior.json").exists()


def test_the_store_pools_as_a_hand_named_noise_from_does(tmp_path: Path) -> None:
    """cb-7 named the calibration run in verify.noise_from by hand; judged again with the
    prior `with_prior` makes from the calibration run's stored noise, its σ is the same."""
    from matrixrun.analysis import analyse
    from matrixrun.rundir.results import RunDir
    from matrixrun.rundir.settings import read_settings
    from matrixrun.store.prior import EarlierNoise, with_prior

    calibration, cb7 = copy_runs(
        tmp_path, ["h200_transformers_cb_calibration", "h200_transformers_cb-7"]
    )
    cal = extract(calibration)
    earlier = EarlierNoise(str(calibration), cal.finished_at, True, cal.sigmas)
    own = read_settings(RunDir(cb7)).analysis.model_copy(
        update={"noise_history": {}, "noise_from": None}
    )
    assert with_prior(own, []) == own
    judged = analyse(RunDir(cb7).measurements(), with_prior(own, [earlier]))
    committed = json.loads((cb7 / "verdict.json").read_text())["sigma"]
    for s, c in zip(judged.sigma, committed, strict=True):
        assert s.metric == c["metric"]
        assert s.value == pytest.approx(c["value"]) and s.df == pytest.approx(c["df"])
        assert s.history_df == c["history_df"] and s.history_fixed == c["history_fixed"]


def test_a_simulated_run_never_lends_its_noise_to_a_real_one(
    store_url: str, tmp_path: Path
) -> None:
    (d,) = copy_runs(tmp_path, ["h200_transformers_cb-7"])
    env = json.loads((d / "env.json").read_text())
    (d / "env.json").write_text(json.dumps({**env, "simulated": True}))
    assert record_run(d, store_url) is None
    spec = load_spec(ROOT / "spec/h200_transformers_cb_calibration.yaml")
    resolved, _ = prepare(spec, tmp_path / "new", rehearse=False, store=store_url)
    assert resolved.verify.noise_from == "none"


def test_a_resumed_run_keeps_the_prior_it_started_with(store_url: str, tmp_path: Path) -> None:
    dirs = copy_runs(tmp_path / "runs")
    record_run(dirs[0], store_url)
    spec = load_spec(ROOT / "spec/h200_transformers_cb_calibration.yaml")
    run = tmp_path / "new"
    prepare(spec, run, rehearse=False, store=store_url)
    first = json.loads((run / "prior.json").read_text())["runs"]
    for d in dirs[1:]:  # more runs land in the store meanwhile
        record_run(d, store_url)
    (run / "settings.json").write_text("{}")
    resolved, _ = prepare(spec, run, rehearse=False, store=store_url)
    assert resolved.verify.noise_from == str((run / "prior.json").resolve())
    assert json.loads((run / "prior.json").read_text())["runs"] == first


def test_an_unreachable_store_costs_one_sentence_and_nothing_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MATRIXRUN_STORE", "postgresql://nobody@127.0.0.1:1/none")
    out = tmp_path / "ingested"
    golden = ROOT / "tests/golden/bench_serving"
    code = main(
        [
            "ingest",
            str(golden / "fast_prefill.jsonl"),
            str(golden / "fast_decode.jsonl"),
            "--baseline",
            "fast_prefill",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 0 and (out / "report.md").is_file() and (out / "verdict.json").is_file()
    lines = [line for line in err.splitlines() if "results store" in line]
    assert len(lines) == 1 and "could not record" in lines[0]
    assert f"matrixrun store rebuild {out}" in lines[0]
    spec = load_spec(ROOT / "spec/h200_transformers_cb_calibration.yaml")
    resolved, error = prepare(spec, tmp_path / "run", rehearse=False)
    assert resolved.verify.noise_from == "none" and error is not None


def test_a_store_newer_than_this_code_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sqlite")
    store = Store(path)
    with store.engine.begin() as conn:
        conn.execute(t.meta.update().values(value=str(t.SCHEMA_VERSION + 1)))
    store.close()
    with pytest.raises(Exception, match="newer than this matrixrun"):
        Store(path)


def test_an_older_store_says_undecided_where_it_said_inconclusive(tmp_path: Path) -> None:
    """Schema 1 → 2: rows indexed from an older run directory said `inconclusive` for the
    reason of a rerun of an undecided cell (and, before verdict format 2, for a verdict); the
    store's migration gives them the one word the run directories now store."""
    path = str(tmp_path / "s.sqlite")
    store = Store(path)
    store.record(extract(ROOT / "reports" / "runs" / "h200_transformers_aa"))
    with store.engine.begin() as conn:
        undecided = conn.execute(
            select(func.count()).where(t.measurements.c.reason == "undecided")
        ).scalar_one()
        assert undecided > 0  # its reruns of undecided cells, read through core.migrate
        conn.execute(
            t.measurements.update()
            .where(t.measurements.c.reason == "undecided")
            .values(reason="inconclusive")
        )
        conn.execute(t.cells.update().values(verdict="inconclusive"))
        conn.execute(t.meta.update().values(value="1"))
    store.close()
    store = Store(path)
    assert store.schema_version() == t.SCHEMA_VERSION == 2
    with store.read() as conn:
        reasons = conn.execute(select(t.measurements.c.reason)).scalars().all()
        verdicts = set(conn.execute(select(t.cells.c.verdict)).scalars().all())
    assert "inconclusive" not in reasons and reasons.count("undecided") == undecided
    assert verdicts == {"undecided"}
    store.close()


WRITER = """
import sys, time
from pathlib import Path
from dataclasses import replace
from matrixrun.store.extract import extract
from matrixrun.store.db import Store
store = Store(sys.argv[1])
base = extract(sys.argv[2])
ms = base.measurements * 400  # a large run: its insert takes a while
print("ready", flush=True)
for i in range(10_000):
    store.record(replace(base, run_dir=f"{base.run_dir}-{i}", measurements=ms))
    print(f"committed {i}", flush=True)
"""


def test_a_writer_killed_mid_record_leaves_the_store_consistent(
    store_url: str, tmp_path: Path
) -> None:
    (d,) = copy_runs(tmp_path, ["h200_transformers_cb-7"])
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen(
        [sys.executable, str(script), store_url, str(d)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    lines = []
    while len(lines) < 3:  # two runs committed; the third is being written
        lines.append(proc.stdout.readline())
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = Store(store_url)
    with store.read() as conn:
        runs = conn.execute(select(t.runs.c.id, t.runs.c.measurements)).all()
        counts = dict(
            conn.execute(
                select(t.measurements.c.run_id, func.count()).group_by(t.measurements.c.run_id)
            ).all()
        )
        assert len(runs) >= 2
        for run_id, n in runs:  # every stored run whole, nothing of the killed one
            assert counts.get(run_id) == n
        assert set(counts) <= {r[0] for r in runs}
        if store_url.endswith(".sqlite"):
            assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    store.close()


def test_run_dirs_finds_each_run_directory_once(tmp_path: Path) -> None:
    dirs = copy_runs(tmp_path / "runs", ["h200_transformers_cb-7", "golden-ingest"])
    assert run_dirs([tmp_path / "runs", dirs[0]]) == sorted(p.resolve() for p in dirs)

"""Run directories that last: the migrations forward (pure, one by one) and a corpus of run
directories that earlier commits of this repository wrote (tests/rundirs/<sha>/, each with its
PROVENANCE.md), each of which must render and analyse with today's code."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from matrixrun.core import migrate
from matrixrun.core.errors import InputError
from matrixrun.core.format_version import (
    FORMAT_FILE,
    RECORDS_VERSION,
    SETTINGS_VERSION,
    VERDICT_VERSION,
)
from matrixrun.core.verdict import Verdict
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import RunSettings, read_settings

CORPUS = Path(__file__).parent / "rundirs"
SHAS = sorted(p.name for p in CORPUS.iterdir() if (p / "PROVENANCE.md").exists())


# -- the pure steps ---------------------------------------------------------------------------

V0_SPEC: dict[str, Any] = {
    "experiment": "tiny",
    "hypothesis": "The fast   backend\nhalves the step.",
    "engine": {"kind": "sglang", "args": {"tp": 1}},
    "arms": {"slow": {"moe": "a"}, "fast": {"moe": "b"}},
    "sweep": {"concurrency": [1, 4]},
    "workload": {"input_len": 16, "output_len": 8, "num_prompts": 8, "seed": 3},
    "metrics": {"primary": "output_throughput", "secondary": ["mean_tpot_ms"]},
    "verify": {"threshold": "3%", "surprise": "10%", "max_runs": 2, "noise": "2%"},
    "rehearsal": {"time_scale": 2, "profile": {"name": "tiny"}},
}

V0_OVERALL = {"verdict": "better", "provisional": True, "better": 2, "worse": 0, "same": 0}


def v0_verdict() -> dict[str, Any]:
    """A version-0 verdict.json in the shape 10f2ee8 wrote (the parts the step changes)."""
    sigma = {"metric": "output_throughput", "value": 0.06, "df": 2.0, "source": "warm"}
    sigma |= {"fresh_value": None, "fresh_df": 0, "warm_value": 0.06, "warm_df": 2, "text": "σ"}
    cell = {"point_id": "p1", "verdict": "inconclusive", "text": "~ n/a"}
    cell["notes"] = ["no successful measurement of the candidate", "something else entirely"]
    return {
        "settings": {"baseline": "slow", "candidates": ["fast"], "margin": 0.03},
        "sigma": [sigma],
        "slices": [
            {
                "slice": "",
                "candidates": [
                    {
                        "candidate": "fast",
                        "metrics": [
                            {
                                "metric": "mean_tpot_ms",
                                "sigma": dict(sigma, metric="mean_tpot_ms"),
                                "series": [{"cells": [cell], "regimes": [{"text": "r"}]}],
                                "overall": {**V0_OVERALL, "inconclusive": 1, "sentence": "s"},
                            }
                        ],
                        "overall": {**V0_OVERALL, "sentence": "better on …"},
                    }
                ],
            }
        ],
        "overall": {"fast": {**V0_OVERALL, "sentence": "better on …"}},
        "reruns": [
            {"arm": "fast", "point_id": "p1", "reason": "surprise", "same_instance": True},
            {"arm": "slow", "point_id": "p1", "reason": "inconclusive", "same_instance": False},
        ],
        "multiplicity": "2 cells judged …",
        "warnings": ["σ comes from warm repeats"],
    }


def v0_files() -> dict[str, Any]:
    results = [
        {"cell_id": "c-fast", "arm": "fast", "point_id": "p1", "simulated": True, "time_scale": 2},
        {"cell_id": "c-slow", "arm": "slow", "point_id": "p1", "simulated": True, "time_scale": 2},
    ]
    return {
        "spec.yaml": V0_SPEC,
        "spec.sha256": "abc123  spec.yaml\n",
        "verdict.json": v0_verdict(),
        "results.jsonl": results,
        "events.jsonl": [{"event": "run_start", "rehearse": True}],
        "plan.json": {"experiment": "tiny"},
    }


def test_migrate_is_pure_and_stamps_every_version() -> None:
    files = v0_files()
    before = copy.deepcopy(files)
    out = migrate.migrate(files)
    assert files == before  # the input is not touched
    assert out[FORMAT_FILE] == {"version": RECORDS_VERSION}
    assert out["settings.json"]["schema_version"] == SETTINGS_VERSION
    assert out["verdict.json"]["schema_version"] == VERDICT_VERSION
    assert migrate.is_current(out) and not migrate.is_current(files)
    assert migrate.migrate(out) == out  # a current directory goes through unchanged


def test_settings_of_a_run_from_before_settings_json_come_from_its_verdict_and_spec() -> None:
    made = migrate.settings_v0_to_v1(v0_files())
    settings = RunSettings.model_validate(made)
    assert settings.analysis.baseline == "slow" and settings.analysis.candidates == ["fast"]
    assert settings.rehearsal and settings.time_scale == 2
    assert settings.spec is not None and settings.spec.rehearsal is not None
    assert settings.spec.hypothesis == "The fast backend halves the step."
    assert settings.spec.sweep == {"concurrency": [1, 4]}
    assert settings.spec.arm_flag_keys == ["moe"] and settings.spec.max_runs == 2
    assert settings.spec.rehearsal.profile == "tiny" and settings.spec.spec_sha256 == "abc123"


def test_without_a_verdict_the_analysis_settings_come_from_the_spec_copy() -> None:
    files = v0_files()
    del files["verdict.json"]
    analysis = migrate.settings_v0_to_v1(files)["analysis"]
    assert analysis["margin"] == pytest.approx(0.03) and analysis["noise"] == pytest.approx(0.02)
    assert analysis["baseline"] == "slow" and analysis["candidates"] == ["fast"]
    assert analysis["looks"] == 2 and analysis["axis"] == "concurrency"


def test_an_unversioned_settings_file_keeps_its_content_and_gains_its_version() -> None:
    old = {"analysis": {"baseline": "a"}, "rehearsal": False}
    out = migrate.migrate({"settings.json": old})
    assert out["settings.json"] == {"schema_version": SETTINGS_VERSION, **old}


def test_a_v0_verdict_loses_its_sentences_and_gains_what_today_records() -> None:
    files = v0_files()
    out = migrate.verdict_v0_to_v1(files)
    text = json.dumps(out)
    for gone in ('"text"', '"sentence"', "fresh_value", "warm_df", "multiplicity", "warnings"):
        assert gone not in text
    metric = out["slices"][0]["candidates"][0]["metrics"][0]
    assert metric["overall"]["metric"] == "mean_tpot_ms" and metric["overall"]["cells"] == 3
    assert out["overall"]["fast"]["metric"] == "output_throughput"
    assert metric["series"][0]["cells"][0]["notes"] == ["no_candidate"]
    warm, fresh = out["reruns"]
    assert (warm["cell_id"], warm["candidate"], warm["kind"], warm["tests"]) == (
        "c-fast",
        "fast",
        "warm",
        "warmup",
    )
    # a baseline's rerun belongs to the (first) candidate's comparison
    assert (fresh["cell_id"], fresh["candidate"], fresh["kind"], fresh["tests"]) == (
        "c-slow",
        "fast",
        "fresh_server",
        "replicate",
    )


def v1_verdict() -> dict[str, Any]:
    """A version-1 verdict.json's parts that step 1 → 2 changes."""
    overall = {"metric": "m", "verdict": "inconclusive", "same": 1, "inconclusive": 2}
    overall["by_slice"] = [{"slice": "a", "verdict": "inconclusive"}]
    series = {"cells": [{"verdict": "inconclusive"}, {"verdict": "better"}]}
    series["regimes"] = [{"verdict": "inconclusive"}]
    metric = {"metric": "m", "series": [series], "overall": overall}
    cand = {"candidate": "c", "metrics": [metric], "overall": overall}
    return {"schema_version": 1, "slices": [{"candidates": [cand]}], "overall": {"c": overall}}


def test_a_v1_verdict_stores_undecided_in_every_place_the_outcome_is_written() -> None:
    out = migrate.migrate({"settings.json": {"schema_version": 1}, "verdict.json": v1_verdict()})
    verdict = out["verdict.json"]
    assert verdict["schema_version"] == 3 and out["settings.json"] == {"schema_version": 3}
    assert "inconclusive" not in json.dumps(verdict)
    overall = verdict["overall"]["c"]
    assert list(overall) == ["metric", "verdict", "same", "undecided", "by_slice"]  # in order
    assert overall["undecided"] == 2 and overall["by_slice"][0]["verdict"] == "undecided"
    series = verdict["slices"][0]["candidates"][0]["metrics"][0]["series"][0]
    assert [c["verdict"] for c in series["cells"]] == ["undecided", "better"]
    assert series["regimes"][0]["verdict"] == "undecided"


def test_a_v2_rerun_reason_is_stored_as_undecided_in_every_file() -> None:
    """Step 2 → 3: a rerun of an undecided cell said `inconclusive` in results.jsonl (and a
    node's shard), in the verify events and in verdict.json's rerun log and arms' reasons;
    now `undecided` everywhere, the other reasons and records as they were."""
    arm = {"arm": "c", "reasons": ["first", "inconclusive", "surprise"]}
    cell = {"verdict": "undecided", "baseline": {**arm, "arm": "b"}, "candidate": arm}
    metric = {"metric": "m", "series": [{"cells": [cell]}]}
    verdict = {
        "schema_version": 2,
        "slices": [{"candidates": [{"candidate": "c", "metrics": [metric]}]}],
        "reruns": [{"reason": "inconclusive", "arm": "c"}, {"reason": "crossover"}],
    }
    files = {
        FORMAT_FILE: {"version": 2},
        "settings.json": {"schema_version": 2},
        "verdict.json": verdict,
        "results.jsonl": [{"reason": "first"}, {"reason": "inconclusive", "attempt": 2}],
        "results.d/g1.jsonl": [{"reason": "inconclusive"}],
        "events.jsonl": [{"event": "verify", "reason": "inconclusive"}, {"event": "launch"}],
        "events.d/g1.jsonl": [{"event": "verify", "reason": "inconclusive"}],
        "plan.json": {"reason": "inconclusive"},  # not a record file: left as it is
    }
    out = migrate.migrate(files)
    assert out[FORMAT_FILE] == {"version": 3} and out["settings.json"]["schema_version"] == 3
    assert out["results.jsonl"] == [{"reason": "first"}, {"reason": "undecided", "attempt": 2}]
    assert out["results.d/g1.jsonl"] == [{"reason": "undecided"}]
    assert out["events.jsonl"] == [{"event": "verify", "reason": "undecided"}, {"event": "launch"}]
    assert out["events.d/g1.jsonl"] == [{"event": "verify", "reason": "undecided"}]
    assert out["plan.json"] == {"reason": "inconclusive"}
    v = out["verdict.json"]
    assert v["schema_version"] == 3
    assert [r["reason"] for r in v["reruns"]] == ["undecided", "crossover"]
    cell = v["slices"][0]["candidates"][0]["metrics"][0]["series"][0]["cells"][0]
    assert cell["candidate"]["reasons"] == ["first", "undecided", "surprise"]
    assert cell["baseline"]["reasons"] == ["first", "undecided", "surprise"]
    assert files["results.jsonl"][1]["reason"] == "inconclusive"  # the input is not changed


def test_a_current_verdict_in_an_old_directory_is_left_alone() -> None:
    """`matrixrun analyse` rewrites verdict.json alone: it is newer than the rest."""
    files = v0_files()
    files["verdict.json"] = {"schema_version": VERDICT_VERSION, "marker": 1}
    current = {"schema_version": VERDICT_VERSION, "marker": 1}
    assert migrate.migrate(files)["verdict.json"] == current


def test_a_file_from_a_newer_matrixrun_is_refused() -> None:
    with pytest.raises(InputError, match="newer than this matrixrun reads"):
        migrate.migrate({"settings.json": {"schema_version": SETTINGS_VERSION + 1}})
    with pytest.raises(InputError, match="newer than this matrixrun reads"):
        migrate.migrate({FORMAT_FILE: {"version": RECORDS_VERSION + 1}})


def test_records_version_comes_from_format_json_else_from_settings() -> None:
    assert migrate.records_version({}) == 0
    assert migrate.records_version({"settings.json": {"schema_version": 1}}) == 1
    assert migrate.records_version({FORMAT_FILE: {"version": 7}, "settings.json": {}}) == 7


# -- the corpus -------------------------------------------------------------------------------


def corpus_copy(sha: str, tmp_path: Path) -> Path:
    target = tmp_path / "copied" / sha
    shutil.copytree(CORPUS / sha, target)
    return target


def test_the_corpus_spans_the_history() -> None:
    """At least three commits, the oldest among them from before settings.json existed."""
    assert len(SHAS) >= 3
    assert any(not (CORPUS / sha / "settings.json").exists() for sha in SHAS)
    for sha in SHAS:
        assert not (CORPUS / sha / FORMAT_FILE).exists()  # as the old matrixrun wrote it


@pytest.mark.parametrize("sha", SHAS)
def test_an_old_run_directory_renders_and_analyses_with_todays_code(
    sha: str, tmp_path: Path
) -> None:
    from matrixrun.cli.main import main

    run = corpus_copy(sha, tmp_path)
    out = tmp_path / "report.md"
    assert main(["report", str(run), "-o", str(out)]) == 0
    assert "Tiny rehearsal" in out.read_text() and "SIMULATED" in out.read_text()
    assert main(["analyse", str(run)]) == 0
    verdict = Verdict.model_validate_json((run / "verdict.json").read_text())
    assert verdict.schema_version == VERDICT_VERSION and verdict.settings.baseline
    assert '"verdict": "inconclusive"' not in (run / "verdict.json").read_text()
    assert main(["report", str(run)]) == 0 and (run / "report.md").exists()
    # nothing else was rewritten: an old directory is read through the migrations
    for name in ("results.jsonl", "events.jsonl", "plan.json"):
        assert (run / name).read_bytes() == (CORPUS / sha / name).read_bytes()


@pytest.mark.parametrize("sha", SHAS)
def test_an_old_run_directory_is_upgraded_in_place_before_a_run_writes_to_it(
    sha: str, tmp_path: Path
) -> None:
    """A resumed run appends today's records: `create` migrates the files first, so no file
    mixes two formats, and the directory then reads as current without the migrations."""
    run = corpus_copy(sha, tmp_path)
    rd = RunDir(run)
    measured, events = rd.measurements(), rd.events()
    settings = read_settings(rd)
    rd.create()
    assert json.loads((run / FORMAT_FILE).read_text()) == {"version": RECORDS_VERSION}
    stored = json.loads((run / "settings.json").read_text())
    assert stored["schema_version"] == SETTINGS_VERSION
    assert json.loads((run / "verdict.json").read_text())["schema_version"] == VERDICT_VERSION
    again = RunDir(run)
    assert again.measurements() == measured and again.events() == events
    assert read_settings(again) == settings


def test_a_fresh_run_directory_records_its_format(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "fresh").create()
    assert json.loads((rd.path / FORMAT_FILE).read_text()) == {"version": RECORDS_VERSION}


def test_a_current_directory_without_settings_says_so(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "r").create()
    with pytest.raises(InputError, match=r"has no settings\.json"):
        read_settings(rd)


# -- links inside a run directory ---------------------------------------------------------------

LINK = re.compile(r"\]\(<?([^)>\s]+)>?\)")


def links(text: str) -> list[str]:
    return [t for t in LINK.findall(text) if not t.startswith(("http:", "https:", "#"))]


@pytest.mark.parametrize("sha", SHAS)
def test_links_in_a_copied_run_directory_resolve_in_the_copy(sha: str, tmp_path: Path) -> None:
    """report.md written in one place, the directory copied elsewhere: every link it has
    resolves inside the copy, and no path of the first place is printed."""
    from matrixrun.run import outputs

    first = corpus_copy(sha, tmp_path)
    outputs.analyse_run(first)
    (first / "chart.png").write_bytes(b"\x89PNG")  # the link is there whether or not it draws
    outputs.render_run(first)
    moved = tmp_path / "elsewhere" / "kept"
    shutil.copytree(first, moved)
    text = (moved / "report.md").read_text()
    found = links(text)
    assert "chart.png" in " ".join(found)
    for target in found:
        assert not target.startswith("/"), target
        assert (moved / target).exists(), target
    assert str(first) not in text and str(tmp_path) not in text


def test_a_report_written_elsewhere_links_back_into_the_run_directory(tmp_path: Path) -> None:
    from matrixrun.run import outputs

    run = corpus_copy(SHAS[-1], tmp_path)
    (run / "chart.png").write_bytes(b"\x89PNG")
    out = outputs.render_run(run, tmp_path / "docs" / "report.md")
    for target in links(out.read_text()):
        assert (out.parent / target).exists(), target


def test_an_old_directory_is_migrated_once_and_again_when_a_file_changes(tmp_path: Path) -> None:
    run = corpus_copy(SHAS[0], tmp_path)
    rd = RunDir(run)
    first = rd.measurements()
    assert rd.migrated() is rd.migrated()  # every file a report reads: one migration
    settings = rd.read_json("settings.json")
    settings["analysis"]["baseline"] = "changed by a caller"
    assert rd.read_json("settings.json")["analysis"]["baseline"] != "changed by a caller"
    lines = (run / "results.jsonl").read_text().splitlines(keepends=True)
    (run / "results.jsonl").write_text("".join(lines[:-1]))
    assert len(rd.measurements()) == len(first) - 1

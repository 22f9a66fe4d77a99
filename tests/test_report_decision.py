"""The decision block and what feeds it (`report.sections.headline`, `checks`, `slo`): advice from
the regimes, checks with their numbers, what moved, folded metrics, the SLO view, notes, the
CI gate, `matrixrun compare`, the collapsed sections and the comment size at hundreds of
cells. Run directories are built with the helpers of test_report.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_report import (
    BASE,
    CAND,
    SPEC_TEXT,
    X,
    measurement,
    plan_of,
    with_spec,
    write_run,
    writeup_run,
)

from matrixrun.cli.main import main
from matrixrun.core.verdict import OverallVerdict, Verdict
from matrixrun.report import check_markdown, render_run_dir
from matrixrun.report.sections.headline import Advice, recommendations
from matrixrun.report.sections.slo import slo_best
from matrixrun.report.series import folded_metrics
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import SloBound


def verdict_of(rd: RunDir) -> Verdict:
    return Verdict.model_validate(rd.read_json("verdict.json"))


def head_of(doc: str) -> str:
    """The text before the first chart or table: the first screen."""
    cut = min(i for i in (doc.find("```mermaid"), doc.find("\n|")) if i >= 0)
    return doc[:cut]


def ratio_run(tmp_path: Path, ratios: list[float], spec_text: str = SPEC_TEXT) -> RunDir:
    """Candidate = baseline × ratio at each concurrency, one run per cell, σ declared 1%."""
    text = with_spec(spec_text, verify={"threshold": "3%", "noise": "1%", "max_runs": 1})
    plan = plan_of(text)
    ratio = dict(zip(X, ratios, strict=True))
    ms = [
        measurement(c, g.group_id, 100.0 * (ratio[c.x] if g.arm == CAND else 1.0))
        for g in plan.groups
        for c in g.cells
    ]
    return write_run(tmp_path, text, ms)


# --------------------------------------------------------------------------- the advice


def test_mixed_run_advises_each_regime_with_numbers_in_the_first_screen(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    head = head_of(doc)
    assert len(doc[: doc.find("\n|")]) > 0
    # verdict, advice and checks in the first ~600 characters after the title
    first = doc.split("\n", 2)[2][:700]
    assert "**Verdict on `output_throughput`: mixed.**" in first
    assert f"Use `{CAND}` at concurrency 10: +67.2% at 10"  # 64 is undecided (issue 13) in first
    assert f"keep `{BASE}` at concurrency 256–1024" in head
    assert "**Checks:** Ruled out: warm-up ✅" in head
    assert "**Hypothesis:**" in head


def test_advice_follows_the_data_not_the_order(tmp_path: Path) -> None:
    better = verdict_of(ratio_run(tmp_path / "b", [1.2] * 5))
    worse = verdict_of(ratio_run(tmp_path / "w", [0.8] * 5))
    same = verdict_of(ratio_run(tmp_path / "s", [1.0] * 5))
    split = verdict_of(ratio_run(tmp_path / "x", [1.2, 1.2, 1.2, 0.8, 0.8]))
    assert [r.advice for r in recommendations(better)] == [Advice.ADOPT]
    assert [r.advice for r in recommendations(worse)] == [Advice.KEEP]
    assert [r.advice for r in recommendations(same)] == [Advice.EITHER]
    rec = recommendations(split)[0]
    assert rec.advice == Advice.SPLIT
    assert [s.verdict.value for s in rec.stretches] == ["better", "worse"]
    assert [c.x for c in rec.stretches[0].cells] == [1, 10, 64]


def test_undecided_still_gives_direction_consistency_and_a_command(tmp_path: Path) -> None:
    text = with_spec(SPEC_TEXT, verify={"threshold": "3%", "max_runs": 1})
    plan = plan_of(text)
    ms = [
        measurement(c, g.group_id, 100.0 * (1.26 if g.arm == CAND else 1.0))
        for g in plan.groups
        for c in g.cells
    ]
    doc = render_run_dir(write_run(tmp_path / "runs" / "glm5_cutedsl" / "1", text, ms))
    head = head_of(doc)
    assert "**Verdict on `output_throughput`: undecided.**" in head
    assert "+26.0%, higher at all 5 points, each measured once" in head
    assert "Settle it" in head  # this run resumed with more runs allowed: nothing remeasured
    assert (  # the run's own copy is its record, so the command names a copy of it
        "`matrixrun run extended.yaml --resume runs/glm5_cutedsl/1  # extended.yaml: a copy "
        "of runs/glm5_cutedsl/1/spec.yaml with verify.max_runs: 2`"
    ) in head
    assert "better" not in head.split("**Checks:**")[0]  # never 'better' while undecided


# --------------------------------------------------------------------------- why and folding


def test_why_names_the_metric_that_moved_where_the_primary_did(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    why = next(x for x in doc.splitlines() if "worse (concurrency 256–1024)" in x)
    assert "time per output token" in why and "`mean_tpot_ms`, worse" in why


def test_metrics_identical_everywhere_are_folded(tmp_path: Path) -> None:
    rd = writeup_run(tmp_path)  # the helper gives mean_itl_ms = mean_tpot_ms
    assert folded_metrics(verdict_of(rd)) == {"mean_itl_ms": "mean_tpot_ms"}
    doc = render_run_dir(rd)
    assert "`mean_itl_ms`: identical to `mean_tpot_ms`" in doc
    assert "mean_itl_ms (ms" not in doc  # no table of its own


def test_metrics_that_differ_are_not_folded(tmp_path: Path) -> None:
    plan = plan_of(SPEC_TEXT)
    ms = []
    for g in plan.groups:
        for c in g.cells:
            m = measurement(c, g.group_id, 100.0, tpot=100.0)
            assert m.metrics is not None
            m.metrics.mean_itl_ms = 100.2 if g.arm == CAND else 100.0  # 0.2% apart
            ms.append(m)
    assert "mean_itl_ms" not in folded_metrics(verdict_of(write_run(tmp_path, SPEC_TEXT, ms)))


# --------------------------------------------------------------------------- SLO and notes


def test_slo_gives_the_best_throughput_within_it(tmp_path: Path) -> None:
    """TPOT ≤ 300 ms: the baseline meets it up to 256 (300 ms), the candidate up to 64."""
    rd = writeup_run(tmp_path)
    best = {b.arm: b for b in slo_best(verdict_of(rd), [SloBound(metric="mean_tpot_ms", max=300)])}
    assert best[BASE].x == 256 and best[BASE].value == pytest.approx(718.83)
    assert best[CAND].x == 64 and best[CAND].value == pytest.approx(249.23)
    assert best[CAND].points_meeting == 3
    none = slo_best(verdict_of(rd), [SloBound(metric="mean_tpot_ms", max=1)])
    assert all(b.value is None for b in none)


def test_spec_slo_and_notes_reach_the_document(tmp_path: Path) -> None:
    notes = "The loss at high load is in the decode GEMMs.\n\nNext: profile 256 with nsys."
    text = with_spec(SPEC_TEXT, slo=[{"metric": "mean_tpot_ms", "max": 300}], notes=notes)
    rd = writeup_run(tmp_path, spec_text=text)
    doc = render_run_dir(rd)
    assert notes in doc  # as written, paragraphs kept
    slo = doc.split("## Within the SLO: `mean_tpot_ms` ≤ 300.0 ms", 1)[1]
    # capacity (tests/test_capacity.py): TPOT ≤ 300 ms holds up to 256 on the baseline's
    # mean, exactly on the bound, so not beyond the runs' spread: the sweep cannot tell
    assert f"- `{BASE}`: concurrency about 260, between 256 and 1024" in slo
    assert "it holds surely up to 64 and misses surely from 1024" in slo
    assert "at 256: 6.400 req/s, 718.8 tok/s" in slo
    assert f"the sweep cannot tell `{CAND}`'s from `{BASE}`'s (about 0.43×" in head_of(doc)


def test_slo_on_an_unmeasured_metric_is_a_spec_error() -> None:
    from matrixrun.core.errors import SpecError
    from matrixrun.spec import parse_spec

    with pytest.raises(SpecError, match="slo"):
        parse_spec(with_spec(SPEC_TEXT, slo=[{"metric": "median_e2e_latency_ms", "max": 1000}]))


# --------------------------------------------------------------------------- gate and compare


def test_fail_on_gates_by_verdict(tmp_path: Path) -> None:
    mixed = writeup_run(tmp_path / "m")
    better = ratio_run(tmp_path / "b", [1.2] * 5)
    out = str(tmp_path / "r.md")
    assert main(["report", str(mixed.path), "-o", out, "--fail-on", "worse,mixed"]) == 1
    # worse fails a mixed candidate too: its cells at 256 and 1024 are worse (issue 33)
    assert main(["report", str(mixed.path), "-o", out, "--fail-on", "worse"]) == 1
    assert main(["report", str(better.path), "-o", out, "--fail-on", "worse,mixed"]) == 0
    assert main(["report", str(better.path), "-o", out]) == 0  # default: never


def test_compare_matches_arms_by_name_across_two_runs(tmp_path: Path) -> None:
    before = ratio_run(tmp_path / "runs" / "before", [1.0] * 5)
    after = ratio_run(tmp_path / "runs" / "after", [1.0, 1.0, 1.0, 1.3, 1.3])
    out = tmp_path / "runs" / "cmp"
    rc = main(
        [
            "compare",
            str(before.path),
            str(after.path),
            "--out",
            str(out),
            "--fail-on",
            "worse,mixed",
        ]
    )
    assert rc == 0  # the candidate arm got faster at 256 and 1024; nothing is worse
    doc = (out / "report.md").read_text()
    assert doc.startswith("# after against before (two runs compared)")
    assert check_markdown(doc) == []
    v = Verdict.model_validate_json((out / "verdict.json").read_text())
    assert {s.slice for s in v.slices} == {BASE, CAND}
    by_arm = {s.slice: s.candidates[0].overall.verdict for s in v.slices}
    assert by_arm[CAND] == OverallVerdict.BETTER and by_arm[BASE] != OverallVerdict.BETTER


# --------------------------------------------------------------------------- form and size


def test_details_are_allowed_other_html_is_not() -> None:
    ok = "<details>\n<summary>Noise</summary>\n\n- σ = 1%\n\n</details>\n"
    assert check_markdown(ok) == []
    assert any("raw HTML" in p for p in check_markdown("<div>x</div>\n"))
    assert any("<details>" in p for p in check_markdown("<details>\n<summary>a</summary>\n\nx\n"))


def test_hundreds_of_cells_fit_one_comment(tmp_path: Path) -> None:
    """A 2-server-axis × 4-input-length × 25-concurrency matrix of three candidates: the
    comment stays under GitHub's limit, keeps its decision first and checks clean."""
    concurrency = [1 + 40 * i for i in range(25)]  # 25 levels a run can hold (spec bounds)
    text = with_spec(
        SPEC_TEXT,
        arms={
            BASE: {"moe_runner_backend": BASE},
            CAND: {"moe_runner_backend": CAND},
            "triton": {"moe_runner_backend": "triton"},
            "deepgemm": {"moe_runner_backend": "deep_gemm"},
        },
        sweep={
            "concurrency": concurrency,
            "input_len": [128, 512, 2048, 8192],
            "server": {"chunked_prefill_size": [4096, 8192]},
        },
    )
    plan = plan_of(text)
    factor = {BASE: 1.0, CAND: 1.2, "triton": 0.7, "deepgemm": 1.01}
    ms = [
        measurement(c, g.group_id, 100.0 * factor[g.arm] * (1 + 0.01 * (c.x or 0) ** 0.5))
        for g in plan.groups
        for c in g.cells
    ]
    assert len(ms) >= 800
    doc = render_run_dir(write_run(tmp_path, text, ms))
    assert len(doc) <= 65_536
    assert check_markdown(doc) == []
    assert doc.split("\n", 2)[2].startswith("**Verdict on `output_throughput`:")
    assert re.search(r"Shortened to fit one GitHub comment|Cut at", doc)


def test_chart_png_with_a_legend_or_nothing_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    from matrixrun.report.chart_png import write_chart

    v = verdict_of(writeup_run(tmp_path / "r"))
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(builtins, "__import__", no_matplotlib)
        assert write_chart(v, tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()
    pytest.importorskip("matplotlib")  # the optional extra: `pip install -e .[plot]`
    out = write_chart(v, tmp_path / "chart.png")
    assert out is not None and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_warmup_the_analysis_confirmed_is_never_ruled_out() -> None:
    """The arm's repeats show first-run warm-up (a caveat of the analysis): the checks line
    says so even where single warm reruns look like they falsify it."""
    from test_analysis import penalised_tie
    from test_analysis import settings as analysis_settings

    from matrixrun.analysis import analyse
    from matrixrun.core.verdict import CheckOutcome, Explanation
    from matrixrun.report.sections.checks import checks, checks_line

    v = analyse(penalised_tie(warm=True), analysis_settings())
    found = checks(v)
    warm = next(e for e in found.explanations if e.explanation == Explanation.WARMUP)
    assert warm.outcome == CheckOutcome.CONFIRMED
    line = checks_line(found, simulated=False, ingested=False, axis="concurrency")
    assert "Warm-up confirmed ❌" in line and "Ruled out: warm-up" not in line


def test_the_settle_line_does_not_let_one_near_tie_hide_the_easy_points() -> None:
    from matrixrun.report.sections.headline import settle

    cmd = "nox -s matrix -- spec/x.yaml"
    # the H200 run: 2-3 runs decide three points, the near tie at concurrency 1 takes 163
    line = settle(cmd, [3, 163, 2, 3], 4)
    assert "about 3 runs per arm would decide 3 of the 4 undecided points" in line
    # past 20 runs per arm a count is no advice (issue 33): said as not worth running
    assert "1 more would need over 20, not worth running" in line and "163" not in line
    assert settle(cmd, [5, 5], 2) == f"Settle it (about 5 runs per arm): `{cmd}`."
    assert "every one with an estimate about 9" in settle(cmd, [4, 9], 3)
    assert settle(cmd, [], 2) == f"Settle it (more runs): `{cmd}`."
    assert settle(None, [3], 1) == ""


def test_an_untested_warmup_says_when_each_cell_ran_after_an_unmeasured_copy() -> None:
    """`warmup_requests: cell` lowers a first pass's warm-up without ruling it out: the checks
    line still marks it untested, and says the copy ran."""
    from matrixrun.report.sections.checks import Checks, checks_line

    none = Checks(explanations=[], suspect=[], agreement={}, failed_requests=0,
                  failed_measurements=0, total_requests=10)  # fmt: skip
    plain = checks_line(none, simulated=False, ingested=False, axis="concurrency")
    copied = checks_line(none, simulated=False, ingested=False, axis="concurrency", copied=True)
    assert "not tested: warm-up or an odd server instance ⚠️ (no rerun tested it)" in plain
    assert "no rerun tested it; each cell ran after an unmeasured copy of itself" in copied
    assert "unmeasured copy" not in plain

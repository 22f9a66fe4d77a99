"""The verdict document: run directories built from synthetic measurements, rendered, parsed
with markdown-it-py, and checked for behaviours (not whole documents).

The reference case is the CuteDSL write-up (shared/examples/000_63e9b5e47fcf52b0.txt): five
concurrencies, a mixed verdict, a crossover between 64 and 256, and a warm rerun at 256
(515.77 vs 515.58 tok/s) that falsified the JIT-warmup explanation.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import Metrics
from matrixrun.core.rerun_reason import RerunWhy, WhyKind
from matrixrun.core.verdict import Verdict
from matrixrun.plan import Cell, Plan, expand
from matrixrun.report import check_markdown, render, render_run_dir, table_cells
from matrixrun.report.document import build_document
from matrixrun.report.fmt import exact as fmt_exact
from matrixrun.report.fmt import value as fmt_value
from matrixrun.report.sections.reruns import verify_whys
from matrixrun.report.sections.setup import effective_arg_differences
from matrixrun.run.outputs import analyse_run
from matrixrun.rundir.results import RunDir
from matrixrun.rundir.settings import RunSettings, run_settings, write_settings
from matrixrun.spec import parse_spec

ROOT = Path(__file__).resolve().parent.parent
SPEC_TEXT = (ROOT / "spec" / "glm5_cutedsl.yaml").read_text()
MULTI_TEXT = (ROOT / "tests" / "specs" / "multi.yaml").read_text()

BASE, CAND = "flashinfer_cutlass", "flashinfer_cutedsl"
X = [1, 10, 64, 256, 1024]
BASELINE = [10.36, 38.46, 218.74, 718.83, 1603.04]
CANDIDATE = [10.07, 64.29, 249.23, 515.58, 796.93]
#: mean TPOT (ms) per concurrency, made up: lower is better.
TPOT = {BASE: [95.0, 120.0, 250.0, 300.0, 600.0], CAND: [97.0, 80.0, 230.0, 458.51, 1100.0]}

#: The verify event's reason, as the runner records it: data, worded by the report.
WARM_WHY = RerunWhy(
    kind=WhyKind.WARM_CHECK, arm=CAND, baseline=BASE, change=515.58 / 718.83 - 1, surprise=0.10
).model_dump(mode="json", exclude_none=True)


# --------------------------------------------------------------------------- building runs


def metrics(value: float, *, tpot: float = 100.0, failed: int = 0, completed: int = 64) -> Metrics:
    return Metrics(
        duration=10.0,
        completed=completed,
        failed=failed,
        total_input_tokens=512 * completed,
        total_output_tokens=128 * completed,
        request_throughput=completed / 10.0,
        input_throughput=value * 4,
        output_throughput=value,
        total_throughput=value * 5,
        mean_tpot_ms=tpot,
        mean_itl_ms=tpot,
        p99_ttft_ms=1000.0,
    )


def measurement(
    cell: Cell,
    group: str,
    value: float,
    *,
    attempt: int = 1,
    instance: str = "",
    reason: Any = "first",
    tpot: float = 100.0,
    simulated: bool = False,
    time_scale: float = 1.0,
    failed: int = 0,
    error: str | None = None,
    client: str = "builtin",
) -> Measurement:
    return Measurement(
        cell_id=cell.cell_id,
        point_id=cell.point_id,
        arm=cell.arm,
        group_id=group,
        slice=cell.slice,
        point=cell.point,
        attempt=attempt,
        instance=instance or f"{group}#1",
        reason=reason,
        metrics=None if error else metrics(value, tpot=tpot, failed=failed),
        error=error,
        simulated=simulated,
        time_scale=time_scale,
        client=client,
    )


def write_run(
    path: Path,
    spec_text: str,
    measurements: list[Measurement],
    env: dict[str, Any] | None = None,
    events: list[dict[str, Any]] | None = None,
    correctness: dict[str, float] | None = None,
) -> RunDir:
    """A run directory as `matrixrun run` leaves it before its last two stages, then analysed
    (`stages.analyse_run`): what `render_run_dir` reads."""
    rd = RunDir(path).create()
    spec = parse_spec(spec_text)
    plan = expand(spec)
    rd.write_text("spec.yaml", spec_text)
    rd.write_json("plan.json", plan.model_dump(mode="json"))
    write_settings(rd, run_settings(spec, plan, correctness=correctness))
    rd.write_json("env.json", env or {})
    for m in measurements:
        rd.append(m)
    for e in events or []:
        rd.event(e.pop("event"), **e)
    analyse_run(rd)
    return rd


def with_spec(text: str, **changes: Any) -> str:
    """The spec text with top-level keys replaced (round-trip YAML, so the rest is as written)."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    data = yaml.load(text)
    for key, value in changes.items():
        data[key] = value
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def plan_of(spec_text: str) -> Plan:
    return expand(parse_spec(spec_text))


def writeup_run(
    tmp_path: Path,
    *,
    rerun: bool = True,
    simulated: bool = False,
    time_scale: float = 1.0,
    spec_text: str = SPEC_TEXT,
    env: dict[str, Any] | None = None,
    extra: list[Measurement] | None = None,
    correctness: dict[str, float] | None = None,
) -> RunDir:
    """The write-up's numbers as a run directory of the glm5_cutedsl spec."""
    plan = plan_of(spec_text)
    ms: list[Measurement] = []
    events: list[dict[str, Any]] = []
    values = {BASE: BASELINE, CAND: CANDIDATE}
    for g in plan.groups:
        for cell, value, tpot in zip(g.cells, values[g.arm], TPOT[g.arm], strict=True):
            ms.append(
                measurement(
                    cell, g.group_id, value, tpot=tpot, simulated=simulated, time_scale=time_scale
                )
            )
    if rerun:
        g = next(g for g in plan.groups if g.arm == CAND)
        cell = next(c for c in g.cells if c.x == 256)
        events.append(
            {
                "event": "verify",
                "stage": 1,
                "cell": cell.cell_id,
                "attempt": 2,
                "arm": CAND,
                "x": 256,
                "reason": "surprise",
                "why": WARM_WHY,
                "instance": f"{g.group_id}#1",
            }
        )
        ms.append(
            measurement(
                cell,
                g.group_id,
                515.77,
                attempt=2,
                reason="surprise",
                tpot=458.4,
                simulated=simulated,
                time_scale=time_scale,
            )
        )
    ms += extra or []
    servers = {
        f"{g.group_id}#1": {
            "group": g.group_id,
            "arm": g.arm,
            "slice": g.slice,
            "version": "0.5.4.post1",
            "startup_s": 412.5,
            "args": {
                "tp_size": 8,
                "moe_runner_backend": g.flags["moe_runner_backend"],
                "port": 30000 + i,
                "random_seed": i,
            },
        }
        for i, g in enumerate(plan.groups)
    }
    base_env = {
        "harness": {"name": "matrixrun", "version": "0.1.0"},
        "python": "3.11.9",
        "platform": "Linux-6.8-x86_64",
        "git_sha": "abc1234",
        "engine": "sglang",
        "client": "builtin",
        "simulated": simulated,
        "time_scale": time_scale,
        "servers": servers,
        "gpus": [
            {
                "name": "NVIDIA RTX PRO 6000 Blackwell",
                "driver_version": "575.51",
                "memory_total": "97887 MiB",
            }
        ]
        * 8,
    }
    return write_run(
        tmp_path / "runs" / "glm5_cutedsl" / "20260101-000000",
        spec_text,
        ms,
        {**base_env, **(env or {})},
        events,
        correctness,
    )


# --------------------------------------------------------------------------- reading output


def tables(doc: str) -> list[list[list[str]]]:
    """Every table in the document as rows of cell texts (header first), via markdown-it."""
    tokens = MarkdownIt("commonmark").enable("table").parse(doc)
    out: list[list[list[str]]] = []
    row: list[str] = []
    inside = False
    for tok in tokens:
        if tok.type == "table_open":
            out.append([])
            inside = True
        elif tok.type == "table_close":
            inside = False
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "inline" and inside:
            row.append(tok.content)
        elif tok.type == "tr_close":
            out[-1].append(row)
    return out


def comparison_table(doc: str, header_start: str = "concurrency") -> list[list[str]]:
    return next(t for t in tables(doc) if t[0][0] == header_start)


def section(doc: str, title: str) -> str:
    """The text of one `## title` section, or of one collapsed `<details>` whose summary
    starts with `title`."""
    match = re.search(rf"^## {re.escape(title)}.*?(?=^## |^<details>|\Z)", doc, re.M | re.S)
    if match is None:
        match = re.search(rf"^<summary>{re.escape(title)}.*?^</details>", doc, re.M | re.S)
    assert match, f"no section {title!r}"
    return match.group(0)


# --------------------------------------------------------------------------- the write-up


def test_writeup_document_parses_and_its_table_matches_the_writeup(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    assert check_markdown(doc) == []
    rows = comparison_table(doc)
    assert rows[0] == [
        "concurrency",
        f"`{BASE}` (tok/s)",
        f"`{CAND}` (tok/s)",
        "change [interval]",
        "verdict",
        "n (baseline/candidate)",
    ]
    body = rows[1:]
    assert [r[0] for r in body] == ["1", "10", "64", "256", "1024"]  # the sweep value first
    assert [r[1] for r in body] == ["10.36", "38.46", "218.7", "718.8", "1,603"]
    # 256: geometric mean of 515.58 and 515.77
    assert [r[2] for r in body] == ["10.07", "64.29", "249.2", "515.7", "796.9"]
    assert [r[3].split(" ")[0] for r in body] == ["−2.8%", "+67.2%", "+13.9%", "−28.3%", "−50.3%"]
    assert body[3][3].startswith("−28.3% [") and body[3][4:] == [
        "worse (n=1)",
        "1/2, candidate on 1 server",
    ]
    # A stage-1 cell is judged at the first look's 99.64% (α split ∝ k² over 3 looks), so its
    # interval no longer excludes 0 ("small change" came from the old equal 98.33%).
    assert body[0][3].startswith("−2.8% [") and body[0][4:] == ["undecided (n=1)", "1/1"]


def test_writeup_headline_regimes_and_crossover(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    head = doc.split("```mermaid", 1)[0]
    assert head.startswith("# CuteDSL vs CUTLASS")
    assert "SIMULATED" not in doc
    assert "**Verdict on `output_throughput`: mixed.**" in head
    # the advice follows the regimes, with the changes and the absolute values they rest on
    assert f"Use `{CAND}` at concurrency 10: +67.2% at 10 (38.46 → 64.29 tok/s)" in head
    assert f"keep `{BASE}` at concurrency 256–1024: −28.3% at 256 (718.8 → 515.7 tok/s)" in head
    assert "Provisional" in head
    comparison = section(doc, "Results")
    # issue 13: one warm pair is df 1, and a cell at n = 1/1 is in its first state (99.93%):
    # the +13.9% at 64 is inconclusive, so the bracket is 10 to 256
    crossover = "crossover between concurrency 10 and 256 (≈ 72, interpolated in log concurrency)"
    assert (
        "Along concurrency: undecided at 1, better at 10, undecided at 64, worse at 256 "
        f"and 1024; {crossover}."
    ) in comparison
    # one wording of the crossover: the headline says it exactly as the table does
    assert f"; {crossover}." in head
    worded = r"crossover between concurrency \d+ and \d+ \(≈ \d+, interpolated in log concurrency\)"
    assert len(re.findall(worded, doc)) == doc.count("interpolated") > 2


def test_inconclusive_cells_are_never_called_better(tmp_path: Path) -> None:
    rd = writeup_run(tmp_path)
    doc = render_run_dir(rd)
    row_1 = comparison_table(doc)[1]
    assert "better" not in " ".join(row_1)
    undecided = section(doc, "Results").split("Undecided:", 1)[1]
    line = next(x for x in undecided.splitlines() if x.startswith("- at concurrency 1:"))
    # the cell at 1 has σ and an estimate: it says how many runs per arm (both have n = 1)
    verdict = Verdict.model_validate(rd.read_json("verdict.json"))
    cell = next(c for _, _, c in verdict.comparisons() if c.x == 1)
    assert cell.verdict == "undecided" and cell.limiting_arm == "both"
    assert cell.runs_needed is not None
    assert line == (
        f"- at concurrency 1: about {cell.runs_needed} runs per arm in all, the extra ones each "
        "on a fresh server, would settle it if the observed change and the noise estimate held"
    )


def test_rerun_log_gives_both_numbers_why_and_the_falsified_explanation(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    log = section(doc, "Rerun log")
    assert (
        "the slowdown at concurrency 256 is not warmup: warm rerun 515.77 vs first run "
        "515.58 tok/s (+0.04%; noise explains up to +0.061% for one pair, 95% one-sided; on "
        f"its own the rerun gives −28.2% vs `{BASE}`); a warm-up large enough to explain it "
        "would have shown beyond that — the JIT/warmup explanation is falsified." in log
    )
    assert "**Ruled out.**" in log
    assert "surprising change; same warm server" in log
    # the first screen says it too, with both numbers
    assert (
        "Ruled out: warm-up ✅ (warm rerun 515.77 vs first run 515.58 tok/s at concurrency 256)"
        in doc
    )
    assert (
        "Why: first-run change −28.3% vs flashinfer_cutlass exceeds the surprise threshold 10% "
        "with flashinfer_cutedsl the slower arm: a warm rerun tests first-run JIT compile/warmup."
    ) in log


def test_no_reruns_are_said_plainly_with_the_reason(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path, rerun=False))
    log = next(x for x in doc.splitlines() if x.startswith("**Reruns:**"))
    assert "**Reruns:** none." in log
    assert "surprising or undecided, but no rerun was recorded" in log
    one_run = with_spec(SPEC_TEXT, verify={"threshold": "3%", "max_runs": 1})
    doc = render_run_dir(writeup_run(tmp_path / "one", rerun=False, spec_text=one_run))
    assert "verify.max_runs: 1" in next(x for x in doc.splitlines() if x.startswith("**Reruns:**"))


def test_sigma_statement_names_source_df_and_looks(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    noise = section(doc, "Noise and confidence")
    # one warm pair is 1 df: σ is said to be unknown, not stated as a measurement (issue 33)
    assert (
        "σ ≈ 0.026% on only 1 df (warm repeats on the same server: within-instance only, may "
        "understate): too few to know the noise" in noise
    )
    assert (
        "95% confidence spent over every state a cell can stop in (Lan–DeMets O'Brien–Fleming "
        "on the share of its planned runs): a cell's interval is at 99.9%, 99.5%, 98.9%, "
        "98.5%, 98.2% with 2, 3, 4, 5, 6 runs in both arms together" in noise
    )
    doc = render_run_dir(writeup_run(tmp_path / "none", rerun=False))
    assert "no noise estimate" in section(doc, "Noise and confidence")


def test_simulated_only_when_simulated(tmp_path: Path) -> None:
    real = render_run_dir(writeup_run(tmp_path / "real"))
    assert "SIMULATED" not in real and "--rehearse" not in real
    spec_text = with_spec(SPEC_TEXT, rehearsal={"time_scale": 20, "stream_interval": 8})
    sim = render_run_dir(
        writeup_run(tmp_path / "sim", simulated=True, time_scale=20.0, spec_text=spec_text)
    )
    first_line = sim.splitlines()[0]
    assert first_line.startswith("# SIMULATED — ")
    assert "the simulator ran 20× faster; times converted back" in sim
    assert "8 tokens per event" in sim
    assert "nox -s matrix -- runs/glm5_cutedsl/20260101-000000/spec.yaml --rehearse" in sim
    assert check_markdown(sim) == []


def test_reproduce_commands(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    repro = section(doc, "Reproduce")
    # no spec path recorded (settings.json's spec_path): the run's own copy, never a guess
    # from the directory's name (issue 33: a spec in myspec/ is not spec/x.yaml)
    assert "nox -s matrix -- runs/glm5_cutedsl/20260101-000000/spec.yaml\n" in repro
    assert "matrixrun report runs/glm5_cutedsl/20260101-000000" in repro
    assert str(tmp_path) not in doc  # no machine-local paths


def test_setup_shows_only_the_flags_the_arms_differ_in(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    setup = section(doc, "Setup")
    flags = next(t for t in tables(doc) if t[0][0] == "flag")
    assert flags == [
        ["flag", f"`{BASE}` (baseline)", f"`{CAND}`"],
        ["`--moe-runner-backend`", BASE, CAND],
    ]
    assert "common args `--tp 8`" in setup
    assert "512 / 128 tokens" in setup and "inf (all at once)" in setup
    assert "built-in streaming client" in setup
    assert "Warning" not in setup  # effective args differ only in asked-for keys, port, seed
    head = doc.split("## ", 1)[0]
    # the author's text made inert Markdown (an escaped `_` renders as itself)
    assert "**Hypothesis:** *flashinfer\\_cutedsl JIT-compiles kernels" in head


def test_warning_when_effective_args_differ_in_something_not_asked(tmp_path: Path) -> None:
    rd = writeup_run(tmp_path)
    env = rd.read_json("env.json")
    for info in env["servers"].values():
        if info["arm"] == CAND:
            info["args"]["attention_backend"] = "triton"
        else:
            info["args"]["attention_backend"] = "fa3"
    rd.write_json("env.json", env)
    setup = section(render_run_dir(rd), "Setup")
    assert "**Warning:**" in setup
    assert f"`attention_backend`: `{BASE}` = fa3, `{CAND}` = triton" in setup


def test_effective_arg_differences_ignores_asked_keys_ports_and_seeds() -> None:
    servers = {
        "a#1": {
            "arm": "a",
            "args": {
                "x": 1,
                "port": 1,
                "random_seed": 1,
                "flag": "p",
                "sim_profile": {"k": 1},
                "y": [1],
            },
        },
        "b#1": {
            "arm": "b",
            "args": {
                "x": 1,
                "port": 2,
                "random_seed": 2,
                "flag": "q",
                "sim_profile": {"k": 2},
                "y": [2],
            },
        },
        "b#2": {"arm": "b", "args": {"x": 2, "port": 3, "flag": "q", "y": [2]}},
    }
    diffs = effective_arg_differences(servers, ["a", "b"], asked={"flag"})
    assert [(d.key, d.values) for d in diffs] == [
        ("x", ["1", "1 / 2"]),
        ("y", ["[1]", "[2]"]),
    ]


def test_failures_listed_with_cell_arm_attempt_and_error(tmp_path: Path) -> None:
    plan = plan_of(SPEC_TEXT)
    g = next(g for g in plan.groups if g.arm == CAND)
    cell = next(c for c in g.cells if c.x == 1024)
    extra = [
        measurement(
            cell,
            g.group_id,
            0.0,
            attempt=2,
            reason="fresh_server",
            instance=f"{g.group_id}#2",
            error="server g#2 died (exit code -9) during the cell: CUDA OOM",
        )
    ]
    doc = render_run_dir(writeup_run(tmp_path, extra=extra))
    fail = section(doc, "Failures")
    failed = next(t for t in tables(doc) if t[0][0] == "cell")
    assert failed[1][:3] == ["concurrency 1024", f"`{CAND}`", "2"]
    assert "CUDA OOM" in failed[1][5]
    assert "Failed requests: none." in fail
    # the 1024 cell notes the failed run beside the candidate's value
    row = comparison_table(doc)[5]
    assert row[2] == "796.9 (1 run(s) failed)"
    assert "better" not in row[4]


def test_failed_requests_beside_metrics_and_none_when_none(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    assert "## Failures" not in doc  # nothing failed: the checks line says so
    assert re.search(r"0 failed requests of [\d,]+ ✅", doc)
    plan = plan_of(SPEC_TEXT)
    ms = []
    for g in plan.groups:
        for cell in g.cells:
            ms.append(
                measurement(
                    cell,
                    g.group_id,
                    100.0 if g.arm == BASE else 130.0,
                    failed=3 if g.arm == CAND and cell.x == 64 else 0,
                )
            )
    doc = render_run_dir(write_run(tmp_path / "f", SPEC_TEXT, ms))
    row = next(r for r in comparison_table(doc)[1:] if r[0] == "64")
    assert row[2] == "130.0 (3/67 req failed)"
    assert "3 of 67 requests failed (4.5%)" in section(doc, "Failures")


def test_latency_tables_have_the_same_shape_and_verdicts(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    lat = section(doc, "Secondary metrics")
    assert "- `mean_tpot_ms`: " in lat  # each secondary metric's verdict in one line
    tables_of = section(doc, "mean_tpot_ms (ms, lower is better)")  # collapsed
    tpot = next(t for t in tables(tables_of) if t[0][0] == "concurrency")
    assert tpot[0][:4] == ["concurrency", f"`{BASE}` (ms)", f"`{CAND}` (ms)", "change [interval]"]
    assert [r[0] for r in tpot[1:]] == ["1", "10", "64", "256", "1024"]
    assert tpot[5][3].startswith("+83.3%")  # 1100 / 600 − 1: latency up


def test_environment_lists_servers_versions_startup_and_gpus(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path, env={"hardware_check": "override: 8x vs 4x"}))
    env = section(doc, "Environment")
    assert "0.1.0" in env and "3.11.9" in env and "abc1234" in env
    assert "8× NVIDIA RTX PRO 6000 Blackwell (driver 575.51, 97887 MiB)" in env
    assert "override: 8x vs 4x" in env
    servers = next(t for t in tables(doc) if t[0][0] == "server instance")
    assert servers[0] == ["server instance", "arm", "engine version", "startup"]
    assert len(servers) == 3 and all(
        r[2] == "0.5.4.post1" and r[3] == "412.5 s" for r in servers[1:]
    )


def test_correctness_gate_marks_suspects(tmp_path: Path) -> None:
    doc = render_run_dir(writeup_run(tmp_path))
    assert "No output-agreement check" in section(doc, "Correctness gate")
    doc = render_run_dir(writeup_run(tmp_path / "c", correctness={CAND: 0.62}))
    gate = next(t for t in tables(doc) if t[0][0] == "arm")
    assert gate[1][:3] == [f"`{CAND}`", "62.0%", "90%"]
    assert "suspect" in gate[1][3]
    head = doc.split("## ", 1)[0]
    assert "**Suspect:**" in head and "outputs disagree ❌ (`flashinfer_cutedsl` 62.0%" in head
    assert "Use `" not in head  # its speed does not count: no advice to adopt it


def test_multi_slice_run_has_one_section_per_slice(tmp_path: Path) -> None:
    plan = plan_of(MULTI_TEXT)
    ms = [
        measurement(c, g.group_id, 100.0 if g.arm == "base" else 120.0)
        for g in plan.groups
        for c in g.cells
    ]
    doc = render_run_dir(write_run(tmp_path, MULTI_TEXT, ms))
    assert check_markdown(doc) == []
    comparison = section(doc, "Results")
    headings = re.findall(r"^### (.+)$", comparison, re.M)
    assert len(headings) == len(plan.slices) == 6  # 2×2×2 minus excluded, plus included
    assert all("model `" in h and "hardware `" in h for h in headings)
    assert any("`--chunked-prefill-size 8192`" in h for h in headings)
    assert comparison.count("| concurrency |") == 6
    assert "**Reruns:** none." in doc


def test_several_candidates_get_a_table_each(tmp_path: Path) -> None:
    text = SPEC_TEXT.replace(
        "  flashinfer_cutedsl: {moe_runner_backend: flashinfer_cutedsl}\n",
        "  flashinfer_cutedsl: {moe_runner_backend: flashinfer_cutedsl}\n"
        "  triton: {moe_runner_backend: triton}\n",
    )
    plan = plan_of(text)
    value = {BASE: 100.0, CAND: 150.0, "triton": 60.0}
    ms = [measurement(c, g.group_id, value[g.arm]) for g in plan.groups for c in g.cells]
    doc = render_run_dir(write_run(tmp_path, text, ms))
    assert check_markdown(doc) == []
    assert f"**`{CAND}` vs `{BASE}`**" in doc and f"**`triton` vs `{BASE}`**" in doc
    assert sum(1 for t in tables(doc) if t[0][0] == "concurrency" and "tok/s" in t[0][1]) == 2
    flags = next(t for t in tables(doc) if t[0][0] == "flag")
    assert flags[1] == ["`--moe-runner-backend`", BASE, CAND, "triton"]


def test_ingested_run_renders_from_settings_and_ingest_json(tmp_path: Path) -> None:
    from matrixrun.core.verdict import AnalysisSettings

    rd = RunDir(tmp_path / "ingested").create()
    settings = AnalysisSettings(baseline="cutlass", candidates=["cutedsl"])
    write_settings(rd, RunSettings(analysis=settings))
    command = "matrixrun ingest a.jsonl b.jsonl --baseline cutlass --out runs/x"
    rd.write_json("ingest.json", {"files": ["a.jsonl", "b.jsonl"], "command": command})
    rd.write_json(
        "env.json",
        {
            "client": "bench_serving",
            "servers": {
                "cutlass#1": {
                    "arm": "cutlass",
                    "version": "0.5.4",
                    "args": {"moe_runner_backend": "flashinfer_cutlass"},
                },
                "cutedsl#1": {
                    "arm": "cutedsl",
                    "version": "0.5.4",
                    "args": {"moe_runner_backend": "flashinfer_cutedsl"},
                },
            },
        },
    )
    for arm, vals in (("cutlass", BASELINE), ("cutedsl", CANDIDATE)):
        for x, v in zip(X, vals, strict=True):
            rd.append(
                Measurement(
                    cell_id=f"{x}/{arm}",
                    point_id=str(x),
                    arm=arm,
                    group_id=arm,
                    point={"concurrency": x},
                    instance=f"{arm}#1",
                    metrics=metrics(v),
                    client="bench_serving",
                    extra={
                        "dataset_name": "random",
                        "random_input_len": 512,
                        "random_output_len": 128,
                        "backend": "sglang",
                        "server_version": "0.5.4",
                    },
                )
            )
    analyse_run(rd)
    doc = render_run_dir(rd)
    assert check_markdown(doc) == []
    assert "Hypothesis" not in doc
    assert "512 / 128 tokens" in doc and "sglang.benchmark.serving" in doc
    assert command in section(doc, "Reproduce")
    # the run directory as seen from its report.md, not this machine's absolute path
    assert "matrixrun report .\n" in section(doc, "Reproduce") and str(rd.path) not in doc
    assert [r[0] for r in comparison_table(doc)[1:]] == ["1", "10", "64", "256", "1024"]
    flags = next(t for t in tables(doc) if t[0][0] == "flag")
    assert flags[1] == ["`moe_runner_backend`", "flashinfer_cutlass", "flashinfer_cutedsl"]
    assert "**Reruns:** none. The input files hold one run per cell" in doc


# --------------------------------------------------------------------------- size and form


def test_size_budget_drops_detail_in_order_and_says_so(tmp_path: Path) -> None:
    document = build_document(writeup_run(tmp_path))
    full = render(document)
    assert len(full) < 65_536 and "Shortened" not in full
    limit = len(full) - 200
    short = render(document, limit=limit)
    assert len(short) <= limit
    assert "Shortened to fit one GitHub comment" in short
    assert "the per-instance server table" in short
    assert check_markdown(short, limit) == []
    # at half the size even every trim step is not enough: the document is cut, and says so
    tiny = render(document, limit=len(full) // 2)
    assert len(tiny) <= len(full) // 2
    assert tiny.endswith(
        f"*Cut at {len(full) // 2:,} characters (GitHub's comment limit). The full document: "
        f"`matrixrun report {document.run_dir}`.*\n"
    )


def test_check_markdown_finds_ragged_tables_and_html() -> None:
    good = "| a | b |\n|---|---|\n| 1 | 2 \\| 3 |\n"
    assert check_markdown(good) == []
    ragged = "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n"
    assert any("3 cells, the header 2" in p for p in check_markdown(ragged))
    assert any("raw HTML" in p for p in check_markdown("text <b>bold</b>\n"))
    assert table_cells("| a | `x \\| y` |") == 2


def test_verify_whys_are_keyed_by_the_attempt_the_event_names() -> None:
    """A rerun's reason is data: the verify event names the attempt it asked for, so the
    order of events does not matter and an event without an attempt pairs with nothing."""
    events = [
        {"event": "verify", "cell": "c1", "attempt": 3, "reason": "undecided", "why": "w2"},
        {"event": "verify", "cell": "c1", "attempt": 2, "reason": "surprise", "why": "w1"},
        {"event": "verify", "cell": "c2", "reason": "surprise", "why": "lost"},
        {"event": "launch", "cell": "c1", "attempt": 4, "why": "not a verify event"},
    ]
    assert verify_whys(events) == {("c1", 2): "w1", ("c1", 3): "w2"}


def test_rerun_numbers_keep_five_significant_digits() -> None:
    assert [fmt_exact(v) for v in (515.77, 520.803, 10.4331, 1603.04, 0.5)] == [
        "515.77",
        "520.80",
        "10.433",
        "1603.0",
        "0.50000",
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1603.04, "1,603"),
        (515.58, "515.6"),
        (10.36, "10.36"),
        (0.012345, "0.01235"),
        (16030.4, "16,030"),
        (-2.5, "−2.500"),
        (None, "n/a"),
    ],
)
def test_values_have_four_significant_digits(value: float | None, text: str) -> None:
    assert fmt_value(value) == text


def test_example_document_is_json_serialisable(tmp_path: Path) -> None:
    """The document is plain data, every section's part too: a custom template (or another
    tool) can rely on that."""
    document = build_document(writeup_run(tmp_path))
    assert {"headline", "comparison", "setup", "reruns"} <= document.parts.keys()
    json.dumps(dataclasses.asdict(document))


def test_non_monotone_series_says_re_measure(tmp_path: Path) -> None:
    text = with_spec(SPEC_TEXT, verify={"threshold": "3%", "noise": "1%", "max_runs": 1})
    plan = plan_of(text)
    ratio = dict(zip(X, [1.2, 0.8, 1.2, 0.8, 1.2], strict=True))
    ms = [
        measurement(c, g.group_id, 100.0 * (ratio[c.x] if g.arm == CAND else 1.0))
        for g in plan.groups
        for c in g.cells
    ]
    doc = render_run_dir(write_run(tmp_path, text, ms))
    comparison = section(doc, "Results")
    assert "non-monotone, re-measure" in comparison
    assert "crossover between" not in comparison.split("Along concurrency:", 1)[1]
    assert "declared prior, not measured" in section(doc, "Noise and confidence")


def test_other_client_axes_make_labelled_series_tables(tmp_path: Path) -> None:
    text = with_spec(SPEC_TEXT, sweep={"concurrency": [1, 64], "input_len": [512, 4096]})
    plan = plan_of(text)
    ms = [
        measurement(c, g.group_id, 100.0 if g.arm == BASE else 150.0)
        for g in plan.groups
        for c in g.cells
    ]
    doc = render_run_dir(write_run(tmp_path, text, ms))
    assert check_markdown(doc) == []
    assert f"**`{CAND}` vs `{BASE}` · input_len 512**" in doc
    assert f"**`{CAND}` vs `{BASE}` · input_len 4096**" in doc
    first_cells = [r[0] for t in tables(doc) if t[0][0] == "concurrency" for r in t[1:]]
    assert set(first_cells) == {"1", "64"}


def test_explanation_checks_confirmed_and_falsified(tmp_path: Path) -> None:
    """Fresh server: reproducing the effect on its own beyond noise falsifies "odd instance";
    not reproducing it confirms it only where the two servers differ beyond noise (else not
    settled; `test_findings.py` has a confirmed one). Warm: a rerun better beyond the margin
    and beyond what noise explains for one pair (run noise at its point) confirms warmup;
    beyond the margin only settles nothing."""
    plan = plan_of(SPEC_TEXT)
    g = next(g for g in plan.groups if g.arm == CAND)
    at = {c.x: c for c in g.cells}
    fresh = f"{g.group_id}#2"
    extra = [
        measurement(at[1024], g.group_id, 800.0, attempt=2, reason="fresh_server", instance=fresh),
        measurement(at[64], g.group_id, 220.0, attempt=2, reason="fresh_server", instance=fresh),
        measurement(at[10], g.group_id, 75.0, attempt=2, reason="surprise"),
        measurement(at[256], g.group_id, 556.8, attempt=2, reason="surprise"),
    ]
    log = section(render_run_dir(writeup_run(tmp_path, extra=extra)), "Rerun log")
    entries = {line.split("**")[1]: line for line in log.splitlines() if line.startswith("- **")}
    assert (
        "odd-instance explanation is falsified"
        in entries[f"`{CAND}` at concurrency 1024, attempt 2"]
    )
    assert "**Ruled out.**" in entries[f"`{CAND}` at concurrency 1024, attempt 2"]
    # back to the baseline on its own (+0.6%), but −11.73% from its first run is within that
    # pair's noise (±21.9%): one fresh server cannot say the first was odd (issue 44)
    e64 = entries[f"`{CAND}` at concurrency 64, attempt 2"]
    assert "on its own the rerun gives +0.6%" in e64 and "within noise, ±" in e64
    assert "**Not settled.**" in e64 and "another fresh launch at this point" in e64
    e10 = entries[f"`{CAND}` at concurrency 10, attempt 2"]
    assert "warm rerun 75.000 vs first run 64.290 tok/s (+16.66%; noise explains up to +" in e10
    # the pair at 10 is most of what the model knows of run noise there (per point,
    # moderated): one pair cannot be beyond the noise it itself measures, so not settled
    assert "**Not settled.**" in e10
    # +8% is beyond the margin but within what σ ≈ 6% explains for one pair (z·√2·σ ≈ 15%)
    e256 = entries[f"`{CAND}` at concurrency 256, attempt 2"]
    assert "(+7.99%; " in e256
    assert "neither confirmed nor falsified" in e256 and "**Not settled.**" in e256


def test_reproduce_uses_the_spec_copy_when_the_stem_is_unknown(tmp_path: Path) -> None:
    plan = plan_of(SPEC_TEXT)
    ms = [measurement(c, g.group_id, 100.0) for g in plan.groups for c in g.cells]
    rd = write_run(tmp_path / "elsewhere", SPEC_TEXT, ms)
    repro = section(render_run_dir(rd), "Reproduce")
    # the copy beside report.md: a path that holds wherever the directory is copied
    assert "nox -s matrix -- ./spec.yaml\n" in repro and str(rd.path) not in repro


def test_simulator_lag_is_flagged_only_where_it_matters() -> None:
    from matrixrun.report.sections.simulation import of as simulation_of
    from matrixrun.report.sections.simulation import simulator_lag

    spec = parse_spec(SPEC_TEXT)
    settings = run_settings(spec, plan_of(SPEC_TEXT))
    cell = plan_of(SPEC_TEXT).groups[0].cells[0]

    def sim(engine_max: float, write_mean: float) -> Measurement:
        m = measurement(cell, "g", 10.0, simulated=True, time_scale=50.0, tpot=100.0)
        m.extra["sim_engine_lateness_ms"] = {"mean_ms": 0.1, "max_ms": engine_max}
        m.extra["sim_write_lateness_ms"] = {"mean_ms": write_mean}
        return m

    assert m_duration(sim(0, 0)) > 0
    d = m_duration(sim(0, 0))
    keeps_up = sim(engine_max=0.001 * d * 1000 / 50, write_mean=0.1)  # 0.1% of the duration
    engine_behind = sim(engine_max=0.05 * d * 1000 / 50, write_mean=0.1)  # 5% of the duration
    writes_behind = sim(engine_max=0.0, write_mean=0.4)  # 20 ms modelled > 10% of 100 ms
    assert simulator_lag([keeps_up]) == ([], [])
    through, lat = simulator_lag([keeps_up, engine_behind, writes_behind])
    assert through == [pytest.approx(0.05)] and lat == [pytest.approx(20.0)]
    info = simulation_of([engine_behind], settings, {})
    assert info is not None and "fell behind its model by up to 5.0%" in info.text
    info = simulation_of([writes_behind], settings, {})
    assert info is not None and "lagged the model by 20–20 ms" in info.text
    ok = simulation_of([keeps_up], settings, {})
    assert ok is not None and "fell behind" not in ok.text and "lagged" not in ok.text


def m_duration(m: Measurement) -> float:
    assert m.metrics is not None
    return m.metrics.duration


# --------------------------------------------------------------------------- stages


def test_report_renders_from_the_run_directory_without_the_spec(tmp_path: Path) -> None:
    """The run directory is the contract: once analysed, the spec copy is not needed."""
    rd = writeup_run(tmp_path)
    before = render_run_dir(rd)
    (rd.path / "spec.yaml").unlink()
    after = render_run_dir(rd)
    assert after == before
    assert "## Setup" in after and "`--moe-runner-backend`" in after


def test_rendering_imports_neither_the_analysis_nor_the_verify_policy(tmp_path: Path) -> None:
    import subprocess
    import sys

    rd = writeup_run(tmp_path)
    # the report package itself (`matrixrun.run.outputs`, which also holds the analyse stage,
    # imports the analysis at its top since the imports moved out of functions)
    code = (
        "import sys; from matrixrun.report import render_run_dir; "
        "from matrixrun.rundir.results import RunDir; "
        f"render_run_dir(RunDir({str(rd.path)!r})); "
        "print(sorted(m for m in sys.modules if m.startswith(('matrixrun.analysis', "
        "'matrixrun.verify'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_analyse_command_writes_the_verdict_that_report_renders(tmp_path: Path) -> None:
    from matrixrun.cli.main import main

    rd = writeup_run(tmp_path)
    (rd.path / "verdict.json").unlink()
    assert main(["report", str(rd.path)]) == 2  # nothing to render yet: one clear sentence
    assert not (rd.path / "report.md").exists()
    assert main(["analyse", str(rd.path)]) == 0
    verdict = Verdict.model_validate(rd.read_json("verdict.json"))
    assert verdict.overall[CAND].verdict == "mixed"
    assert main(["report", str(rd.path)]) == 0
    assert (rd.path / "report.md").read_text() == render_run_dir(rd)


def test_report_without_verdict_names_the_command_that_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from matrixrun.cli.main import main

    rd = writeup_run(tmp_path)
    (rd.path / "verdict.json").unlink()
    assert main(["report", str(rd.path)]) == 2
    err = capsys.readouterr().err
    assert f"has no verdict.json; write it with `matrixrun analyse {rd.path}`" in err


def test_flags_are_shown_as_the_server_was_given_them(tmp_path: Path) -> None:
    """The spec says `tp: 8`; sglang was launched with `--tp-size 8`: the report says what ran."""
    plan = plan_of(SPEC_TEXT)
    env = {
        "servers": {
            f"{g.group_id}#1": {
                "group": g.group_id,
                "arm": g.arm,
                "argv": [
                    "python",
                    "-m",
                    "sglang.launch_server",
                    "--model-path",
                    "/m",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "30000",
                    "--tp-size",
                    "8",
                    "--moe-runner-backend",
                    str(g.flags["moe_runner_backend"]),
                    "--profile-json",
                    "{}",
                ],
            }
            for g in plan.groups
        }
    }
    doc = render_run_dir(writeup_run(tmp_path, env=env))
    assert "common args `--tp-size 8`" in doc and "`--tp 8`" not in doc
    flags = next(t for t in tables(doc) if t[0][0] == "flag")
    assert flags[1] == ["`--moe-runner-backend`", BASE, CAND]
    # without a recorded argv the spec's own spelling is all there is
    assert "common args `--tp 8`" in render_run_dir(writeup_run(tmp_path / "bare"))


def test_an_overridden_hardware_check_states_the_finding_not_the_advice() -> None:
    from matrixrun.report.sections.environment import hardware_sentence
    from matrixrun.rundir.hardware import compare
    from matrixrun.spec import HardwareSpec

    check = compare([HardwareSpec(gpu="NVIDIA H200", count=8)], [])
    assert not check.ok and check.message.startswith(check.finding + "; ")
    recorded = {**check.model_dump(mode="json"), "overridden": True}
    assert hardware_sentence(recorded) == (
        "**overridden**: spec asks for 8x NVIDIA H200 but nvidia-smi shows no GPU; "
        "the run went ahead anyway (--ignore-hardware)"
    )


def test_a_directory_without_settings_says_which_command_writes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from matrixrun.cli.main import main

    rd = writeup_run(tmp_path)
    rd.create()  # today's directories record their format (an older one gets its settings
    (rd.path / "settings.json").unlink()  # made by core.migrate: tests/test_rundir_migrate)
    assert main(["analyse", str(rd.path)]) == 2
    assert main(["report", str(rd.path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(
        "has no settings.json: give a directory written by `matrixrun run` or" in e for e in err
    )


def test_a_verdict_from_another_version_asks_to_analyse_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from matrixrun.cli.main import main

    rd = writeup_run(tmp_path)
    old = rd.read_json("verdict.json")
    old["warnings"] = ["a sentence the analysis used to write"]
    rd.write_json("verdict.json", old)
    assert main(["report", str(rd.path)]) == 2
    assert f"rewrite it with `matrixrun analyse {rd.path}`" in capsys.readouterr().err
    assert main(["analyse", str(rd.path)]) == 0 and main(["report", str(rd.path)]) == 0


def test_a_slurm_run_says_when_arms_never_shared_a_node_and_which_jobs_failed(
    tmp_path: Path,
) -> None:
    from matrixrun.rundir.jobs import JobRecord, JobsFile

    rd = writeup_run(tmp_path)
    job = JobRecord(
        key="g2.r1", group="g2", arm=CAND, round=1, job_id="4242", state="TIMEOUT",
        reason="hit its time limit of 12 min", submitted_at="2026-12-01T00:00:00Z",
        time_limit_min=12,
    )  # fmt: skip
    ok = job.model_copy(update={"key": "g1.r0", "job_id": "4241", "state": "COMPLETED"})
    jobs = JobsFile(jobs=[ok, job], never_shared_node=[CAND])
    (rd.path / "jobs.json").write_text(jobs.model_dump_json())
    failures = section(render_run_dir(rd), "Failures")
    assert f"`{CAND}` never ran on a node `{BASE}` ran on" in failures
    assert f"Slurm job 4242 (`{CAND}`, stage-2 round 1) ended TIMEOUT: hit its time limit" in (
        failures
    )
    assert "4241" not in failures  # a completed job is not news


def test_user_text_cannot_inject_html_or_structure_into_the_document(tmp_path: Path) -> None:
    text = SPEC_TEXT.replace(
        "title: CuteDSL", "title: <details><summary>x</summary> CuteDSL"
    ).replace("hypothesis: >", "hypothesis: >\n  <img src=x onerror=alert(1)> **bold**\n ")
    assert text != SPEC_TEXT
    doc = render_run_dir(writeup_run(tmp_path, spec_text=text))
    head = doc.split("\n", 1)[0]
    assert head.startswith("# ") and "<details>" not in head and "&lt;details&gt;" in head
    assert "<img" not in doc and "&lt;img src=x onerror=alert(1)&gt;" in doc
    assert "\\*\\*bold\\*\\*" in doc  # the author's asterisks shown, not emphasis
    assert check_markdown(doc) == []


def test_servers_on_different_gpus_get_a_serials_column() -> None:
    """A run resumed on another lent machine: each server's GPUs show, so the launch spread
    is read as including the machines'; one GPU for all servers adds no column."""
    from matrixrun.report.sections.environment import of as environment_of

    def server(arm: str, serials: list[str]) -> dict[str, object]:
        return {"arm": arm, "version": "v", "startup_s": 12.0, "gpu_serials": serials}

    same = {"servers": {"a#1": server("a", ["1652"]), "b#1": server("b", ["1652"])}}
    assert "GPU serials" not in environment_of(same, None).servers_header
    moved = {"servers": {"a#1": server("a", ["1652"]), "a#2": server("a", ["1654"])}}
    env = environment_of(moved, None)
    col = env.servers_header.index("GPU serials")
    assert [row[col] for row in env.servers] == ["1652", "1654"]


def test_a_launch_command_is_shown_as_a_shell_would_need_it_typed() -> None:
    """The Setup's `launched with` line copies into a terminal: a `python3 -c` program (spaces,
    `;`, parentheses) and a quote are quoted, `{placeholders}` read as they are."""
    import shlex

    from matrixrun.report.sections.setup import shell_words

    argv = ["python3", "-c", "from x import main; main()", "serve", "{model}", "--x", "it's"]
    shown = shell_words(argv)
    assert shlex.split(shown) == argv
    assert "serve {model} --x" in shown


def test_an_unfinished_slurm_run_is_resumed_through_slurm_wherever_it_is_rendered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resume line of a Slurm run names the Slurm executor, known from the run
    directory's own jobs.json — not from a path relative to where `report` runs (rendered
    from elsewhere, the document prints the directory from `runs/` on)."""
    from matrixrun.rundir.jobs import JobsFile

    rd = writeup_run(tmp_path)
    with (rd.path / "events.jsonl").open("a") as f:
        f.write(json.dumps({"event": "run_start"}) + "\n")  # a session that never ended
    (rd.path / "jobs.json").write_text(JobsFile(jobs=[]).model_dump_json())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    doc = render_run_dir(rd)
    assert "**This run did not finish**" in doc
    assert "--executor slurm --resume" in doc
    (rd.path / "jobs.json").unlink()
    assert "--executor slurm" not in render_run_dir(rd)

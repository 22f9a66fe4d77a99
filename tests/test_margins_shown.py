"""Every number printed as used: a metric's own margin (`metrics: {p99_ttft_ms: {margin: 10%}}`)
is the one the charts, the table's footnote, Setup, the noise section, `plan` and the proposal
state — never the common `verify.threshold`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from matrixrun.plan import expand
from matrixrun.plan.render import plan_text
from matrixrun.publish.proposal import Validation, proposal_markdown
from matrixrun.run import outputs
from matrixrun.spec import parse_spec

ROOT = Path(__file__).resolve().parent.parent
GLM5 = ROOT / "spec" / "glm5_cutedsl.yaml"
RUN = ROOT / "reports" / "runs" / "glm5_cutedsl.rehearsal" / "20261201-065252"
LISTED = (
    "metrics: {primary: output_throughput, secondary: [mean_tpot_ms, mean_itl_ms, p99_ttft_ms]}"
)
OWN = (
    "metrics: {primary: p99_ttft_ms, p99_ttft_ms: {margin: 10%}, "
    "secondary: [output_throughput, mean_tpot_ms]}"
)


def test_plan_and_proposal_name_the_primary_metric_and_its_margin() -> None:
    text = GLM5.read_text()
    assert LISTED in text
    spec = parse_spec(text.replace(LISTED, OWN), str(GLM5))
    plan = expand(spec)
    decided = next(line for line in plan_text(spec, plan).splitlines() if "decided on" in line)
    assert decided.startswith("decided on: p99_ttft_ms (lower is better), margin ±10% at 95%")
    assert "output_throughput ±3%" in decided
    md = proposal_markdown(spec, plan, Validation(str(GLM5)))
    assert "Decided on: `p99_ttft_ms` (lower is better), margin ±10% at 95% confidence" in md
    plain = parse_spec(text, str(GLM5))
    assert "decided on: output_throughput (higher is better), margin ±3%" in plan_text(
        plain, expand(plain)
    )


def test_report_states_the_margin_each_metric_was_judged_at(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    path = run / "settings.json"
    settings = json.loads(path.read_text())
    analysis = settings["analysis"]
    analysis.update(
        primary="p99_ttft_ms",
        secondary=["output_throughput", "mean_tpot_ms"],
        margins={"p99_ttft_ms": 0.1},
    )
    path.write_text(json.dumps(settings))
    outputs.analyse_run(run)
    text = outputs.report_text(run)
    assert "Grey lines: +10% and −10%, the practical margin" in text
    assert "line [10, 10, 10, 10, 10]" in text and "line [3, 3" not in text
    assert "judged against the ±10% margin" in text
    assert "**practical margin:** ±10% on `p99_ttft_ms`; ±3% on the others" in text
    assert "practical margin ±10% on `p99_ttft_ms`; ±3% on the others." in text
    assert "±3% margin" not in text

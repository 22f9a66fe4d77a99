"""Re-render the committed example reports from their committed run directories.

`reports/*.md` are what a reader of the repository sees first, so they must be what the code
renders today: each is analysed and rendered again from its run directory under
`reports/runs/` (`nox -s reports`), and `tests/test_example_reports.py` fails when a committed
one differs from what this would write.

    python scripts/example_reports.py            # rewrite them
    python scripts/example_reports.py --check    # exit 1 when one is stale

It also re-renders every other committed run directory's report.md from its committed
verdict.json (not analysed again: `tests/test_committed_runs.py` guards the numbers), so each
report.md under reports/runs/ is what the report code renders today from the files beside it
(`tests/test_committed_reports.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: committed report -> the run directory it is rendered from (both relative to the root)
EXAMPLES = {
    "reports/glm5_cutedsl.rehearsal.md": "reports/runs/glm5_cutedsl.rehearsal/20261203-224700",
    "reports/golden_bench_serving.ingested.md": "reports/runs/golden-ingest",
    "reports/h200_transformers_cb.md": "reports/runs/h200_transformers_cb-7",
    "reports/h200_transformers_aa.md": "reports/runs/h200_transformers_aa",
    "reports/h200_transformers_cuda_graph.md": "reports/runs/h200_transformers_cuda_graph",
    "reports/h200_transformers_aa_relaunch.md": "reports/runs/h200_transformers_aa_relaunch",
    "reports/h200_transformers_aa_cold.md": "reports/runs/h200_transformers_aa_cold",
    "reports/h200_transformers_aa_cold_2.md": "reports/runs/h200_transformers_aa_cold_2",
    "reports/sglang_cpu.md": "reports/runs/sglang_cpu",
    "reports/lpm_shared_prefix.rehearsal.md": "reports/runs/lpm_shared_prefix.rehearsal",
    "reports/lpm_random.rehearsal.md": "reports/runs/lpm_random.rehearsal",
    "reports/h200_transformers_cuda_graph_cold.md": (
        "reports/runs/h200_transformers_cuda_graph_cold"
    ),
}


def rendered(run_dir: Path) -> str:
    """The document `run_dir` gives today: analysed and rendered in a scratch copy laid out
    as it is here (reports/runs/<...>, working directory the scratch root, so the paths it
    prints are the repository's), leaving the committed one as is. An example's links are
    relative to its reports/*.md (the report's links are relative to where it is written)."""
    from matrixrun.run import outputs

    tail = run_dir.relative_to(ROOT).parts
    report = next((r for r, run in EXAMPLES.items() if ROOT / run == run_dir), None)
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        copy = Path(tmp).joinpath(*tail)
        shutil.copytree(run_dir, copy)
        outputs.analyse_run(copy)
        return outputs.report_text(copy, report_at=Path(tmp) / report if report else None)


#: every committed run directory that has a verdict (the examples among them)
RUN_DIRS = sorted(
    p.parent.relative_to(ROOT).as_posix()
    for p in (ROOT / "reports" / "runs").glob("**/verdict.json")
)


def rendered_as_committed(run_dir: Path) -> str:
    """The document `run_dir`'s committed files give today, analysed as they are (its
    verdict.json as committed), rendered as `rendered` lays it out."""
    from matrixrun.run import outputs

    tail = run_dir.relative_to(ROOT).parts
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        copy = Path(tmp).joinpath(*tail)
        shutil.copytree(run_dir, copy)
        return outputs.report_text(copy)


def main(argv: list[str] | None = None) -> int:
    from matrixrun.run import outputs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a report is stale")
    args = parser.parse_args(argv)
    stale = []
    os.chdir(ROOT)  # the paths a report prints are relative to where it is rendered
    for report, run in EXAMPLES.items():
        run_dir = ROOT / run
        if args.check:
            if rendered(run_dir) != (ROOT / report).read_text():
                stale.append(report)
            continue
        outputs.analyse_run(run_dir)
        outputs.render_run(run_dir)  # RUN_DIR/report.md and chart.png beside it
        outputs.render_run(run_dir, ROOT / report)  # the same, its links from reports/
        print(f"wrote {report} from {run}")
    for run in RUN_DIRS:
        if run in EXAMPLES.values():
            continue  # written above
        target = ROOT / run / "report.md"
        text = rendered_as_committed(ROOT / run)
        if args.check:
            if not target.exists() or target.read_text() != text:
                stale.append(str(target.relative_to(ROOT)))
            continue
        target.write_text(text)
        print(f"wrote {run}/report.md")
    for report in stale:
        print(f"{report} is stale: run `nox -s reports` and commit it", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

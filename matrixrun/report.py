"""Analyse a run directory and render its verdict document.

Both steps read the run directory alone (spec.yaml or settings.json, plan.json, env.json,
events.jsonl, results.jsonl), so `matrixrun report RUN_DIR` re-renders on any machine.
Templates live in `templates/` (user-overridable with MATRIXRUN_TEMPLATES or --templates).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from matrixrun.analysis import analyse
from matrixrun.results import RunDir
from matrixrun.verdict import AnalysisSettings, Verdict

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


def settings_of(rd: RunDir) -> AnalysisSettings:
    """The analysis settings of a run: from its spec, or (ingested runs) settings.json."""
    spec_file = rd.path / "spec.yaml"
    if spec_file.exists():
        from matrixrun.plan import Plan
        from matrixrun.spec import parse_spec
        from matrixrun.verify import settings_for

        spec = parse_spec(spec_file.read_text(), str(spec_file))
        plan = Plan.model_validate(rd.read_json("plan.json"))
        return settings_for(spec, plan)
    return AnalysisSettings.model_validate(rd.read_json("settings.json"))


def analyse_run_dir(rd: RunDir) -> Verdict:
    verdict = analyse(rd.measurements(), settings_of(rd))
    rd.write_text("verdict.json", verdict.model_dump_json(indent=2) + "\n")
    return verdict


def template_dirs(extra: str | Path | None = None) -> list[Path]:
    dirs = [Path(extra)] if extra else []
    if os.environ.get("MATRIXRUN_TEMPLATES"):
        dirs.append(Path(os.environ["MATRIXRUN_TEMPLATES"]))
    dirs.append(TEMPLATE_DIR)
    return dirs


def render_run_dir(rd: RunDir, templates: str | Path | None = None) -> str:
    from matrixrun.report_context import build_context

    context = build_context(rd)
    return render(context, templates)


def render(context: dict[str, Any], templates: str | Path | None = None) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in template_dirs(templates)]),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False,
    )
    return env.get_template("verdict.md.j2").render(**context)

"""Render a run directory's verdict document.

Rendering reads the run directory alone — verdict.json, settings.json, plan.json, env.json,
events.jsonl, results.jsonl, ingest.json, jobs.json (`inputs.read_inputs`) — so `matrixrun
report RUN_DIR` re-renders on any machine, without the spec and without analysing anything.
The document is made of sections, one module each under `sections/` (its derivation, its
words, its `SECTION`, its partial `templates/sections/<name>.md.j2`); `document` puts their
parts side by side, by section name, for `templates/verdict.md.j2`. Shared by several
sections: `series`, `given`, `fmt` (every number), `wording` (the verdict's own sentences).
Templates are shipped in the wheel (the checkout's `templates/` links there) and
user-overridable one partial at a time with MATRIXRUN_TEMPLATES or --templates.

Two guarantees on the output, because the document is posted as one GitHub comment:
- size: it stays under GitHub's comment limit (65,536 characters). When it would not, detail is
  dropped in a fixed order (the sections' trims by rank, `budget`: least decision-relevant
  first) and the document says what was left out at its end;
- form: `check_markdown` parses it with markdown-it-py (GFM tables) and reports raw HTML and
  table rows whose cell count differs from the header. A failed check is appended to the
  document as a visible note rather than raised.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

from matrixrun.core.verdict import Verdict
from matrixrun.report import chart_png, section
from matrixrun.report.budget import steps
from matrixrun.report.document import Document, build_document
from matrixrun.report.markdown_check import COMMENT_LIMIT, check_markdown, table_cells
from matrixrun.rundir.results import RunDir

__all__ = [
    "COMMENT_LIMIT",
    "check_markdown",
    "render",
    "render_run",
    "render_run_dir",
    "report_text",
    "table_cells",
    "write_chart",
]

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"  # shipped in the wheel


def template_dirs(extra: str | Path | None = None) -> list[Path]:
    dirs = [Path(extra)] if extra else []
    if os.environ.get("MATRIXRUN_TEMPLATES"):
        dirs.append(Path(os.environ["MATRIXRUN_TEMPLATES"]))
    dirs.append(TEMPLATE_DIR)
    return dirs


def render_run_dir(
    rd: RunDir, templates: str | Path | None = None, report_at: Path | None = None
) -> str:
    """The document of a run directory that has its verdict.json, to be written at
    `report_at` (default RUN_DIR/report.md: its links are relative to it)."""
    return render(build_document(rd, report_at), templates)


def render_template(document: Document, templates: str | Path | None = None) -> str:
    """Render `verdict.md.j2` once, exactly as given (no size budget, no check)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in template_dirs(templates)]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    text = env.get_template("verdict.md.j2").render(**document.template_vars())
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def render(
    document: Document, templates: str | Path | None = None, limit: int = COMMENT_LIMIT
) -> str:
    """Render within `limit` characters (trimming detail in the size budget's order), then check
    the Markdown and append any problem as a visible note."""
    doc = copy.deepcopy(document)
    doc.limit = limit
    text = render_template(doc, templates)
    for step in steps(section.sections()):
        if len(text) <= limit:
            break
        while len(text) > limit:
            note = step(doc)
            if note is None:
                break
            doc.omitted.append(note)
            text = render_template(doc, templates)
    if len(text) > limit:  # nothing left to drop politely: cut, and say so
        tail = (
            f"\n\n---\n\n*Cut at {limit:,} characters (GitHub's comment limit). The full "
            f"document: `matrixrun report {doc.run_dir}`.*\n"
        )
        head = text[: limit - len(tail) - 40].rsplit("\n", 1)[0]
        unclosed = head.count("\n<details>") - head.count("\n</details>")
        if head.count("```") % 2:  # inside a code block: close it first
            head += "\n```"
        text = head + "\n\n</details>" * max(unclosed, 0) + tail
    problems = check_markdown(text, limit)
    if problems:
        note = (
            "\n\n> **Report check failed** (please report this as a template bug): "
            + "; ".join(problems)
            + "\n"
        )
        text = text + note
    return text


def _run_dir(run_dir: str | Path | RunDir) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)


def report_text(
    run_dir: str | Path | RunDir,
    templates: str | Path | None = None,
    report_at: str | Path | None = None,
) -> str:
    """The verdict document of an analysed run directory, its links relative to where it will
    be written (`report_at`, default RUN_DIR/report.md)."""
    at = Path(report_at) if report_at is not None else None
    return render_run_dir(_run_dir(run_dir), templates, at)


def write_chart(rd: RunDir) -> Path | None:
    """RUN_DIR/chart.png beside the report, when the optional plotting extra is installed."""
    verdict = Verdict.model_validate(rd.read_json("verdict.json"))
    return chart_png.write_chart(verdict, rd.path / chart_png.CHART_FILE)


def render_run(
    run_dir: str | Path | RunDir,
    out: str | Path | None = None,
    templates: str | Path | None = None,
) -> Path:
    """The render stage: write the document to `out` (default RUN_DIR/report.md), with
    chart.png beside it in the run directory, and return its path. Here, not in `run/`, so
    that rendering loads neither the runner nor the engines, the load client, the simulator or
    the verify policy (tests/test_layout.py renders a committed run directory to check)."""
    rd = _run_dir(run_dir)
    text = report_text(rd, templates, out)  # first: it checks the inputs, with its sentences
    had_chart = (rd.path / "chart.png").exists()
    if write_chart(rd) is not None and not had_chart:
        text = report_text(rd, templates, out)  # the document links chart.png where it exists
    if out is None:
        return rd.write_text("report.md", text)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target

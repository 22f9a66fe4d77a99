"""Analyse a run directory and render its verdict document.

Both steps read the run directory alone (spec.yaml or settings.json, plan.json, env.json,
events.jsonl, results.jsonl), so `matrixrun report RUN_DIR` re-renders on any machine.
Templates live in `templates/` (user-overridable with MATRIXRUN_TEMPLATES or --templates); the
context they render is built by `report_context.py`.

Two guarantees on the output, because the document is posted as one GitHub comment:
- size: it stays under GitHub's comment limit (65,536 characters). When it would not, detail is
  dropped in a fixed order (`TRIM_STEPS`: least decision-relevant first) and the document says
  what was left out at its end;
- form: `check_markdown` parses it with markdown-it-py (GFM tables) and reports raw HTML and
  table rows whose cell count differs from the header (GitHub would silently pad or drop
  cells). A failed check is appended to the document as a visible note rather than raised, so a
  template bug never costs the report of a finished run.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matrixrun.analysis import analyse
from matrixrun.report_context import COMMENT_LIMIT
from matrixrun.results import RunDir
from matrixrun.verdict import AnalysisSettings, Verdict

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


def correctness_from_env(env: Any) -> dict[str, float]:
    """Output agreement per arm from env.json's "correctness": {arm: 0.97} or
    {arm: {"agreement": 0.97, ...}}; anything else is ignored."""
    raw = env.get("correctness") if isinstance(env, dict) else None
    out: dict[str, float] = {}
    if isinstance(raw, dict):
        for arm, value in raw.items():
            if isinstance(value, dict):
                value = value.get("agreement")
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[str(arm)] = float(value)
    return out


def settings_of(rd: RunDir) -> AnalysisSettings:
    """The analysis settings of a run: from its spec, or (ingested runs) settings.json; plus
    the correctness agreement per arm when env.json records one."""
    spec_file = rd.path / "spec.yaml"
    if spec_file.exists():
        from matrixrun.plan import Plan
        from matrixrun.spec import parse_spec
        from matrixrun.verify import settings_for

        spec = parse_spec(spec_file.read_text(), str(spec_file))
        plan = Plan.model_validate(rd.read_json("plan.json"))
        settings = settings_for(spec, plan)
    else:
        settings = AnalysisSettings.model_validate(rd.read_json("settings.json"))
    env_file = rd.path / "env.json"
    if env_file.exists() and not settings.correctness:
        agreement = correctness_from_env(rd.read_json("env.json"))
        if agreement:
            settings = settings.model_copy(update={"correctness": agreement})
    return settings


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


def render_template(context: dict[str, Any], templates: str | Path | None = None) -> str:
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
    text = env.get_template("verdict.md.j2").render(**context)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def render(
    context: dict[str, Any], templates: str | Path | None = None, limit: int = COMMENT_LIMIT
) -> str:
    """Render within `limit` characters (trimming detail in `TRIM_STEPS` order), then check
    the Markdown and append any problem as a visible note."""
    context = copy.deepcopy(context)
    context["limit"] = limit
    context.setdefault("omitted", [])
    text = render_template(context, templates)
    for step in TRIM_STEPS:
        if len(text) <= limit:
            break
        while len(text) > limit:
            note = step(context)
            if note is None:
                break
            context["omitted"].append(note)
            text = render_template(context, templates)
    if len(text) > limit:  # nothing left to drop politely: cut, and say so
        tail = (
            f"\n\n---\n\n*Cut at {limit:,} characters (GitHub's comment limit). The full "
            f"document: `matrixrun report {context.get('run_dir', 'RUN_DIR')}`.*\n"
        )
        text = text[: limit - len(tail)].rsplit("\n", 1)[0] + tail
    problems = check_markdown(text, limit)
    if problems:
        note = (
            "\n\n> **Report check failed** (please report this as a template bug): "
            + "; ".join(problems)
            + "\n"
        )
        text = text + note
    return text


# --------------------------------------------------------------------------- size budget
#
# Each step removes one piece of detail and returns a phrase for the closing note, or None when
# it has nothing left to remove. Order (least decision-relevant first): the per-instance
# server table, the latency tables (their one-sentence verdicts stay), the per-cell
# "undecided" notes, the rerun log beyond its first 20 entries, then the comparison tables of
# the last slices (their regime sentence and verdict stay).


def _drop_servers(ctx: dict[str, Any]) -> str | None:
    env = ctx.get("environment", {})
    servers = env.get("servers")
    if not servers:
        return None
    env["servers"] = []
    env["servers_note"] = f"{len(servers)} server instances were recorded in env.json."
    return "the per-instance server table"


def _drop_latency(ctx: dict[str, Any]) -> str | None:
    latency = ctx.get("latency")
    if not latency:
        return None
    lat = latency.pop()
    summary = [
        {
            "metric": lat["metric"],
            "slice": t["slice"],
            "candidate": t["candidate"],
            "sentence": t["overall"],
        }
        for sl in lat["slices"]
        for t in sl["tables"]
        if t["overall"]
    ]
    ctx["latency_summary"] = summary + ctx.get("latency_summary", [])
    return f"the `{lat['metric']}` tables (their verdicts are listed)"


def _drop_undecided(ctx: dict[str, Any]) -> str | None:
    dropped = False
    for section in [ctx.get("comparison", [])] + [x["slices"] for x in ctx.get("latency", [])]:
        for sl in section:
            for t in sl["tables"]:
                if t["undecided"]:
                    t["undecided"] = []
                    dropped = True
    return "the per-cell notes on what would settle undecided cells" if dropped else None


def _trim_reruns(ctx: dict[str, Any], keep: int = 20) -> str | None:
    reruns = ctx.get("reruns", [])
    if len(reruns) <= keep:
        return None
    ctx["reruns"] = reruns[:keep]
    return f"the rerun log after its first {keep} of {len(reruns)} entries"


def _drop_last_slice_tables(ctx: dict[str, Any]) -> str | None:
    for sl in reversed(ctx.get("comparison", [])[1:]):
        for t in sl["tables"]:
            if t["rows"]:
                t["rows"] = []
                return f"the comparison table rows of {sl['label'] or 'a slice'}"
    return None


TRIM_STEPS: list[Callable[[dict[str, Any]], str | None]] = [
    _drop_servers,
    _drop_latency,
    _drop_undecided,
    _trim_reruns,
    _drop_last_slice_tables,
]


# --------------------------------------------------------------------------- Markdown check

_PIPE = re.compile(r"(?<!\\)\|")


def table_cells(line: str) -> int:
    """Cells in one GFM table line: split on unescaped pipes, outer pipes optional."""
    text = line.strip()
    text = text.removeprefix("|")
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return len(_PIPE.split(text))


def check_markdown(text: str, limit: int = COMMENT_LIMIT) -> list[str]:
    """Problems GitHub would not complain about but readers would see: raw HTML, table rows
    whose cell count differs from the header, lines that look like table rows but are not part
    of any table, and a body over the comment limit. Empty when the document is fine."""
    from markdown_it import MarkdownIt

    problems: list[str] = []
    if len(text) > limit:
        problems.append(f"{len(text):,} characters, over the {limit:,} limit")
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    lines = text.splitlines()
    in_table: set[int] = set()
    in_code: set[int] = set()
    for tok in tokens:
        if tok.type == "html_block" or any(c.type == "html_inline" for c in (tok.children or [])):
            line = tok.map[0] + 1 if tok.map else "?"
            problems.append(f"line {line}: raw HTML")
        if tok.type in ("fence", "code_block") and tok.map:
            in_code.update(range(*tok.map))
        if tok.type == "table_open" and tok.map:
            start, end = tok.map
            in_table.update(range(start, end))
            want = table_cells(lines[start])
            for number in range(start, end):
                got = table_cells(lines[number])
                if got != want:
                    problems.append(
                        f"line {number + 1}: table row has {got} cells, the header {want}"
                    )
    for number, line in enumerate(lines):
        stripped = line.lstrip("> ").strip()
        if stripped.startswith("|") and number not in in_table and number not in in_code:
            problems.append(f"line {number + 1}: looks like a table row but is not in a table")
    return problems

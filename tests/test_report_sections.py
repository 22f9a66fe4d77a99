"""The report is cut by section (issue 31): each section of the verdict document is one module
under matrixrun/report/sections/ — its derivation, its words, its `SECTION` (name, place, how it
builds its part: `report.section`) — and one partial under templates/sections/, which the
document includes. A module without its partial, a partial nobody includes, or a module that
declares no section fails here, by name. Adding a section is one module and one partial
(issue 43): a test adds one that way, without editing any other file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from matrixrun.report import render_run_dir
from matrixrun.report import sections as package
from matrixrun.report.section import placed, sections
from matrixrun.rundir.results import RunDir

ROOT = Path(__file__).resolve().parent.parent / "matrixrun" / "report"
MODULES = sorted(p.stem for p in (ROOT / "sections").glob("*.py") if p.name != "__init__.py")
PARTIALS = sorted(
    p.name.removesuffix(".md.j2") for p in (ROOT / "templates" / "sections").glob("*.md.j2")
)
#: partials with no module of their own: what the size budget left out (`report.render`), and
#: the SLO section's line on the first screen (`slo.py` makes it; `headline.md.j2` includes it)
TEMPLATE_ONLY = {"omitted", "slo_head"}


def _includes() -> set[str]:
    """The partials the document includes, from verdict.md.j2 down through the partials."""
    found = set(placed(sections()))  # what verdict.md.j2's loop includes
    todo = [ROOT / "templates" / "verdict.md.j2"]
    todo += [ROOT / "templates" / "sections" / f"{name}.md.j2" for name in found]
    while todo:
        text = todo.pop().read_text()
        for name in re.findall(r'\{%-? include "sections/(\w+)\.md\.j2"', text):
            if name not in found:
                found.add(name)
                todo.append(ROOT / "templates" / "sections" / f"{name}.md.j2")
    return found


def test_every_section_module_has_its_partial_and_back() -> None:
    assert MODULES, "no section modules found"
    assert sorted(set(MODULES) | TEMPLATE_ONLY) == PARTIALS


def test_the_document_includes_every_partial() -> None:
    assert _includes() == set(PARTIALS)


def test_every_section_module_declares_its_section() -> None:
    """Each module's `SECTION` is named after the module (its partial's name)."""
    assert sorted(s.name for s in sections()) == MODULES


def test_the_placed_sections_are_in_the_documents_order() -> None:
    assert placed(sections()) == [
        "headline",
        "charts",
        "comparison",
        "slo",
        "latency",
        "server_side",
        "failures",
        "setup",
        "reruns",
        "noise",
        "correctness",
        "environment",
        "reproduce",
        "simulation",
    ]


DUMMY = """
from matrixrun.report.section import Section


def _build(inputs):
    return {"arms": len(inputs.verdict.overall) + 1, "dir": inputs.run_dir}


SECTION = Section("dummy", 115, _build)  # between the environment (110) and reproduce (120)
"""


def test_a_section_is_one_module_and_one_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dummy section added the way a new one is: a module declaring `SECTION` in the
    sections package (here a directory added to its `__path__`, so the checkout is left as it
    is) and its partial (here in a --templates directory). No other file is edited, and the
    document shows it in its place."""
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "dummy.py").write_text(DUMMY)
    (tmp_path / "tpl" / "sections").mkdir(parents=True)
    (tmp_path / "tpl" / "sections" / "dummy.md.j2").write_text(
        "## Dummy\n\n{{ dummy.arms }} arms counted in `{{ dummy.dir }}`.\n"
    )
    run = ROOT.parent.parent / "reports" / "runs" / "h200_transformers_aa"
    before = render_run_dir(RunDir(run))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path / "mod")])
    doc = render_run_dir(RunDir(run), templates=tmp_path / "tpl")
    assert "dummy" in placed(sections())
    line = next(x for x in doc.splitlines() if " arms counted in `" in x)
    assert line.startswith(("1 ", "2 ", "3 ")), line
    assert doc.index("## Dummy") < doc.index("Reproduce")
    assert doc.replace(f"## Dummy\n\n{line}\n\n", "") == before


def test_every_section_part_is_one_typed_value() -> None:
    """Each section hands its partial one value — a dataclass, a line, a list of lines, or
    None where it has nothing — never a tuple of loose pieces; the document holds the parts
    by name and nothing of theirs twice (whether the run was simulated is the simulation
    part, read by the headline and the setup partials too)."""
    import dataclasses

    from matrixrun.report.document import Document, build_document

    runs = ROOT.parent.parent / "reports" / "runs"
    for run in (runs / "h200_transformers_aa", runs / "lpm_random.rehearsal"):
        document = build_document(RunDir(run))
        assert sorted(document.parts) == MODULES
        for name, part in document.parts.items():
            typed = dataclasses.is_dataclass(part) or isinstance(part, str | list) or part is None
            assert typed and not isinstance(part, tuple), f"{name}: {type(part).__name__}"
        own = {f.name for f in dataclasses.fields(Document)}
        assert own == {"run_dir", "parts", "sections", "omitted", "limit"}
        assert (document.parts["simulation"] is not None) == run.name.endswith(".rehearsal")


TRIMMED = """
from matrixrun.report.section import Section, Trim


def _build(inputs):
    return {"lines": [f"filler line {i}" for i in range(200)]}


def _drop(part):
    if not part["lines"]:
        return None
    part["lines"] = []
    return "the filler"


SECTION = Section("trimmed", 115, _build, (Trim(5, _drop),))
"""


def test_a_section_trims_its_own_part_at_its_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A section says how the size budget may shrink its part (`Trim`: the step and its
    rank); with rank 5 its trim runs before every built-in one, with no edit to budget.py."""
    from matrixrun.report import render
    from matrixrun.report.document import build_document

    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "trimmed.py").write_text(TRIMMED)
    (tmp_path / "tpl" / "sections").mkdir(parents=True)
    (tmp_path / "tpl" / "sections" / "trimmed.md.j2").write_text(
        "{% for x in trimmed.lines %}\n- {{ x }}\n{% endfor %}\n"
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path / "mod")])
    run = ROOT.parent.parent / "reports" / "runs" / "h200_transformers_aa"
    document = build_document(RunDir(run))
    full = render(document, templates=tmp_path / "tpl")
    assert "- filler line 199" in full
    short = render(document, templates=tmp_path / "tpl", limit=len(full) - 100)
    assert "filler line" not in short
    assert "left out, in this order: the filler." in short
    assert document.parts["trimmed"]["lines"], "the budget trimmed a copy, not the document"

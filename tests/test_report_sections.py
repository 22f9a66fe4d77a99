"""The report is cut by section (issue 31): each section of the verdict document is one module
under matrixrun/report/sections/ — its derivation, its words, its `of` for the context — and one
partial under templates/sections/, which the document includes. A module without its partial,
a partial nobody includes, or a section the context never asks for fails here, by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "matrixrun" / "report"
MODULES = sorted(p.stem for p in (ROOT / "sections").glob("*.py") if p.name != "__init__.py")
PARTIALS = sorted(
    p.name.removesuffix(".md.j2") for p in (ROOT / "templates" / "sections").glob("*.md.j2")
)
#: partials with no module of their own: what the size budget left out (`report.render`)
TEMPLATE_ONLY = {"omitted"}


def _includes() -> set[str]:
    """The partials the document includes, from verdict.md.j2 down through the partials."""
    found: set[str] = set()
    todo = [ROOT / "templates" / "verdict.md.j2"]
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


def test_the_context_asks_every_section_for_its_part() -> None:
    """context.py calls each section module's own function (`of`, or a named one like
    `charts_of`), and no module but the context assembles them."""
    tree = ast.parse((ROOT / "context.py").read_text())
    called = {
        node.func.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
    }
    assert set(MODULES) <= called, sorted(set(MODULES) - called)

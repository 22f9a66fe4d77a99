"""The section interface: what one section of the verdict document declares, and the registry
the document is put together from.

A section is one module under `report/sections/` with a module-level `SECTION` and one partial,
`templates/sections/<name>.md.j2`. Adding a section is those two files: `sections()` finds every
module of the package (a team's extra module too, on a directory added to the package's
`__path__`), the top template (`verdict.md.j2`) includes the partials of the placed sections in
their `order`, and the partial sees the section's part as the template variable `<name>`. A
section with no `order` is placed inside another's partial (the first screen includes the
launches, checks and why lines) and is built all the same.

Why a registry rather than a list in the context: before it, adding a section touched its
module, its partial, `verdict.md.j2`, `context.py` (import, field, call) and `budget.py`; the
list of sections, their order and their names were five edits apart. A section whose part is
too big for one comment says how to shrink it (`trim`), keyed by its name, so the size budget
(`budget.py`) needs no edit either.

Sections not yet moved to this shape (headline, charts, comparison, latency, setup, reruns)
are registered all the same, for their place in the document, with no `build`: their parts
are still `context.Context`'s fields.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from matrixrun.report.inputs import RunInputs

#: The package whose modules are the sections (named, not imported: it imports this module).
PACKAGE = "matrixrun.report.sections"


@dataclass(frozen=True)
class Section:
    """One section of the document.

    `name`: its partial (`templates/sections/<name>.md.j2`) and the template variable its part
    is bound to. `order`: where the top template includes it (ascending); None for a section
    another section's partial includes. `build`: its part, from the run directory's inputs
    alone (None: a section whose part `context.Context` still builds). `trim`: drops detail
    from its part when the document would not fit one GitHub comment and returns the phrase
    for the closing note, or None when it has nothing left to drop (run after `budget`'s
    steps, in the sections' order)."""

    name: str
    order: int | None
    build: Callable[[RunInputs], Any] | None = None
    trim: Callable[[Any], str | None] | None = None


def sections() -> list[Section]:
    """Every section, in the document's order (the placed ones first, by `order`; then the
    ones other partials include, by name). Modules are imported by name because the registry
    is the package's contents: a module that declares a `SECTION` is in the document."""
    package = importlib.import_module(PACKAGE)
    found: dict[str, Section] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        section = getattr(module, "SECTION", None)
        if not isinstance(section, Section):
            continue
        if section.name in found:
            raise ValueError(f"two report sections are named {section.name!r}")
        found[section.name] = section
    return sorted(found.values(), key=lambda s: (s.order is None, s.order or 0, s.name))


def placed(every: list[Section]) -> list[str]:
    """The names of the sections the top template includes, in order."""
    return [s.name for s in every if s.order is not None]


def parts_of(inputs: RunInputs, every: list[Section]) -> dict[str, Any]:
    """Each built section's part, by name: what its partial sees as `<name>`."""
    return {s.name: s.build(inputs) for s in every if s.build is not None}

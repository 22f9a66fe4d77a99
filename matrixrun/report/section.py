"""The section interface: what one section of the verdict document declares, and the registry
the document is put together from.

A section is one module under `report/sections/` with a module-level `SECTION` and one partial,
`templates/sections/<name>.md.j2`. Adding a section is those two files: `sections()` finds every
module of the package (a team's extra module too, on a directory added to the package's
`__path__`), the top template (`verdict.md.j2`) includes the partials of the placed sections in
their `order`, and the partial sees the section's part as the template variable `<name>`. A
section with no `order` is placed inside another's partial (the first screen includes the
launches, checks and why lines) and is built all the same.

A section's part is one typed value built from the run directory's inputs alone (`build`):
a dataclass of pre-formatted strings, or for a one-line section the string or list itself.
What several partials show is read from the section that owns it, by name: the headline and the
setup say "simulated" because the `simulation` part is there (None when the run was not
simulated), not from a second copy of that fact.

Why a registry rather than a list in the context: before it, adding a section touched its
module, its partial, `verdict.md.j2`, the context module this replaced (import, field,
call) and `budget.py`; the list of sections, their order and their names were five edits apart. A
section whose part is too big for one comment says how to shrink it (`trims`, each with its
rank in the size budget's order), so the size budget (`budget.py`) needs no edit either.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from matrixrun.report.inputs import RunInputs

#: The package whose modules are the sections (named, not imported: it imports this module).
PACKAGE = "matrixrun.report.sections"

#: A section's part: what its partial sees.
P = TypeVar("P")


@dataclass(frozen=True)
class Trim(Generic[P]):
    """One way to shrink a section's part when the document would not fit one GitHub comment:
    `step` drops one piece of detail from the part (a copy: the size budget trims a copy of the
    document) and returns the phrase for the closing note, or None when it has nothing left to
    drop. `rank` is its place among every section's trims, least decision-relevant first
    (`budget.py` lists the ranks in use)."""

    rank: int
    step: Callable[[P], str | None]


@dataclass(frozen=True)
class Section(Generic[P]):
    """One section of the document.

    `name`: its partial (`templates/sections/<name>.md.j2`) and the template variable its part
    is bound to. `order`: where the top template includes it (ascending); None for a section
    another section's partial includes. `build`: its part, from the run directory's inputs
    alone. `trims`: how the size budget may shrink its part, if at all."""

    name: str
    order: int | None
    build: Callable[[RunInputs], P]
    trims: tuple[Trim[P], ...] = ()


def sections() -> list[Section[Any]]:
    """Every section, in the document's order (the placed ones first, by `order`; then the
    ones other partials include, by name). Modules are imported by name because the registry
    is the package's contents: a module that declares a `SECTION` is in the document."""
    package = importlib.import_module(PACKAGE)
    found: dict[str, Section[Any]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        section = getattr(module, "SECTION", None)
        if not isinstance(section, Section):
            continue
        if section.name in found:
            raise ValueError(f"two report sections are named {section.name!r}")
        found[section.name] = section
    return sorted(found.values(), key=lambda s: (s.order is None, s.order or 0, s.name))


def placed(every: list[Section[Any]]) -> list[str]:
    """The names of the sections the top template includes, in order."""
    return [s.name for s in every if s.order is not None]


def parts_of(inputs: RunInputs, every: list[Section[Any]]) -> dict[str, Any]:
    """Each section's part, by name: what its partial sees as `<name>`."""
    return {s.name: s.build(inputs) for s in every}

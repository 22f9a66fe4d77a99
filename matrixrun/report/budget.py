"""The size budget: the verdict document is posted as one GitHub comment (65,536 characters),
so when it would not fit, `report.render` drops detail one step at a time, least
decision-relevant first, and says at the end what it left out. Each step trims a copy of the
document (never the data) and returns the phrase for that closing note.

The steps are the sections' own (`Section.trims`, `report.section`), each on its section's
part, in the order of their ranks; a new section's trimming is its own module's, with no edit
here. The ranks in use, least decision-relevant first:

- 10 `environment`: the per-instance server table;
- 15 `server_side`: the server's own numbers beside the client's (shown, never compared);
- 20 `latency`: the secondary metrics' tables, one metric at a time (their one-line verdicts
  stay);
- 30 `comparison`: the per-cell notes on what would settle undecided cells;
- 40 `charts`: the charts after the first two;
- 50 `reruns`: the rerun log beyond its first 20 entries;
- 60 `comparison`: the table rows of the last slices (their regime sentence and verdict stay).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from matrixrun.report.document import Document
from matrixrun.report.section import Section, Trim

Step = Callable[[Document], str | None]


def _on_part(name: str, trim: Trim[Any]) -> Step:
    """A section's trim as a step on the document (its part is `doc.parts[name]`; a section
    whose part is missing or None has nothing to drop)."""

    def step(doc: Document) -> str | None:
        part = doc.parts.get(name)
        return None if part is None else trim.step(part)

    return step


def steps(every: list[Section[Any]]) -> list[Step]:
    """Every section's trims as steps on the document, by rank (sections in the document's
    order where ranks tie)."""
    ranked = [(t.rank, i, s.name, t) for i, s in enumerate(every) for t in s.trims]
    return [_on_part(name, t) for _, _, name, t in sorted(ranked, key=lambda r: r[:2])]

"""The verdict document before it is rendered: a run directory in, a `Document` for
`templates/verdict.md.j2` out.

`inputs.read_inputs` reads the run directory once; every section builds its part from those
inputs through the section interface (`report.section`: `build(inputs) -> part`), and the
document holds the parts by section name — each partial sees its own part as `<name>`. There
is no context of section fields any more: what a section shows is its part, one typed value,
and a fact two partials show lives in one part (the headline and the setup read the
`simulation` part to say "simulated"). What the document holds besides the parts is its own:
which partials the top template includes, the run directory the closing note names, and the
size budget's state (what it left out, the limit). Nothing here derives or words anything.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matrixrun.report.inputs import RunInputs, read_inputs
from matrixrun.report.markdown_check import COMMENT_LIMIT
from matrixrun.report.section import Section, parts_of, placed, sections
from matrixrun.rundir.results import RunDir


@dataclass
class Document:
    """What the templates render: each section's part by name (plain data, every string
    pre-formatted), and the document's own few values. The size budget in `report.render`
    trims a copy of it (never the data) and lists what it dropped in `omitted`."""

    #: the run directory as the closing note names it (`matrixrun report RUN_DIR`)
    run_dir: str
    #: every section's part, by name: each partial sees its part as `<name>`
    parts: dict[str, Any] = field(default_factory=dict)
    #: the partials the top template includes, in order
    sections: list[str] = field(default_factory=list)
    # the size budget's (`omitted.md.j2`)
    omitted: list[str] = field(default_factory=list)
    limit: int = COMMENT_LIMIT

    def template_vars(self) -> dict[str, Any]:
        """The top-level names a template sees: each part under its section's name, and the
        document's own values (`run_dir`, `sections`, `omitted`, `limit`)."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del own["parts"]
        clash = own.keys() & self.parts.keys()
        if clash:
            raise ValueError(f"report sections named like the document's values: {sorted(clash)}")
        return {**own, **self.parts}


def document_of(inputs: RunInputs, every: list[Section[Any]] | None = None) -> Document:
    """The document of one run: every section's part (`every`, default all of
    `report.sections`)."""
    every = sections() if every is None else every
    return Document(run_dir=inputs.run_dir, parts=parts_of(inputs, every), sections=placed(every))


def build_document(rd: RunDir, report_at: Path | None = None) -> Document:
    """The document of a run directory (what `report.render_run_dir` renders), its links
    relative to `report_at` (default RUN_DIR/report.md)."""
    return document_of(read_inputs(rd, report_at))

"""The verdict document's sections, one module each, in the order the document has them.

Each module owns one section end to end: what it derives from the run directory's data
(numbers and enums, no words), the sentences that present them (below a `words` divider), and
its `SECTION` (`report.section.Section`: its name, its place, how it builds its part from the
run's inputs, how it trims it); its partial is `templates/sections/<name>.md.j2`, which
`templates/verdict.md.j2` includes in the sections' order and which sees the part as `<name>`.
Changing a section (the checks line, say) touches its module and its partial; adding one is a
new module and a new partial, found here by `report.section.sections()`; a module's `of`
builds its part (one typed value) from the run's inputs.
What several sections share lives one level up: `report.series` (the primary metric's series
as the sections read them), `report.given` (flags as the servers were given them),
`report.fmt` (every number) and `report.wording` (the sentences about a verdict that every
section uses).
"""

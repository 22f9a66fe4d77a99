"""The verdict document's sections, one module each, in the order the document has them.

Each module owns one section end to end: what it derives from the run directory's data
(numbers and enums, no words), the sentences that present them (below a `words` divider), and
`of(...)`, what `context.context_from` puts in the template context; its partial is
`templates/sections/<name>.md.j2`, included by `templates/verdict.md.j2`. Changing a section
(the checks line, say) touches its module and its partial. What several sections share lives
one level up: `report.series` (the primary metric's series as the sections read them),
`report.given` (flags as the servers were given them), `report.fmt` (every number) and
`report.wording` (the sentences about a verdict that every section uses).
"""

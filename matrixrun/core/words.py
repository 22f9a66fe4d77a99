"""Counted nouns and the one word per outcome, for every line the tool prints: the report,
the runner's progress lines, `validate`, `plan`, `run`, `post`'s comment and the CLI.

In core, not in the report, because every stage that prints says "1 cell" and "undecided" the
same way, and a progress line must not load the report to count its cells.

Two small rules a newcomer notices first (issue 33): "1 cells" and "1 routine replicates" read
as carelessness, and one outcome called "undecided" in a table and "inconclusive" in the line
beside it reads as two outcomes. So the outcome has one word, stored and printed alike: a
verdict (verdict.json, format 2) and the reason of a rerun of an undecided cell (results.jsonl,
events.jsonl, verdict.json's rerun log, format 3) are `undecided`; an older run directory's
`inconclusive` is migrated by `core.migrate`, an older results store's by its own migration
(`store.schema`), and nothing translates it for printing.
"""

from __future__ import annotations


def reason(stored: str) -> str:
    """A rerun reason as a progress line says it: 'undecided', 'fresh server', 'first'."""
    return stored.replace("_", " ")


def plural(n: int, noun: str, many: str | None = None) -> str:
    """'1 cell', '2 cells', '0 cells'; `many` for irregular plurals ('1 was', '2 were')."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


#: What each rerun reason (`Measurement.reason`) was for, in a table cell or a rerun line.
REASON_WORDS = {
    "first": "first run",
    "surprise": "surprising change",
    "undecided": "undecided cell",
    "crossover": "crossover bracket",
    "fresh_server": "fresh-server check",
    "aa": "A/A (baseline against itself)",
    "manual": "repeat found in the input (reason not recorded)",
    "bisection": "bisection midpoint",
    "fixed": "fixed design (calibration)",
}

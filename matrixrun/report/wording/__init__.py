"""The sentences several sections of the verdict document share, written once.

The analysis returns numbers, enums and flags (`core/verdict.py`), the verify policy its
reasons as data (`core/rerun_reason.py`); each section of the document words its own part
(`report/sections/`), and the sentences about a verdict that many of them cite — a cell, a
series' regimes, a crossover, a candidate's overall verdict — are
here (`verdicts`), so a claim cannot be phrased two ways in two places. Wording rules (issue
6): "better"/"worse" only from a confident verdict, undecided cells say what would settle
them, provisional (n = 1) verdicts say so, and a simulated run says SIMULATED with the
simulator's time scale. Counted nouns and the one printed word per outcome and reason are
every stage's (`core/words.py`, which the measurer imports too); the `history`
command's tables are the CLI's (`cli/history_view.py`).
"""

from matrixrun.core.words import REASON_WORDS
from matrixrun.report.wording.verdicts import (
    NON_MONOTONE,
    cell_note,
    cell_text,
    crossover,
    label,
    measured_at,
    overall,
    regimes,
    undecided,
    where,
    xs_range,
)

__all__ = [
    "NON_MONOTONE",
    "REASON_WORDS",
    "cell_note",
    "cell_text",
    "crossover",
    "label",
    "measured_at",
    "overall",
    "regimes",
    "undecided",
    "where",
    "xs_range",
]

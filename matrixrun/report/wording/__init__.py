"""The sentences several sections of the verdict document share, written once.

The analysis returns numbers, enums and flags (`core/verdict.py`), the verify policy its
reasons as data (`core/rerun_reason.py`); each section of the document words its own part
(`report/sections/`), and the sentences about a verdict that many of them cite — a cell, a
series' regimes, a crossover, a candidate's overall verdict, σ and the run's caveats — are
here (`verdicts`), so a claim cannot be phrased two ways in two places. Wording rules (issue
6): "better"/"worse" only from a confident verdict, undecided cells say what would settle
them, provisional (n = 1) verdicts say so, and a simulated run says SIMULATED with the
simulator's time scale. `counts`: counted nouns and the one printed word per outcome and
reason; `history`: the `history` command's tables.
"""

from matrixrun.report.wording.counts import REASON_WORDS
from matrixrun.report.wording.verdicts import (
    BISECTED,
    NON_MONOTONE,
    SOURCE_WORDS,
    bisected,
    caveat,
    cell_note,
    cell_text,
    crossover,
    half_measured,
    label,
    level_text,
    measured_at,
    multiplicity,
    overall,
    regimes,
    sigma_text,
    undecided,
    where,
    xs_range,
)

__all__ = [
    "BISECTED",
    "NON_MONOTONE",
    "REASON_WORDS",
    "SOURCE_WORDS",
    "bisected",
    "caveat",
    "cell_note",
    "cell_text",
    "crossover",
    "half_measured",
    "label",
    "level_text",
    "measured_at",
    "multiplicity",
    "overall",
    "regimes",
    "sigma_text",
    "undecided",
    "where",
    "xs_range",
]

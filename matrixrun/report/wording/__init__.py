"""Every sentence of the verdict document, written once.

The analysis returns numbers, enums and flags (`verdict.py`), the verify policy its reasons
as data (`rerun_reason.py`); this package is the only place that turns them into words, so a
claim cannot be phrased two ways in two places (a crossover, a rerun's meaning, a cell's
note). Wording rules (issue 6): "better"/"worse" only from a confident verdict, inconclusive
cells say what would settle them, provisional (n = 1) verdicts say so, and a simulated run
says SIMULATED with the simulator's time scale. `verdicts`: sentences about the judgement;
`run`: about how the run went.
"""

from matrixrun.report.wording import decision
from matrixrun.report.wording.run import (
    CLIENT_WORDS,
    HARDWARE_SKIPPED,
    NO_SERVERS,
    REASON_WORDS,
    SUSPECT_STATUS,
    cache_flushes,
    capped_cell,
    client_bound,
    compare_title,
    compared,
    failed_requests,
    hardware_sentence,
    ingested_title,
    job_not_completed,
    never_shared_node,
    no_reruns,
    rerun_server,
    rerun_showed,
    rerun_why,
    servers_dropped,
    short_outputs,
    simulation,
    workload,
)
from matrixrun.report.wording.verdicts import (
    BISECTED,
    NON_MONOTONE,
    SOURCE_WORDS,
    bisected,
    caveat,
    cell_note,
    cell_text,
    crossover,
    label,
    level_text,
    multiplicity,
    overall,
    regimes,
    sigma_text,
    undecided,
    where,
)

__all__ = [
    "BISECTED",
    "CLIENT_WORDS",
    "HARDWARE_SKIPPED",
    "NON_MONOTONE",
    "NO_SERVERS",
    "REASON_WORDS",
    "SOURCE_WORDS",
    "SUSPECT_STATUS",
    "bisected",
    "cache_flushes",
    "capped_cell",
    "caveat",
    "cell_note",
    "cell_text",
    "client_bound",
    "compare_title",
    "compared",
    "crossover",
    "decision",
    "failed_requests",
    "hardware_sentence",
    "ingested_title",
    "job_not_completed",
    "label",
    "level_text",
    "multiplicity",
    "never_shared_node",
    "no_reruns",
    "overall",
    "regimes",
    "rerun_server",
    "rerun_showed",
    "rerun_why",
    "servers_dropped",
    "short_outputs",
    "sigma_text",
    "simulation",
    "undecided",
    "where",
    "workload",
]

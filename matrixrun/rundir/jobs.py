"""jobs.json: the Slurm jobs of a run, as the controller last saw them.

One of the run directory's interface files, written only by the controller (`matrixrun run
--executor slurm`, whole-file atomic writes), read by `--resume` (which jobs are still queued
or running, so nothing is submitted twice) and by the report (which groups' jobs failed, were
cancelled or timed out, with Slurm's reason; which nodes each arm ran on, and whether arms ever
shared one). Its shape is a pydantic model so writer and readers agree on one definition.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from matrixrun.core.errors import InputError

#: Slurm job states (the first word of sacct's State) after which a job never runs again.
TERMINAL = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
#: States of a job that is waiting for its turn.
QUEUED = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})


class JobRecord(BaseModel):
    """One Slurm job: which group and stage it runs, where, and how it ended."""

    model_config = ConfigDict(extra="ignore")

    key: str = Field(description="<group>.r<round>: one job per group and stage at a time.")
    group: str
    arm: str
    slice: str = ""
    round: int = Field(description="0: stage 1 (first runs, warm reruns); n: stage-2 round n.")
    job_id: str
    state: str = Field("PENDING", description="Slurm's state word, e.g. RUNNING, TIMEOUT.")
    state_detail: str | None = Field(None, description="sacct's State as given.")
    exit_code: str | None = None
    slurm_reason: str | None = Field(None, description="sacct/squeue Reason (why pending).")
    reason: str | None = Field(None, description="One sentence when it did not complete.")
    node: str | None = None
    submitted_at: str
    started_at: str | None = None
    ended_at: str | None = None
    elapsed: str | None = None
    time_limit_min: int
    gres: str | None = None
    partition: str | None = None
    log: str | None = Field(None, description="submitit's stderr file, run-dir relative.")
    cells_failed: int = Field(0, description="Cells recorded failed because the job died.")
    cancelled_by_matrixrun: bool = Field(
        False, description="Cancelled on Ctrl-C: not a failure; --resume submits again."
    )
    left_running: bool = Field(False, description="Ctrl-C left it running for --resume.")

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL

    @property
    def failed(self) -> bool:
        """Ended without completing, other than by a Ctrl-C cancel of matrixrun's own."""
        return self.ended and self.state != "COMPLETED" and not self.cancelled_by_matrixrun


class JobsFile(BaseModel):
    """The content of jobs.json."""

    model_config = ConfigDict(extra="ignore")

    executor: str = "slurm"
    partition: str | None = None
    max_parallel: int | None = None
    jobs: list[JobRecord] = Field(default_factory=list)
    nodes_by_arm: dict[str, list[str]] = Field(
        default_factory=dict, description="Nodes each arm's server instances ran on."
    )
    shared_nodes: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Per candidate: the nodes where it and the baseline both ran.",
    )
    never_shared_node: list[str] = Field(
        default_factory=list,
        description="Candidates that never ran on a node the baseline ran on: their "
        "comparison includes node-to-node differences, not only the flags.",
    )

    def latest(self, key: str) -> JobRecord | None:
        found = [j for j in self.jobs if j.key == key]
        return found[-1] if found else None


def read_jobs(path: Path) -> JobsFile:
    """jobs.json at `path`; an empty one when there is none (a run not yet submitted)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return JobsFile()
    try:
        return JobsFile.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the top level"
        raise InputError(f"{path}: not a jobs.json ({where}: {first['msg']})") from exc


def node_sharing(
    nodes_by_arm: dict[str, set[str]], baseline: str, candidates: list[str]
) -> tuple[dict[str, list[str]], list[str]]:
    """Per candidate, the nodes it shared with the baseline; and the candidates that shared
    none (only those that ran at all, on nodes that are known). Pure."""
    base = nodes_by_arm.get(baseline, set())
    shared = {c: sorted(nodes_by_arm.get(c, set()) & base) for c in candidates}
    never = [c for c in candidates if base and nodes_by_arm.get(c) and not shared[c]]
    return shared, never

"""The run directory: an append-only record of everything a run measured.

    runs/<experiment>/<run-id>/
      spec.yaml  spec.sha256   the spec as run and its hash
      plan.json                the plan as run
      env.json                 harness, host, engine versions and effective flags
      results.jsonl            one Measurement per line, appended and flushed as each completes
      events.jsonl             launches, health, stops, flushes, verify decisions (the audit log)
      verdict.json             the analysis result
      requests/<cell>-<attempt>.jsonl   per-request records (in the server's wall time: for a
                                        time-dilated rehearsal multiply by the measurement's
                                        time_scale for modelled time)
      logs/<instance>.log      server logs
      pids/<instance>.pid      one per live server (removed when it stops)
      report.md

A crash loses at most the measurement in flight; `--resume` reads results.jsonl back and skips
what is there. Lines are never rewritten: a rerun is a new line.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from matrixrun.errors import InputError
from matrixrun.measurement import Measurement


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.#-]+", "_", name)


class RunDir:
    """One run's directory. Methods that write flush (and fsync results) before returning."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # -- layout -------------------------------------------------------------------------
    @property
    def results_file(self) -> Path:
        return self.path / "results.jsonl"

    @property
    def events_file(self) -> Path:
        return self.path / "events.jsonl"

    def log_file(self, instance: str) -> Path:
        return self.path / "logs" / f"{_safe(instance)}.log"

    def pid_file(self, instance: str) -> Path:
        return self.path / "pids" / f"{_safe(instance)}.pid"

    def requests_file(self, cell_id: str, attempt: int) -> Path:
        return self.path / "requests" / f"{cell_id}-{attempt}.jsonl"

    def create(self) -> RunDir:
        for sub in ("logs", "pids", "requests"):
            (self.path / sub).mkdir(parents=True, exist_ok=True)
        return self

    def exists(self) -> bool:
        return (self.path / "plan.json").exists() or self.results_file.exists()

    # -- writing ------------------------------------------------------------------------
    def write_text(self, name: str, text: str) -> Path:
        """Write a whole file atomically (temp file + rename): readers never see half of it."""
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(target)
        return target

    def write_json(self, name: str, obj: Any) -> Path:
        return self.write_text(name, json.dumps(obj, indent=2, default=str) + "\n")

    def append(self, measurement: Measurement) -> None:
        """Append one measurement and make it durable before returning."""
        line = measurement.model_dump_json() + "\n"
        with self.results_file.open("a") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def event(self, kind: str, **fields: Any) -> None:
        """Append to the audit log (launch, healthy, stop, flush, verify decisions)."""
        record = {"t": now_iso(), "event": kind, **fields}
        with self.events_file.open("a") as fh:
            fh.write(json.dumps(record, default=str) + "\n")
            fh.flush()

    # -- reading ------------------------------------------------------------------------
    def measurements(self) -> list[Measurement]:
        """Every measurement in file order. A truncated last line (a crash mid-write) is
        skipped; any other bad line is an error naming file and line."""
        if not self.results_file.exists():
            return []
        out: list[Measurement] = []
        lines = self.results_file.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(Measurement.model_validate_json(line))
            except ValidationError as exc:
                if number == len(lines):
                    break  # torn final write: the cell will be measured again
                raise InputError(
                    f"{self.results_file}:{number}: not a measurement record "
                    f"({exc.errors()[0]['msg']}); was the file edited by "
                    "hand?"
                ) from exc
        return out

    def events(self) -> list[dict[str, Any]]:
        if not self.events_file.exists():
            return []
        out = []
        for line in self.events_file.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def read_json(self, name: str) -> Any:
        path = self.path / name
        try:
            return json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise InputError(
                f"{path} is missing; is {self.path} a matrixrun run directory?"
            ) from exc
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc

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
      results.d/<group>.jsonl  events.d/<group>.jsonl   a run spread over several nodes
                               (`--executor slurm`): each group's job appends only to its own
                               files, and reading merges them with results.jsonl/events.jsonl
      jobs.json  slurm/        the Slurm jobs (run/executors/slurm.py), submitit's files
      format.json              the format version of every file without its own
                               (core/format_version.py); older files are read through
                               core/migrate.py, and a resumed run rewrites them first

A crash loses at most the measurement in flight; `--resume` reads results.jsonl back and skips
what is there. Lines are never rewritten: a rerun is a new line. (A last line torn by a crash
mid-write is skipped when reading and cut away before the next append; it was never a line.)
"""

from __future__ import annotations

import copy
import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from matrixrun.core import migrate
from matrixrun.core.errors import InputError
from matrixrun.core.format_version import FORMAT_FILE, RECORDS_VERSION, found_version
from matrixrun.core.measurement import Measurement
from matrixrun.core.redact import redact_json


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class TornTail:
    """A partial last record cut from results.jsonl: how many bytes, and the cell it was
    measuring when the line can still tell (its `cell_id` comes first in the record)."""

    size: int
    cell_id: str | None

    def sentence(self, path: Path) -> str:
        cell = f" of cell {self.cell_id}" if self.cell_id else ""
        return (
            f"{path}: cut a torn last record{cell} ({self.size} bytes, a crash mid-write); "
            "that run of the cell is measured again"
        )


def _is_measurement(data: bytes) -> bool:
    try:
        Measurement.model_validate_json(data)
    except ValidationError:
        return False
    return True


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def _fresh_line(path: Path, is_whole: Callable[[bytes], bool]) -> bytes | None:
    """Make `path` end at a line boundary before an append: a last line without its newline
    gets one if `is_whole` accepts it, else it is cut (and returned). One byte read in the
    usual case."""
    try:
        with path.open("rb") as fh:
            if fh.seek(0, os.SEEK_END) == 0:
                return None
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return None
    except FileNotFoundError:
        return None
    data = path.read_bytes()
    start = data.rfind(b"\n") + 1
    tail = data[start:]
    if is_whole(tail):
        with path.open("ab") as fh:
            fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        return None
    with path.open("r+b") as fh:
        fh.truncate(start)
        fh.flush()
        os.fsync(fh.fileno())
    return tail


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.#-]+", "_", name)


class RunDir:
    """One run's directory. Methods that write flush (and fsync results) before returning.

    `shard` (a group id) is for a process that shares the directory with others on other
    nodes (a Slurm job): its measurements and events go to results.d/<shard>.jsonl and
    events.d/<shard>.jsonl, files no other process writes, so no lock is needed on a network
    file system (docs/cluster.md says why not one shared file). Reading always merges."""

    def __init__(self, path: str | Path, shard: str | None = None) -> None:
        self.path = Path(path)
        self.shard = _safe(shard) if shard else None
        #: The last `migrated()` and the files' (path, mtime, size) it was read from.
        self._migrated: tuple[tuple[tuple[str, int, int], ...], dict[str, Any]] | None = None

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

    def _own(self, main: Path, folder: str) -> Path:
        """The file this process appends to: the main one, or its shard's."""
        return main if self.shard is None else self.path / folder / f"{self.shard}.jsonl"

    def _all(self, main: Path, folder: str) -> list[Path]:
        """The main file, then every shard's (sorted by name): what reading merges."""
        return [main, *sorted((self.path / folder).glob("*.jsonl"))]

    def create(self) -> RunDir:
        """Make the directory ready to write: its folders, and every file in this matrixrun's
        format — a fresh directory records the format, an older one (a run resumed by a newer
        matrixrun) is migrated in place first, so no file ever mixes two formats."""
        for sub in ("logs", "pids", "requests"):
            (self.path / sub).mkdir(parents=True, exist_ok=True)
        files = self._model_files()
        holds = self.exists() or "settings.json" in files
        if holds and not migrate.is_current(files):
            self.upgrade()
        elif FORMAT_FILE not in files:
            self.write_json(FORMAT_FILE, {"version": RECORDS_VERSION})
        return self

    def upgrade(self) -> None:
        """Rewrite every file of an older format in the current one (each file atomically;
        format.json last, so a crash midway leaves a directory that migrates again)."""
        files = self.migrated()
        for name, content in sorted(files.items()):
            if name == FORMAT_FILE or name.startswith("spec."):
                continue
            if name.endswith(".jsonl"):
                lines = "".join(json.dumps(r, default=str) + "\n" for r in content)
                self.write_text(name, lines)
            else:
                self.write_json(name, content)
        self.write_json(FORMAT_FILE, files[FORMAT_FILE])

    def exists(self) -> bool:
        return (
            (self.path / "plan.json").exists()
            or self.results_file.exists()
            or (self.path / "results.d").is_dir()
        )

    # -- writing ------------------------------------------------------------------------
    def write_text(self, name: str, text: str) -> Path:
        """Write a whole file atomically (temp file + rename): readers never see half of it."""
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        # a temp name of this host and process: two writers (nodes of a Slurm run) never
        # share one, so the rename is always of a whole file written by one of them
        tmp = target.with_name(f".{target.name}.{socket.gethostname()}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
        return target

    def write_json(self, name: str, obj: Any) -> Path:
        return self.write_text(name, json.dumps(obj, indent=2, default=str) + "\n")

    def append(self, measurement: Measurement) -> None:
        """Append one measurement and make it durable before returning. A torn last line (a
        crash mid-write) is dealt with first, so the new record never glues onto it."""
        line = measurement.model_dump_json() + "\n"
        path = self._own(self.results_file, "results.d")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.mend()
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def mend(self) -> TornTail | None:
        """If this process's results file (results.jsonl, or its shard's) does not end in a
        newline, its last write was cut off. A tail that is a whole record (only the newline
        was lost) gets its newline; a partial record is cut away and returned (for the run to
        report): it is not a line (nothing ever read it as a measurement, see
        `measurements`) and the cell it belonged to is measured again. The only write that is
        not an append."""
        cut = _fresh_line(self._own(self.results_file, "results.d"), _is_measurement)
        if cut is None:
            return None
        found = re.search(rb'"cell_id"\s*:\s*"([^"]*)"', cut)
        return TornTail(len(cut), found.group(1).decode(errors="replace") if found else None)

    def event(self, kind: str, **fields: Any) -> None:
        """Append to the audit log (launch, healthy, stop, flush, verify decisions); like a
        measurement, on a fresh line even after a torn write."""
        record = {"t": now_iso(), "event": kind, **redact_json(fields)}
        path = self._own(self.events_file, "events.d")
        path.parent.mkdir(parents=True, exist_ok=True)
        _fresh_line(path, _is_json)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=str) + "\n")
            fh.flush()

    # -- reading ------------------------------------------------------------------------
    def measurements(self) -> list[Measurement]:
        """Every measurement: results.jsonl in file order, then (a run on several nodes) every
        shard's, the merge ordered by start time. A truncated last line of a file (a crash
        mid-write) is skipped; any other bad line is an error naming file and line."""
        files = self._all(self.results_file, "results.d")
        if self._records_version() != RECORDS_VERSION:
            out = self._migrated_measurements()
        else:
            out = [m for path in files for m in self._read_measurements(path)]
        if len(files) > 1:
            out.sort(key=lambda m: m.started_at or "")  # stable: one file's order is kept
        return out

    def _migrated_measurements(self) -> list[Measurement]:
        """results.jsonl (and shards) of an older directory, through the migrations."""
        made = self.migrated()
        out: list[Measurement] = []
        for path in self._all(self.results_file, "results.d"):
            name = path.relative_to(self.path).as_posix()
            for number, record in enumerate(made.get(name, []), 1):
                try:
                    out.append(Measurement.model_validate(record))
                except ValidationError as exc:
                    raise InputError(
                        f"{path}: record {number}: not a measurement after migrating it to "
                        f"this matrixrun's format ({exc.errors()[0]['msg']})"
                    ) from exc
        return out

    @staticmethod
    def _read_measurements(path: Path) -> list[Measurement]:
        if not path.exists():
            return []
        out: list[Measurement] = []
        # bytes, not text: a write torn inside a multi-byte character is not valid UTF-8
        lines = path.read_bytes().splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(Measurement.model_validate_json(line))
            except ValidationError as exc:
                if number == len(lines):
                    break  # torn final write: the cell will be measured again
                raise InputError(
                    f"{path}:{number}: not a measurement record "
                    f"({exc.errors()[0]['msg']}); was the file edited by "
                    "hand?"
                ) from exc
        return out

    def events(self) -> list[dict[str, Any]]:
        """The audit log: events.jsonl, then every shard's, the merge ordered by time."""
        files = self._all(self.events_file, "events.d")
        merge = len(files) > 1
        out: list[dict[str, Any]] = []
        if self._records_version() != RECORDS_VERSION:
            made = self.migrated()
            names = [p.relative_to(self.path).as_posix() for p in files]
            out = [dict(e) for name in names for e in made.get(name, []) if isinstance(e, dict)]
            files = []
        for path in files:
            if not path.exists():
                continue
            for line in path.read_bytes().splitlines():
                try:
                    record = json.loads(line)
                except ValueError:  # a torn line (JSON or UTF-8): the audit log skips it
                    continue
                if isinstance(record, dict):
                    out.append(record)
        if merge:
            out.sort(key=lambda e: str(e.get("t", "")))
        return out

    def read_json(self, name: str) -> Any:
        """A JSON file of the directory in this matrixrun's format: as stored when it is
        current, else through the migrations (which may also make one an older directory
        lacks, as settings.json of a run from before that file existed)."""
        data = self._raw_json(name)
        if data is not None:
            own = name in migrate.SELF_VERSIONED
            version = found_version(data) if own else self._records_version()
            if version == migrate.current_of(name):
                return data
        current = self._records_version() == RECORDS_VERSION
        found = None if data is None and current else self.migrated().get(name)
        if found is None:
            raise InputError(
                f"{self.path / name} is missing; is {self.path} a matrixrun run directory?"
            )
        return copy.deepcopy(found)

    def has(self, name: str) -> bool:
        """The file exists, or the migrations make it (settings.json of an old run)."""
        if (self.path / name).exists():
            return True
        return self._records_version() != RECORDS_VERSION and name in self.migrated()

    def _records_version(self) -> int:
        """The version of the files without their own (`core.format_version`): two small
        reads, so the readers of a current directory pay nothing for the migrations."""
        fmt = self._raw_json(FORMAT_FILE)
        if fmt is not None:
            return migrate.records_version({FORMAT_FILE: fmt})
        settings = self._raw_json("settings.json")
        return migrate.records_version({} if settings is None else {"settings.json": settings})

    def _raw_json(self, name: str) -> Any:
        path = self.path / name
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc

    def _model_files(self) -> dict[str, Any]:
        """The files the format versions are read from (format.json, settings.json,
        verdict.json), those that exist."""
        names = (FORMAT_FILE, *migrate.SELF_VERSIONED)
        raw = {name: self._raw_json(name) for name in names}
        return {name: data for name, data in raw.items() if data is not None}

    def migrated(self) -> dict[str, Any]:
        """Every file of the directory, read as plain data and brought to the current format
        by `core.migrate` — the one place old formats are read. Kept while no file changes
        (a report reads several files of one directory: it is migrated once), so callers copy
        what they hand on."""
        patterns = ("*.json", "*.jsonl", "results.d/*.jsonl", "events.d/*.jsonl", "spec.*")
        paths = sorted(p for pattern in patterns for p in self.path.glob(pattern))
        stats = [(p, p.stat()) for p in paths]
        stamp = tuple((p.as_posix(), st.st_mtime_ns, st.st_size) for p, st in stats)
        if self._migrated is not None and self._migrated[0] == stamp:
            return self._migrated[1]
        files: dict[str, Any] = {}
        for path in paths:
            name = path.relative_to(self.path).as_posix()
            if name.endswith(".json"):
                files[name] = self._raw_json(name)
            elif name.endswith(".jsonl"):
                files[name] = _jsonl_records(path, lenient="events" in path.name)
        if (self.path / "spec.yaml").exists():
            files["spec.yaml"] = _yaml_mapping(self.path / "spec.yaml")
        if (self.path / "spec.sha256").exists():
            files["spec.sha256"] = (self.path / "spec.sha256").read_text(errors="replace")
        made = migrate.migrate(files)
        self._migrated = (stamp, made)
        return made


def _jsonl_records(path: Path, lenient: bool = False) -> list[Any]:
    """A JSONL file's records as plain data for the migrations: a torn last line (a crash
    mid-write) is skipped, as the readers of the current format skip it (`lenient`, the audit
    log: any line that does not parse)."""
    lines = path.read_bytes().splitlines()
    out: list[Any] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            if lenient or number == len(lines):
                continue
            raise InputError(f"{path}:{number}: not a JSON record ({exc})") from exc
    return out


def _yaml_mapping(path: Path) -> dict[str, Any] | None:
    """The spec copy as plain data (for the migrations that need what it says); None when it
    does not parse into a mapping."""
    try:
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except (YAMLError, OSError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None

"""Loading a spec with line numbers: ruamel's round-trip loader keeps each key's line, so every
validation error (or, once the spec validates, every semantic check) is reported at once as
`path:line: key: message`, and a reviewer fixes a spec in one pass. A profile given as a file
path is read relative to the spec.

A spec file is read once (`read_spec`) into a `SpecFile`: its path, its text as UTF-8 whatever
the locale, the validated spec and the YAML tree with each key's line. Whatever else needs the
file — the flag check's `file:line`, the run directory's copy and hash, a resume's comparison,
a rehearsal's preview — takes that object instead of opening the file again (the copies once
decoded it with the locale's encoding, so a spec with "≥" in a comment failed under LANG=C)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from matrixrun.core.errors import SpecError, SpecIssue
from matrixrun.core.profile import Profile
from matrixrun.spec import bounds
from matrixrun.spec.checks import semantic_issues
from matrixrun.spec.messages import message_for
from matrixrun.spec.models import Spec


def spec_hash(text: str) -> str:
    """Content hash of the spec file as run (recorded in the run directory)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SpecFile:
    """One spec file, read once: where it is, what it says, what it means, and where each key
    is written (`line`), for every reader after the loader."""

    path: Path
    #: The file's text, decoded as UTF-8 (what the run directory copies and hashes).
    text: str
    #: The validated spec (a run may swap in its decided noise prior: `with_spec`).
    spec: Spec
    #: The round-trip YAML tree: each mapping and list keeps its keys' lines (`line_of`).
    data: Any

    @property
    def sha256(self) -> str:
        """The whole file's sha256 (spec.sha256, settings.json)."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def hash(self) -> str:
        """The short content hash the plan's ids derive from (`spec_hash`)."""
        return spec_hash(self.text)

    def line(self, loc: tuple[Any, ...]) -> int | None:
        """The line of the deepest key on a model location (pydantic's, or a check's)."""
        return line_of(self.data, data_loc(loc, self.data))

    def with_spec(self, spec: Spec) -> SpecFile:
        """The same file with `spec` as what it means (a run's decided `noise_from: auto`)."""
        return dataclasses.replace(self, spec=spec)


def read_spec(path: str | Path) -> SpecFile:
    """Read a spec file once and validate it; raise SpecError listing every problem as
    `path:line: key: ...`."""
    path = Path(path)
    try:
        text = read_utf8(path)
    except OSError as exc:
        raise SpecError(
            [
                SpecIssue(
                    str(path), None, "", f"cannot read the spec ({exc.strerror}); check the path"
                )
            ]
        ) from exc
    except UnicodeDecodeError as exc:
        raise SpecError([_not_utf8(str(path), exc)]) from exc
    return parse_spec_file(text, path)


def parse_spec_file(text: str, path: str | Path) -> SpecFile:
    """A `SpecFile` from text already in hand, as if read from `path` (errors name it; a
    profile path is relative to its folder)."""
    spec, data = _parse(text, str(path))
    return SpecFile(Path(path), text, spec, data)


def load_spec(path: str | Path) -> Spec:
    """The validated spec of a file (`read_spec`), for a reader that needs nothing else."""
    return read_spec(path).spec


def read_utf8(path: Path) -> str:
    """A spec or profile as text: UTF-8 whatever the locale (a spec is shared like code)."""
    return path.read_bytes().decode("utf-8")


def _not_utf8(where: str, exc: UnicodeDecodeError, key: str = "") -> SpecIssue:
    """The sentence for a file that is not UTF-8, at the line of the first bad byte."""
    data = exc.object if isinstance(exc.object, bytes) else bytes(exc.object)
    line = data.count(b"\n", 0, exc.start) + 1
    return SpecIssue(
        where,
        line,
        key,
        f"not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); save the file "
        "as UTF-8",
    )


def parse_spec(text: str, where: str = "<spec>") -> Spec:
    """A spec from its text; `where` names it in errors and is the folder a profile path is
    relative to."""
    return _parse(text, where)[0]


def _parse(text: str, where: str) -> tuple[Spec, Any]:
    """The validated spec and the round-trip YAML tree it was read from."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        data = yaml.load(text)
    except RecursionError as exc:  # the composer recurses once per nesting level
        raise SpecError(
            [SpecIssue(where, None, "", "nested too deeply to read; a spec nests about 6 deep")]
        ) from exc
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or exc.context or "invalid YAML"
        dup = re.match(r'found duplicate key "([^"]+)"', what)
        if dup:
            what = f"duplicate key {dup.group(1)!r} (a key may appear once per mapping)"
        raise SpecError(
            [
                SpecIssue(
                    where,
                    line,
                    "",
                    f"YAML syntax error: {what}; fix the indentation or quoting there",
                )
            ]
        ) from exc
    except YAMLError as exc:
        # e.g. ReaderError (a control character): one line, at its position when known
        position = getattr(exc, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else None
        char = getattr(exc, "character", None)
        what = (
            f"character {char!r} cannot appear in YAML; remove it"
            if char is not None
            else " ".join(str(exc).split())
        )
        raise SpecError([SpecIssue(where, line, "", f"YAML error: {what}")]) from exc
    if not isinstance(data, dict):
        raise SpecError(
            [
                SpecIssue(
                    where,
                    1,
                    "",
                    "the spec must be a YAML mapping with keys "
                    "experiment, title, model, hardware, arms, ...",
                )
            ]
        )
    plain = bounds.plain(data, where)
    try:
        spec = Spec.model_validate(plain)
    except ValidationError as exc:
        raise SpecError(_issues(exc, data, where)) from exc
    semantic = semantic_issues(spec) or bounds.bound_issues(spec)
    if semantic:
        raise SpecError(
            [
                SpecIssue(
                    where,
                    line_of(data, data_loc(loc, data)),
                    ".".join(map(str, data_loc(loc, data))),
                    msg,
                )
                for loc, msg in semantic
            ]
        )
    if isinstance(spec.rehearsal.profile, str):
        spec = _with_profile_file(spec, Path(where).parent, where, data)
    if spec.verify.noise_from == "auto":
        spec = _auto_in_own_copy(spec, Path(where).parent)
    if spec.verify.noise_dir() is not None:
        spec = _with_noise_from(spec, Path(where).parent, where, data)
    return spec, data


def _auto_in_own_copy(spec: Spec, base: Path) -> Spec:
    """`verify.noise_from: auto` in a run directory's own spec copy (plan.json and
    settings.json beside it) means what that run was given when it started: its prior.json
    (`store.prior`), else nothing. A resume or a reproduction then has the run's prior, never
    what the results store holds today. Any other spec keeps `auto`."""
    if not ((base / "plan.json").is_file() and (base / "settings.json").is_file()):
        return spec
    prior = base / "prior.json"
    value = str(prior.resolve()) if prior.is_file() else "none"
    return spec.model_copy(update={"verify": spec.verify.model_copy(update={"noise_from": value})})


def _with_noise_from(spec: Spec, base: Path, where: str, data: Any) -> Spec:
    """`verify.noise_from` resolved against the spec's folder, checked to be a run directory
    that has been analysed (its verdict.json holds the noise).

    A run directory's own copy of the spec (`RUN/spec.yaml`, what its report's Reproduce and
    resume commands name) keeps the path as written, relative to where the original spec was,
    so it rarely resolves from there; then it means what that run borrowed: `RUN/settings.json`,
    whose records of the borrowed noise `history.noise_history` reads. Not RUN's own noise: a
    resumed RUN would count its own df twice."""
    assert spec.verify.noise_from is not None
    path = (base / spec.verify.noise_from).resolve()
    borrowed = base / "settings.json"
    own_copy = (base / "plan.json").is_file() and borrowed.is_file()
    if not (path / "verdict.json").is_file() and own_copy:
        verify = spec.verify.model_copy(update={"noise_from": str(borrowed.resolve())})
        return spec.model_copy(update={"verify": verify})
    if not (path / "verdict.json").is_file():
        line = line_of(data, ("verify", "noise_from"))
        why = "no such directory" if not path.is_dir() else "it has no verdict.json"
        raise SpecError(
            [
                SpecIssue(
                    where,
                    line,
                    "verify.noise_from",
                    f"{spec.verify.noise_from} ({path}): {why}; give an earlier run directory "
                    "that `matrixrun analyse` has been run on",
                )
            ]
        )
    verify = spec.verify.model_copy(update={"noise_from": str(path)})
    return spec.model_copy(update={"verify": verify})


def _with_profile_file(spec: Spec, base: Path, where: str, data: Any) -> Spec:
    assert isinstance(spec.rehearsal.profile, str)
    profile_path = base / spec.rehearsal.profile
    line = line_of(data, ("rehearsal", "profile"))
    try:
        # bounded like the spec: an alias bomb in a profile would expand in the validation
        raw = bounds.plain(YAML(typ="safe").load(read_utf8(profile_path)), str(profile_path))
        profile = Profile.model_validate(raw)
    except UnicodeDecodeError as exc:
        issue = _not_utf8(str(profile_path), exc)
        raise SpecError(
            [
                SpecIssue(
                    where, line, "rehearsal.profile", f"{issue.path}:{issue.line}: {issue.message}"
                )
            ]
        ) from exc
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{profile_path}:{mark.line + 1}" if mark is not None else str(profile_path)
        what = exc.problem or exc.context or "invalid YAML"
        raise SpecError(
            [
                SpecIssue(
                    where,
                    line,
                    "rehearsal.profile",
                    f"{at}: YAML syntax error: {what}; fix the profile there",
                )
            ]
        ) from exc
    except (YAMLError, RecursionError) as exc:
        raise SpecError(
            [
                SpecIssue(
                    where,
                    line,
                    "rehearsal.profile",
                    f"{profile_path}: not readable YAML ({type(exc).__name__}); fix the profile",
                )
            ]
        ) from exc
    except OSError as exc:
        raise SpecError(
            [
                SpecIssue(
                    where, line, "rehearsal.profile", f"cannot read {profile_path} ({exc.strerror})"
                )
            ]
        ) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SpecError(
            [
                SpecIssue(
                    where,
                    line,
                    "rehearsal.profile",
                    f"{profile_path}: {'.'.join(map(str, first['loc']))}: {first['msg']}",
                )
            ]
        ) from exc
    return spec.model_copy(
        update={"rehearsal": spec.rehearsal.model_copy(update={"profile": profile})}
    )


def line_of(data: Any, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest node on `loc` that exists in the YAML."""
    node, line = data, None
    for part in loc:
        lc = getattr(node, "lc", None)  # ruamel's line/column info on its containers
        try:
            if isinstance(node, dict) and part in node:
                line = lc.key(part)[0] + 1 if lc is not None else line
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                line = lc.item(part)[0] + 1 if lc is not None else line
            else:
                return line
        except (AttributeError, KeyError, TypeError):
            pass
        node = node[part]
    return line


_MARKER = re.compile(
    r"^(function-\w+|union_tag|is-instance|list\[|dict\[|tuple\[|[A-Z]\w*Spec$|"
    r"Profile$|str$|int$|float$|bool$|none$)"
)


def _issues(exc: ValidationError, data: Any, where: str) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    seen: set[tuple[int | None, str, str]] = set()
    for err in exc.errors(include_url=False):
        loc = data_loc(err["loc"], data)
        if loc == ("rehearsal", "profile") and err["type"] == "string_type":
            continue  # the other branch of `Profile | str`; its model errors are reported
        key = ".".join(str(p) for p in loc)
        line = line_of(data, loc)
        message = message_for(err, loc, data)
        ident = (line, key, message)
        if ident not in seen:
            seen.add(ident)
            issues.append(SpecIssue(where, line, key, message))
    return issues


def data_loc(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Turn a pydantic error location into the path of keys the user wrote in the YAML:
    drop union/validator markers, the implicit list of a single `model:`/`hardware:` mapping,
    the implicit `flags` of an arm written as plain flags, and map sweep.server.<flag> back
    to a dotted `server.<flag>` key when the user wrote it that way."""
    out: list[Any] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
            continue
        if isinstance(part, str) and _MARKER.match(part):
            continue
        if isinstance(node, dict) and part == 0 and out and out[-1] in ("model", "hardware"):
            continue
        if isinstance(node, dict) and part == "flags" and len(out) == 2 and out[0] == "arms":
            continue
        if out == ["metrics"] and isinstance(node, dict) and part == "options":
            continue  # `metrics: {p99_ttft_ms: {margin: 10%}}`: options written as keys
        listed = node.get("secondary") if out == ["metrics"] and isinstance(node, dict) else None
        if isinstance(listed, dict) and part in listed:
            out += ["secondary", part]  # `secondary: {p99_ttft_ms: {margin: 10%}}`
            node = listed[part]
            continue
        if (
            out == ["sweep", "server"]
            and isinstance(data.get("sweep"), dict)
            and f"server.{part}" in data["sweep"]
        ):
            out = ["sweep", f"server.{part}"]
            node = data["sweep"][out[-1]]
            continue
        out.append(part)
        if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)

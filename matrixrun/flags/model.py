"""What an engine's command line accepts: one `Flag` per argparse option, a `FlagSet` per engine
build, and the JSON form shipped in `matrixrun/flags/data/`.

A flag list is deliberately small: the option strings, whether it takes a value (none, one,
several, optional), the value type and choices where the engine declares them (and whether it
matches them ignoring case), whether argparse
also accepts `--no-<name>`, and a deprecation note. Anything the source does not declare plainly
(a custom parser, a plugin-extended choice list) is recorded as unknown (`None`/`any`), so the
check stays silent there rather than rejecting a value the engine would take.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

#: none: a switch (store_true, BooleanOptionalAction); one: exactly one value; many: nargs +/*;
#: optional: nargs ?; any: not known (a custom action), nothing is checked about values.
Takes = Literal["none", "one", "many", "optional", "any"]
#: human_int: vLLM's `human_readable_int` (an integer, or a number with one of k/m/g/t
#: (decimal) or K/M/G/T (binary) after it: `8192`, `8k`, `25.6k`, `2K`).
ValueType = Literal["int", "float", "str", "json", "human_int"]

FORMAT = 1


@dataclass(frozen=True)
class Flag:
    """One option. `names[0]` is the canonical spelling; the rest are aliases."""

    names: tuple[str, ...]
    takes: Takes = "one"
    type: ValueType | None = None
    choices: tuple[str, ...] | None = None
    negatable: bool = False  # argparse.BooleanOptionalAction: `--no-<name>` exists too
    deprecated: str | None = None  # what the engine says instead (the new name, if any)
    fatal: bool = False  # the deprecated flag stops the launch rather than warning
    #: The engine matches the value against `choices` ignoring case (vLLM's enum-typed flags:
    #: `AttentionBackendEnum[value.upper()]`).
    fold_case: bool = False

    @property
    def name(self) -> str:
        return self.names[0]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"names": list(self.names)}
        if self.takes != "one":
            out["takes"] = self.takes
        if self.type is not None:
            out["type"] = self.type
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.negatable:
            out["negatable"] = True
        if self.deprecated is not None:
            out["deprecated"] = self.deprecated
        if self.fatal:
            out["fatal"] = True
        if self.fold_case:
            out["fold_case"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Flag:
        choices = data.get("choices")
        return cls(
            names=tuple(data["names"]),
            takes=data.get("takes", "one"),
            type=data.get("type"),
            choices=tuple(str(c) for c in choices) if choices is not None else None,
            negatable=bool(data.get("negatable", False)),
            deprecated=data.get("deprecated"),
            fatal=bool(data.get("fatal", False)),
            fold_case=bool(data.get("fold_case", False)),
        )


@dataclass
class FlagSet:
    """Every option of one engine build, and where the list came from (shown to the user)."""

    engine: str
    version: str | None
    origin: str
    flags: list[Flag]
    _index: dict[str, Flag] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for flag in self.flags:
            for name in flag.names:
                self._index.setdefault(name, flag)
        for flag in self.flags:
            if flag.negatable:
                for name in flag.names:
                    self._index.setdefault("--no-" + name.removeprefix("--"), flag)

    def lookup(self, option: str) -> Flag | None:
        """The flag an option string names (`--no-x` resolves to a negatable `--x`)."""
        return self._index.get(option)

    def is_negative(self, option: str) -> bool:
        flag = self._index.get(option)
        return flag is not None and option not in flag.names

    def names(self) -> list[str]:
        """Every option string that is accepted, for did-you-mean."""
        return sorted(self._index)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}" if self.version else self.engine

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "engine": self.engine,
            "version": self.version,
            "origin": self.origin,
            "flags": [f.to_json() for f in sorted(self.flags, key=lambda f: f.name)],
        }

    def dump(self, path: Path) -> None:
        """One flag per line, so a new release's list diffs line by line in review."""
        data = self.to_json()
        head = {k: v for k, v in data.items() if k != "flags"}
        lines = [json.dumps(f, ensure_ascii=False) for f in data["flags"]]
        text = json.dumps(head, ensure_ascii=False)[:-1] + ', "flags": [\n'
        path.write_text(text + ",\n".join(lines) + "\n]}\n")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FlagSet:
        if data.get("format") != FORMAT:
            raise ValueError(f"flag list format {data.get('format')!r}, expected {FORMAT}")
        return cls(
            engine=str(data["engine"]),
            version=data.get("version"),
            origin=str(data.get("origin", "")),
            flags=[Flag.from_json(f) for f in data["flags"]],
        )

    @classmethod
    def load(cls, path: Path) -> FlagSet:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

"""The recipes: which files of a release declare its command line, and how their flags are
merged into one `FlagSet` per engine version (the shapes themselves are read in `extract.py`).
`scripts/flag_lists.py` calls these with a downloaded wheel's files."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import replace

from matrixrun.flags.extract import (
    Sources,
    add_argument_flags,
    dotted,
    enum_members,
    function,
    replacement,
    set_literal,
    sglang_field_flags,
    special_cased,
    vllm_field_flag,
)
from matrixrun.flags.model import Flag, FlagSet


def sglang_flags(files: Mapping[str, str], version: str, origin: str) -> FlagSet:
    """SGLang's `launch_server` options from `srt/server_args.py` and `srt/arg_groups/`.

    `files` maps paths inside the package (`sglang/srt/server_args.py`, ...) to their text.
    """
    src = Sources.parse(files)
    flags: list[Flag] = []
    for path, tree in src.trees.items():
        if "/arg_groups/fields/" in path or path.endswith("server_args.py"):
            flags += sglang_field_flags(src, tree)
    server_args = next(t for p, t in src.trees.items() if p.endswith("srt/server_args.py"))
    add_cli = function(server_args, "add_cli_args") or server_args
    flags += add_argument_flags(src, add_cli)
    return FlagSet("sglang", version, origin, _merge(flags, src.deprecations))


def vllm_flags(files: Mapping[str, str], version: str, origin: str) -> FlagSet:
    """`vllm serve`'s options: `engine/arg_utils.py` (EngineArgs and AsyncEngineArgs), the
    frontend classes of `entrypoints/` and the config dataclasses of `config/`."""
    src = Sources.parse(files)
    arg_utils = next(t for p, t in src.trees.items() if p.endswith("engine/arg_utils.py"))
    human = set_literal(arg_utils, "human_readable_int_args")
    special = special_cased(arg_utils) - human
    spread: dict[str, dict[str, Flag]] = {}
    for node in ast.walk(arg_utils):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and dotted(node.value.func) == "get_kwargs"
            and node.value.args
        ):
            cls = dotted(node.value.args[0]).split(".")[-1]
            fields = src.fields_of(cls)
            made = {f: vllm_field_flag(src, f, tp) for f, tp in fields.items()}
            spread[node.targets[0].id] = {
                f: _vllm_value_rule(src, cls, f, fields[f], flag, human, special)
                for f, flag in made.items()
            }
    flags: list[Flag] = []
    for path, tree in src.trees.items():
        if path.endswith("engine/arg_utils.py"):
            flags += add_argument_flags(src, tree, spread)
        elif path.endswith(("cli_args.py", "cli/serve.py")):
            make = function(tree, "make_arg_parser")
            if make is not None:
                flags += add_argument_flags(src, make)
    for cls_name in ("FrontendArgs",):  # registers every field in a loop (add_cli_args)
        if cls_name not in src.classes:
            continue
        touched = _customised_fields(src, cls_name)
        for f, tp in src.fields_of(cls_name).items():
            flags.append(vllm_field_flag(src, f, tp, lenient=f in touched))
    return FlagSet("vllm", version, origin, _merge(flags, src.deprecations))


def _vllm_value_rule(
    src: Sources,
    cls: str,
    name: str,
    tp: ast.expr,
    flag: Flag,
    human: set[str],
    special: set[str],
) -> Flag:
    """What `_compute_kwargs` and the config's validators make of a field's value: vLLM's
    human-readable ints (`8k`), its own parsers (left unchecked), and an enum-typed field that
    argparse reads as a plain string but the config resolves with `Enum[value.upper()]` (its
    members are the choices, any case; "auto" too where the validator takes it)."""
    if name in human and flag.type == "int":
        return replace(flag, type="human_int")
    if name in special:
        return replace(flag, type=None)
    members = enum_members(tp, src)
    validator = _before_validator(src, cls, name)
    if members and validator is not None and ".upper()" in validator:
        extra = ("auto",) if "'auto'" in validator or '"auto"' in validator else ()
        return replace(flag, type="str", choices=(*extra, *members), fold_case=True)
    return flag


def _before_validator(src: Sources, cls: str, field_name: str) -> str | None:
    """The source of `cls`'s `@field_validator(field_name, mode="before")`, if any."""
    node = src.classes.get(cls)
    for item in node.body if node is not None else ():
        if not isinstance(item, ast.FunctionDef):
            continue
        for deco in item.decorator_list:
            if (
                isinstance(deco, ast.Call)
                and dotted(deco.func).endswith("field_validator")
                and any(isinstance(a, ast.Constant) and a.value == field_name for a in deco.args)
                and any(
                    k.arg == "mode"
                    and isinstance(k.value, ast.Constant)
                    and k.value.value == "before"
                    for k in deco.keywords
                )
            ):
                return ast.unparse(item)
    return None


def _customised_fields(src: Sources, cls_name: str) -> set[str]:
    """Fields whose kwargs a `_customize_cli_kwargs` rewrites (type/action changed there):
    listed leniently, since the rewrite is code."""
    out: set[str] = set()
    seen: set[str] = set()
    todo = [cls_name]
    while todo:
        name = todo.pop()
        node = src.classes.get(name)
        if node is None or name in seen:
            continue
        seen.add(name)
        todo += [dotted(b).split(".")[-1] for b in node.bases]
        fn = function(node, "_customize_cli_kwargs")
        if fn is None:
            continue
        for sub in ast.walk(fn):
            if (
                isinstance(sub, ast.Subscript)
                and isinstance(sub.slice, ast.Constant)
                and isinstance(sub.slice.value, str)
                and isinstance(sub.value, ast.Name)
            ):
                out.add(sub.slice.value)
    return out


def _merge(flags: Iterable[Flag], deprecations: Mapping[str, str]) -> list[Flag]:
    """One entry per canonical name; the later registration wins (argparse would refuse a
    duplicate, so a duplicate here is a field that a manual registration replaces)."""
    by_name: dict[str, Flag] = {}
    for flag in flags:
        by_name[flag.name] = flag
    taken: dict[str, str] = {}
    out: list[Flag] = []
    for flag in by_name.values():
        names = tuple(n for n in flag.names if n not in taken or taken[n] == flag.name)
        if not names:
            continue
        for n in names:
            taken[n] = flag.name
        note = flag.deprecated
        if note in (None, "deprecated"):  # a module's warning text says more, if it has one
            for n in names:
                if n in deprecations:
                    text = deprecations[n]
                    note = replacement(text) or text
        out.append(replace(flag, names=names, deprecated=note))
    return out

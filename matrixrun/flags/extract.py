"""Flag lists from an engine's released source files, read with `ast` and never imported.

Importing SGLang or vLLM needs torch, CUDA libraries and minutes; reading their argument
declarations needs only the text. Each engine declares its command line in a few recognisable
shapes, and this module knows those shapes (they were read from the released sources; nothing of
them is executed):

* `parser.add_argument("--x", "--alias", type=int, choices=[...], action=..., nargs=...)`:
  literal option strings and keywords; `choices=NAME` resolves module-level list constants
  (and `["a"] + NAME` concatenations); a `Deprecated...Action` or a help text starting with
  "Deprecated" marks the flag deprecated, with its `new_flag=`; `error_message=` makes it fatal.
* SGLang >= 0.5.2x: namespace classes in `srt/arg_groups/fields/` whose fields are
  `name: A[T, "help"]` or `A[T, Arg(choices=..., aliases=[...], cli_name=..., nargs=...,
  action=..., type_parser=..., no_cli=...)]`; each becomes `--name` by the rules of
  `arg_utils.add_cli_args_from_dataclass` (Literal -> choices, list -> nargs +, bool ->
  store_true, a custom type parser -> type unknown).
* vLLM: `group.add_argument("--x", **model_kwargs["field"])` where `model_kwargs =
  get_kwargs(ModelConfig)`; the field's annotation in `vllm/config/` decides the kind as
  `engine/arg_utils._compute_kwargs` does (bool -> `--x/--no-x`, Literal -> choices, collections
  -> nargs +, a config dataclass -> JSON). Frontend classes register every field in a loop.

When a shape is not recognised, the flag is still listed (its name is what matters most) with
its value unchecked (`takes="any"`), so a new construct in a release makes the list more lenient,
never wrong in the strict direction. `scripts/flag_lists.py` feeds this module the files of a
wheel downloaded from PyPI.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from matrixrun.flags.model import Flag, Takes, ValueType

_SCALARS: dict[str, ValueType] = {"int": "int", "float": "float", "str": "str"}
_SWITCH_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version"}
_DEPRECATION = re.compile(r"(--[a-z0-9][a-z0-9-]*)\s+is deprecated", re.IGNORECASE)
_USE_INSTEAD = re.compile(r"[Uu]se\s+[`'\"]?(--[a-z0-9][\w{},.<>=-]*)")


@dataclass
class Sources:
    """Parsed modules of one release: dotted-ish file name -> tree, plus what they define."""

    trees: dict[str, ast.Module]
    constants: dict[str, list[str]] = field(default_factory=dict)
    aliases: dict[str, ast.expr] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    dataclasses: set[str] = field(default_factory=set)
    deprecations: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, files: Mapping[str, str]) -> Sources:
        trees = {name: ast.parse(text, filename=name) for name, text in files.items()}
        self = cls(trees)
        for tree in trees.values():
            self._scan_module(tree)
        return self

    def _scan_module(self, tree: ast.Module) -> None:
        for node in tree.body:
            target: str | None = None
            value: ast.expr | None = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                if isinstance(node.targets[0], ast.Name):
                    target, value = node.targets[0].id, node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                target, value = node.target.id, node.value
            if target is not None and value is not None:
                strings = self.strings(value)
                if strings is not None:
                    self.constants.setdefault(target, strings)
                elif _looks_like_type(value):
                    self.aliases.setdefault(target, value)
                text = _const_str(value)
                if text:
                    for m in _DEPRECATION.finditer(text):
                        self.deprecations.setdefault(m.group(1), " ".join(text.split()))
            if isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, node)
                decorators = {
                    dotted(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list
                }
                if decorators & {"config", "dataclass", "dataclasses.dataclass"}:
                    self.dataclasses.add(node.name)

    def strings(self, node: ast.expr) -> list[str] | None:
        """A list of strings the expression certainly evaluates to, or None."""
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            out: list[str] = []
            for elt in node.elts:
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str | int | float):
                    out.append(str(elt.value))
                elif isinstance(elt, ast.Starred):
                    inner = self.strings(elt.value)
                    if inner is None:
                        return None
                    out += inner
                else:
                    return None
            return out
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.strings(node.left), self.strings(node.right)
            return left + right if left is not None and right is not None else None
        if isinstance(node, ast.Call) and dotted(node.func) in ("list", "set", "sorted", "tuple"):
            return self.strings(node.args[0]) if len(node.args) == 1 else None
        return None

    def fields_of(self, name: str, seen: frozenset[str] = frozenset()) -> dict[str, ast.expr]:
        """Annotated fields of a class and its bases (bases first, as dataclasses order them)."""
        node = self.classes.get(name)
        if node is None or name in seen:
            return {}
        out: dict[str, ast.expr] = {}
        for base in node.bases:
            out.update(self.fields_of(dotted(base).split(".")[-1], seen | {name}))
        for stmt in node.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and not dotted(stmt.annotation).endswith("ClassVar")
                and not (
                    isinstance(stmt.annotation, ast.Subscript)
                    and dotted(stmt.annotation.value).endswith("ClassVar")
                )
            ):
                out[stmt.target.id] = stmt.annotation
        return out


@dataclass
class TypeInfo:
    """What an annotation allows, flattened over unions, Optional and aliases."""

    kinds: set[str] = field(default_factory=set)  # int float str bool dict list dataclass other
    literals: list[str] | None = None
    literal_kinds: set[str] = field(default_factory=set)  # types of the Literal values
    item: TypeInfo | None = None  # element type of a list/tuple/set


def type_info(node: ast.expr | None, src: Sources, depth: int = 0) -> TypeInfo:
    info = TypeInfo()
    _collect(node, src, info, depth)
    return info


def _collect(node: ast.expr | None, src: Sources, info: TypeInfo, depth: int) -> None:
    if node is None or depth > 12:
        info.kinds.add("other")
        return
    if isinstance(node, ast.Constant):
        if node.value is None:
            info.kinds.add("none")
        elif isinstance(node.value, str):  # a string annotation
            try:
                _collect(ast.parse(node.value, mode="eval").body, src, info, depth + 1)
            except SyntaxError:
                info.kinds.add("other")
        else:
            info.kinds.add("other")
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _collect(node.left, src, info, depth + 1)
        _collect(node.right, src, info, depth + 1)
        return
    if isinstance(node, ast.Subscript):
        head = dotted(node.value).split(".")[-1]
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head in ("Annotated", "A"):
            _collect(args[0], src, info, depth + 1)
        elif head in ("Optional",):
            info.kinds.add("none")
            _collect(args[0], src, info, depth + 1)
        elif head == "Union":
            for arg in args:
                _collect(arg, src, info, depth + 1)
        elif head == "Literal":
            values = [a.value for a in args if isinstance(a, ast.Constant)]
            info.literals = (info.literals or []) + [str(v) for v in values]
            for v in values:
                if v is None:
                    info.kinds.add("none")
                else:
                    info.literal_kinds.add("bool" if isinstance(v, bool) else type(v).__name__)
        elif head.lower() in ("list", "tuple", "set", "sequence", "frozenset"):
            info.kinds.add("list")
            item = TypeInfo()
            _collect(args[0], src, item, depth + 1)
            info.item = item
        elif head.lower() in ("dict", "mapping"):
            info.kinds.add("dict")
        elif head == "type":
            info.kinds.add("other")
        else:
            _collect(node.value, src, info, depth + 1)
        return
    name = dotted(node).split(".")[-1]
    if name in ("int", "float", "str", "bool"):
        info.kinds.add(name)
    elif name in ("dict", "Dict"):
        info.kinds.add("dict")
    elif name in ("list", "List"):
        info.kinds.add("list")
    elif name == "None":
        info.kinds.add("none")
    elif name in src.aliases:
        _collect(src.aliases[name], src, info, depth + 1)
    elif name in src.dataclasses:
        info.kinds.add("dataclass")
    else:
        info.kinds.add("other")


def _scalar(info: TypeInfo | None) -> ValueType | None:
    if info is None:
        return None
    kinds = info.kinds - {"none"}
    if len(kinds) == 1:
        return _SCALARS.get(next(iter(kinds)))
    return None


# ------------------------------------------------------------------------------ add_argument


def add_argument_flags(
    src: Sources,
    tree: ast.AST,
    spread: Mapping[str, Mapping[str, Flag]] | None = None,
) -> list[Flag]:
    """Every `*.add_argument("--x", ...)` call in `tree` with literal option strings.

    `spread` resolves `**kwargs_var["field"]` (vLLM): variable -> field -> the flag its type
    implies (names are filled in from the call).
    """
    out: list[Flag] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        names = [
            a.value
            for a in node.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
        ]
        if not names or any(not isinstance(a, ast.Constant | ast.Starred) for a in node.args):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args):
            continue  # `*extra_flags`: handled by the caller's loop recipe
        base = Flag(names=(), takes="one")
        kw: dict[str, ast.expr] = {}
        for k in node.keywords:
            if k.arg is None and isinstance(k.value, ast.Dict):  # **{**kw["f"], "default": x}
                for key, val in zip(k.value.keys, k.value.values, strict=True):
                    if key is None:
                        base = _spread(val, spread) or Flag(names=(), takes="any")
                    elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                        kw[key.value] = val
            elif k.arg is None:  # **kwargs
                base = _spread(k.value, spread) or Flag(names=(), takes="any")
            else:
                kw[k.arg] = k.value
        out.append(_apply_keywords(src, base, tuple(names), kw))
    return out


def _spread(node: ast.expr, spread: Mapping[str, Mapping[str, Flag]] | None) -> Flag | None:
    if spread is None or not isinstance(node, ast.Subscript):
        return None
    var = dotted(node.value)
    key = node.slice
    if isinstance(key, ast.Constant) and isinstance(key.value, str) and var in spread:
        found = spread[var].get(key.value)
        return replace(found, names=()) if found is not None else None  # the call names it
    return None


def _apply_keywords(
    src: Sources, base: Flag, names: tuple[str, ...], kw: dict[str, ast.expr]
) -> Flag:
    takes: Takes = base.takes
    vtype = base.type
    choices = base.choices
    negatable = base.negatable
    deprecated = base.deprecated
    fatal = False
    if "type" in kw:
        vtype = _SCALARS.get(dotted(kw["type"]))
        if dotted(kw["type"]) in ("json.loads",):
            vtype = "json"
    if "choices" in kw:
        found = src.strings(kw["choices"])
        choices = tuple(found) if found is not None else None
    action = kw.get("action")
    if action is not None:
        a_name = _const_str(action) or dotted(action)
        short = a_name.split(".")[-1]
        if short == "BooleanOptionalAction":
            takes, negatable, vtype, choices = "none", True, None, None
        elif a_name in _SWITCH_ACTIONS:
            takes, vtype, choices = "none", None, None
        elif a_name in ("append", "extend"):
            takes = "one"
        elif "Deprecated" in short:
            takes = "none" if short in ("DeprecatedStoreTrueAction", "DeprecatedAction") else takes
            if short == "DeprecatedStoreConstAction":
                takes = "one" if "nargs" in kw and _const(kw["nargs"]) is None else "none"
            new = _const_str(kw["new_flag"]) if "new_flag" in kw else None
            message = _const_str(kw["error_message"]) if "error_message" in kw else None
            fatal = message is not None
            deprecated = f"use {new} instead" if new else message or _help_text(kw) or "deprecated"
        else:
            takes, vtype, choices = "any", None, None
    if "nargs" in kw and takes not in ("none", "any"):
        nargs = _const(kw["nargs"])
        takes = (
            "many"
            if nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1)
            else "optional"
            if nargs == "?"
            else takes
        )
    if _const(kw.get("deprecated")) is True:
        deprecated = deprecated or _help_text(kw) or "deprecated"
    text = _help_text(kw)
    if deprecated is None and text and re.match(r"\W*deprecated", text, re.IGNORECASE):
        deprecated = replacement(text) or " ".join(text.split())
    return Flag(
        names=names + tuple(n for n in base.names if n not in names),
        takes=takes,
        type=vtype if takes not in ("none", "any") else None,
        choices=choices if takes not in ("none", "any") else None,
        negatable=negatable,
        deprecated=deprecated,
        fatal=fatal,
        fold_case=base.fold_case and choices is base.choices and takes not in ("none", "any"),
    )


def replacement(text: str) -> str | None:
    m = _USE_INSTEAD.search(text)
    return f"use {m.group(1).rstrip('.,')} instead" if m else None


def _help_text(kw: Mapping[str, ast.expr]) -> str | None:
    node = kw.get("help")
    if node is None:
        return None
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    return _const_str(node)


# ----------------------------------------------------------------------------- SGLang fields


def sglang_field_flags(src: Sources, module: ast.Module) -> list[Flag]:
    """Fields written `name: A[T, "help"]` / `A[T, Arg(...)]` in every class of `module`."""
    out: list[Flag] = []
    for cls in (n for n in module.body if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            ann = stmt.annotation
            if not (isinstance(ann, ast.Subscript) and dotted(ann.value) in ("A", "Annotated")):
                continue
            parts = list(ann.slice.elts) if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            meta: dict[str, ast.expr] | None = None
            for p in parts[1:]:
                if isinstance(p, ast.Constant) and isinstance(p.value, str):
                    meta = {"help": p}
                    break
                if isinstance(p, ast.Call) and dotted(p.func).split(".")[-1] == "Arg":
                    meta = {k.arg: k.value for k in p.keywords if k.arg is not None}
                    break
            if meta is None or _const(meta.get("no_cli")) is True:
                continue
            out.append(_sglang_field(src, stmt.target.id, parts[0], meta))
    return out


def _sglang_field(src: Sources, name: str, tp: ast.expr, meta: dict[str, ast.expr]) -> Flag:
    cli = _const_str(meta["cli_name"]) if "cli_name" in meta else None
    aliases = src.strings(meta["aliases"]) if "aliases" in meta else None
    names = (cli or "--" + name.replace("_", "-"), *(aliases or []))
    info = type_info(tp, src)
    choices = src.strings(meta["choices"]) if "choices" in meta else None
    custom = "type_parser" in meta and not (
        isinstance(meta["type_parser"], ast.Constant) and meta["type_parser"].value is None
    )
    if "action" in meta:
        flag = _apply_keywords(src, Flag(names=()), names, {"action": meta["action"], **meta})
        return flag
    if info.literals is not None and not info.kinds - {"none"}:  # (Optional) Literal only
        vtype: ValueType | None = None if custom else _literal_type(info)
        return Flag(names, "one", vtype, tuple(choices or info.literals))
    if "list" in info.kinds and not custom:
        nargs = _const(meta["nargs"]) if "nargs" in meta else "+"
        takes: Takes = "optional" if nargs == "?" else "many"
        return Flag(names, takes, _scalar(info.item), tuple(choices) if choices else None)
    if info.kinds - {"none"} == {"bool"}:
        return Flag(names, "none")
    nargs = _const(meta["nargs"]) if "nargs" in meta else None
    takes = "many" if nargs in ("+", "*") else "optional" if nargs == "?" else "one"
    if "list" in info.kinds or "dict" in info.kinds:
        return Flag(names, takes, None, None)
    return Flag(
        names, takes, None if custom else _scalar(info), tuple(choices) if choices else None
    )


def _literal_type(info: TypeInfo) -> ValueType | None:
    kinds = info.literal_kinds
    if kinds == {"int"}:
        return "int"
    if kinds == {"float"}:
        return "float"
    return "str" if kinds == {"str"} else None


# ---------------------------------------------------------------------------------- vLLM


def vllm_field_flag(src: Sources, name: str, tp: ast.expr, lenient: bool = False) -> Flag:
    """The flag `get_kwargs` makes of a config field, by `_compute_kwargs`'s rules."""
    names = ("--" + name.replace("_", "-"),)
    if lenient:
        return Flag(names, "any")
    info = type_info(tp, src)
    kinds = info.kinds
    if "dataclass" in kinds:
        return Flag(names, "one", "json")
    if kinds == {"bool", "str", "none"}:
        return Flag(names, "optional", "str")
    if "bool" in kinds:
        return Flag(names, "none", negatable=True)
    if info.literals is not None and not kinds - {"none", "str"}:
        # `Literal[...] | str` gets the values as a metavar, not choices (literal_to_kwargs).
        if "str" in kinds:
            return Flag(names, "one", "str")
        return Flag(names, "one", _literal_type(info), tuple(info.literals))
    if "list" in kinds:
        item = info.item
        choices = tuple(item.literals) if item is not None and item.literals else None
        return Flag(names, "many", _scalar(item), choices)
    if kinds - {"none"} == {"int"}:
        return Flag(names, "one", "int")
    if kinds - {"none"} == {"float"}:
        return Flag(names, "one", "float")
    if kinds - {"none"} == {"str"}:
        return Flag(names, "one", "str")
    if "dict" in kinds:
        return Flag(names, "one", None)
    return Flag(names, "one", None)


def enum_members(tp: ast.expr, src: Sources) -> tuple[str, ...] | None:
    """The member names of the one Enum class an annotation names (`E`, `E | None`), when that
    class is among the parsed sources; None otherwise."""
    names: list[str] = []

    def walk(node: ast.expr) -> None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            walk(node.left)
            walk(node.right)
        elif isinstance(node, ast.Name | ast.Attribute):
            names.append(dotted(node).split(".")[-1])
        elif isinstance(node, ast.Subscript) and dotted(node.value).endswith("Optional"):
            walk(node.slice)

    walk(tp)
    if len(names) != 1 or names[0] not in src.classes:
        return None
    node = src.classes[names[0]]
    if not any(dotted(b).split(".")[-1].endswith("Enum") for b in node.bases):
        return None
    members = [
        t.id
        for item in node.body
        if isinstance(item, ast.Assign)
        for t in item.targets
        if isinstance(t, ast.Name) and t.id.isupper()
    ]
    return tuple(members) or None


# ---------------------------------------------------------------------------------- helpers


def function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def special_cased(tree: ast.AST) -> set[str]:
    """Fields `_compute_kwargs` gives their own parser (`if name == "max_model_len": ...`):
    their values are not plain ints, so their type is left unchecked."""
    fn = function(tree, "_compute_kwargs")
    out: set[str] = set()
    for node in ast.walk(fn) if fn is not None else ():
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id == "name"
            and isinstance(node.ops[0], ast.Eq)
            and isinstance(node.comparators[0], ast.Constant)
            and isinstance(node.comparators[0].value, str)
        ):
            out.add(node.comparators[0].value)
    return out


def set_literal(tree: ast.AST, name: str) -> set[str]:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
            and isinstance(node.value, ast.Set | ast.List | ast.Tuple)
        ):
            return {
                e.value
                for e in node.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    return set()


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return dotted(node.func)
    return ""


def _const(node: ast.expr | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _const_str(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _const_str(node.left), _const_str(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _looks_like_type(node: ast.expr) -> bool:
    if isinstance(node, ast.Subscript):
        return dotted(node.value).split(".")[-1] in (
            "Literal",
            "Optional",
            "Union",
            "Annotated",
            "list",
            "List",
            "dict",
            "Dict",
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = (node.left, node.right)
        return all(
            isinstance(s, ast.Name | ast.Attribute | ast.Subscript | ast.BinOp)
            or (isinstance(s, ast.Constant) and s.value is None)
            for s in sides
        )
    return False

"""Pydantic's validation errors as sentences a spec author can act on: an unknown key names
the keys allowed there and the nearest one; a bad choice names the choices. Pure."""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel

from matrixrun.spec.models import ArmSpec, Spec, SweepSpec


def message_for(err: Any, loc: tuple[Any, ...], data: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = allowed_keys(loc[:-1])
        hint = did_you_mean(str(loc[-1]), allowed)
        where = ".".join(map(str, loc[:-1])) or "the top level"
        extra = ""
        if loc[:1] == ("sweep",) and not hint:
            extra = "; a server flag to sweep is written server.<flag>"
        if loc[:1] == ("engine",) and loc[-1] not in allowed and not hint:
            extra = "; a server flag common to all arms goes under engine.args"
        return f"unknown key{hint or ''}; keys allowed in {where}: {', '.join(allowed)}{extra}"
    if kind == "too_short" and loc == ("arms",):
        return "needs a baseline and at least one candidate arm"
    if kind == "list_type":
        return f"expected a list of values, e.g. [{err.get('input')!r}], got {err.get('input')!r}"
    if kind == "missing":
        return "required key is missing; add it"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        hint = did_you_mean(str(err.get("input")), re.findall(r"'([^']+)'", expected))
        return f"{err['input']!r} is not allowed{hint}; expected {expected}"
    msg = str(err["msg"])
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return msg[0].lower() + msg[1:] if msg else msg


def did_you_mean(word: str, choices: list[str]) -> str:
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names allowed at `loc`, found by walking the model classes along the path."""
    cls: Any = Spec
    for part in loc:
        model = _model_in(cls)
        if model is None:
            if isinstance(part, int | str):  # inside a list / dict: step into the item type
                cls = _item_type(cls)
                continue
            return []
        if part == "server" and model is SweepSpec:
            return []
        field = model.model_fields.get(str(part))
        if field is None:
            if model is ArmSpec:  # arm shorthand: the loc names a flag
                return []
            return []
        cls = field.annotation
    model = _model_in(cls)
    if model is None:
        item = _item_type(cls)
        model = _model_in(item)
    return sorted(model.model_fields) if model is not None else []


def _model_in(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType, Annotated):
        for arg in typing.get_args(tp):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _item_type(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(tp):
            if typing.get_origin(arg) in (list, dict):
                return _item_type(arg)
        return None
    if origin is list:
        return typing.get_args(tp)[0]
    if origin is dict:
        return typing.get_args(tp)[1]
    return None

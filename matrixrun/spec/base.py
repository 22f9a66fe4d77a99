"""What every spec model shares: unknown keys are errors, and the type of a server flag's
value. A module of its own so that `models` and `engine` build on it without one reaching
into the other's private names."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

#: A server flag's value as a spec writes it (`engines.command` renders it to argv).
FlagValue = str | int | float | bool | None | list[Any] | dict[str, Any]


class StrictModel(BaseModel):
    """A spec model: `extra="forbid"`, so a misspelt key is an error with a did-you-mean
    (`loader`), never a silently ignored setting or a new sweep axis."""

    model_config = ConfigDict(extra="forbid")

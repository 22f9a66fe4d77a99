"""Engines: how to start a serving engine's server, know it is ready, read what it runs, and
which request API to speak. One small module per engine; `for_spec` picks one."""

from __future__ import annotations

from matrixrun.engines.base import Engine


def for_spec(kind: str) -> Engine:
    """The engine for `engine.kind` in a spec (rehearsals wrap it: see engines/sim.py)."""
    if kind in ("sglang", "sim"):
        from matrixrun.engines.sglang import SGLangEngine

        return SGLangEngine()
    raise KeyError(kind)

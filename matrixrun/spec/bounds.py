"""Bounds on a spec, so that validate refuses what the run could not survive.

A spec is reviewed like code but written by hand (or generated), and some inputs that are
valid YAML and pass the field types would still take a run down: YAML aliases that expand
exponentially (an "alias bomb" runs for minutes or exhausts memory while being read), nesting
deep enough to overflow the parser's recursion, a sweep whose cross product has millions of
cells, numbers whose prompts would need petabytes, a lone surrogate in a string (no file can
hold it: the report write fails after every measurement), percentages outside the range the
analysis accepts (they used to fail only in `settings_for`, after the plan was printed), a
`base_url` that is not a URL, an `exclude` that leaves nothing to run.

Two passes: `plain` (before the models: size, depth, text) replaces the loader's plain copy of
the YAML tree, and `bound_issues` (after: sizes against the plan) is another list of
`(yaml path, message)` pairs like `checks.semantic_issues`. The limits are far above any real
experiment and far below what breaks the machine; each message says which limit and why.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from matrixrun.core.errors import SpecError, SpecIssue
from matrixrun.spec.models import CLIENT_AXES, Spec
from matrixrun.spec.points import combinations

#: Values (mappings, lists, scalars) a spec may expand to, aliases counted every time used.
MAX_NODES = 50_000
#: Nesting of mappings and lists (a real spec nests about 6 deep).
MAX_DEPTH = 40
#: Cells of the whole matrix (arms x slices x sweep points), before include/exclude.
MAX_CELLS = 10_000
#: Concurrent requests of one cell (each is an open connection and a task in the client).
MAX_CONCURRENCY = 100_000
#: Prompts of one cell.
MAX_PROMPTS = 1_000_000
#: Tokens of one prompt or one output (ten times the longest context windows of 2025).
MAX_LEN = 10_000_000
#: Prompt tokens one cell holds in memory at once (num_prompts x input_len): about 3 GB of
#: Python ints; the 10^15-token prompt that once reached the client asked for 1.8 PiB.
MAX_CELL_TOKENS = 100_000_000


class _Budget:
    def __init__(self, where: str) -> None:
        self.where = where
        self.nodes = 0

    def fail(self, line: int | None, message: str) -> SpecError:
        return SpecError([SpecIssue(self.where, line, "", message)])


def _line(node: Any, key: Any = None) -> int | None:
    """1-based line of a ruamel container (or of its entry `key`), if it knows it."""
    lc: Any = getattr(node, "lc", None)
    if lc is None:
        return None
    try:
        if key is None:
            return int(lc.line) + 1
        at = lc.key(key) if isinstance(node, dict) else lc.item(key)
        return int(at[0]) + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return None


def plain(
    node: Any, where: str, depth: int = 0, budget: _Budget | None = None, line: int | None = None
) -> Any:
    """ruamel round-trip containers -> plain dict/list (keeping order), refusing a tree that
    expands past MAX_NODES values or nests past MAX_DEPTH, and text no file can hold."""
    budget = budget or _Budget(where)
    budget.nodes += 1
    line = _line(node) or line
    if budget.nodes > MAX_NODES:
        raise budget.fail(
            line,
            f"the YAML expands to more than {MAX_NODES} values (aliases `*name` are "
            "expanded every time they are used); write the values out or use fewer aliases",
        )
    if depth > MAX_DEPTH:
        raise budget.fail(
            line, f"nested more than {MAX_DEPTH} levels deep; a spec nests about 6 deep"
        )
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            at = _line(node, k) or line
            key = _text(k, at, budget) if isinstance(k, str) else str(k)
            out[key] = plain(v, where, depth + 1, budget, at)
        return out
    if isinstance(node, list):
        return [
            plain(v, where, depth + 1, budget, _line(node, i) or line) for i, v in enumerate(node)
        ]
    if isinstance(node, str):
        return _text(node, line, budget)
    return node


def _text(s: str, line: int | None, budget: _Budget) -> str:
    """A string that UTF-8 can hold: YAML's "\\ud800" escape makes a lone surrogate, which
    passes every check and then fails the report write after the whole run."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = s[exc.start : exc.end].encode("unicode_escape").decode()
        raise budget.fail(
            line,
            f"the string {s[:40]!r} holds {bad}, half of a surrogate pair that no text file "
            "can hold; write the character itself (or drop the escape)",
        ) from exc
    return str(s)


def _percent(value: float) -> str:
    return f"{value * 100:g}%"


def bound_issues(spec: Spec) -> list[tuple[tuple[Any, ...], str]]:
    """Sizes and numbers against what a run can survive; (yaml path, message) pairs."""
    found: list[tuple[tuple[Any, ...], str]] = []
    found += _ranges(spec)
    found += _url(spec)
    sweep_cells = _sweep_cells(spec)
    if sweep_cells > MAX_CELLS:
        found.append(
            (
                ("sweep",),
                f"the matrix has {sweep_cells:,} cells (arms x models x hardware x every sweep "
                f"axis); at most {MAX_CELLS:,} can be planned: sweep fewer values or split "
                "the experiment",
            )
        )
        return found  # expanding it is what must not happen
    found += _cells(spec)
    return found


def _ranges(spec: Spec) -> list[tuple[tuple[Any, ...], str]]:
    """Percentages in the ranges the analysis accepts (AnalysisSettings), said at the key."""
    v = spec.verify
    above_0_below_100 = "must be above 0% and below 100%"
    checks: list[tuple[tuple[Any, ...], float | None, bool, str]] = [
        # path, value, in range, what the range is
        (("verify", "threshold"), v.threshold, 0 < v.threshold < 1, above_0_below_100),
        (("verify", "surprise"), v.surprise, v.surprise > 0, "must be above 0%"),
        (
            ("verify", "confidence"),
            v.confidence,
            0.5 < v.confidence < 1,
            "must be above 50% and below 100%",
        ),
        (("verify", "noise"), v.noise, v.noise is None or 0 < v.noise < 1, above_0_below_100),
        (
            ("verify", "failure_rate"),
            v.failure_rate,
            0 <= v.failure_rate < 1,
            "must be from 0% up to (not including) 100%",
        ),
        (
            ("correctness", "floor"),
            spec.correctness.floor,
            0 <= spec.correctness.floor <= 1,
            "must be between 0% and 100% (a share of identical tokens)",
        ),
    ]
    checks += [
        (("metrics", "options", metric, "margin"), margin, 0 < margin < 1, above_0_below_100)
        for metric, margin in spec.metrics.margins().items()
    ]
    return [
        (path, f"{_percent(value)} is out of range: it {rule}")
        for path, value, ok, rule in checks
        if value is not None and not ok
    ]


def _url(spec: Spec) -> list[tuple[tuple[Any, ...], str]]:
    url = spec.engine.base_url
    if not url:
        return []
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for 99999 or a non-number
    except ValueError as exc:
        return [(("engine", "base_url"), f"{url!r} is not a usable URL ({exc})")]
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [
            (
                ("engine", "base_url"),
                f"{url!r} is not an http(s) URL; write e.g. http://127.0.0.1:30000",
            )
        ]
    if port == 0:
        return [(("engine", "base_url"), f"{url!r}: port 0 cannot be connected to")]
    return []


def _sweep_cells(spec: Spec) -> int:
    """Cells of the full cross product, computed without building it."""
    n = len(spec.arms) * len(spec.models) * len(spec.hardwares)
    for values in spec.axis_values().values():
        n *= max(len(values), 1)
    return n


def _cells(spec: Spec) -> list[tuple[tuple[Any, ...], str]]:
    """Per-cell numbers and the include/exclude result, on the sweep's points (every arm runs
    each point with the same numbers)."""
    points = combinations(spec)
    if not points:
        where: tuple[Any, ...] = ("exclude",) if spec.exclude else ("sweep",)
        return [(where, "leaves no cell to measure (every combination is excluded)")]
    found: list[tuple[tuple[Any, ...], str]] = []
    worst: dict[str, tuple[float, Any]] = {}
    for combo in points:
        point = {a: combo[a] for a in CLIENT_AXES}
        prompts = spec.workload.prompts_for(int(point["concurrency"]))
        for key in ("concurrency", "input_len", "output_len"):
            value = float(point.get(key, 0) or 0)
            if value > worst.get(key, (0.0, None))[0]:
                worst[key] = (value, point)
        tokens = float(prompts) * float(point.get("input_len", 0) or 0)
        if tokens > worst.get("tokens", (0.0, None))[0]:
            worst["tokens"] = (tokens, point)
        if prompts > worst.get("prompts", (0.0, None))[0]:
            worst["prompts"] = (float(prompts), point)
    limits = {
        "concurrency": (MAX_CONCURRENCY, "concurrent requests"),
        "input_len": (MAX_LEN, "prompt tokens"),
        "output_len": (MAX_LEN, "output tokens"),
        "prompts": (MAX_PROMPTS, "prompts in one cell"),
        "tokens": (MAX_CELL_TOKENS, "prompt tokens held by one cell (num_prompts x input_len)"),
    }
    for key, (limit, what) in limits.items():
        value, point = worst.get(key, (0.0, None))
        if value <= limit:
            continue
        if key == "concurrency" or getattr(spec.sweep, key, None) is not None:
            path: tuple[Any, ...] = ("sweep", key)
        elif key in ("prompts", "tokens"):
            path = ("workload",)
        else:
            path = ("workload", key)
        found.append(
            (
                path,
                f"{value:,.0f} {what} in the cells at {point} (every arm) is "
                f"more than the {limit:,} a run can hold; use a smaller value",
            )
        )
    return found

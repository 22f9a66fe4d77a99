"""The package's shape, read from its own imports (issue 31): no import cycle between modules
(imports inside functions and under TYPE_CHECKING count), imports only downward through the
layers, and no private name used outside the module that defines it. A new import that breaks
one of these fails here with the edge that broke it."""

from __future__ import annotations

import ast
import itertools
import json
import re
from pathlib import Path
from types import FrameType

import pytest

ROOT = Path(__file__).resolve().parent.parent / "matrixrun"

# Bottom to top. A module may import from its own layer's package and from any layer below.
LAYERS: list[set[str]] = [
    {"core"},
    {"sim"},
    {"spec"},
    {"load"},
    {"plan"},
    {"engines"},
    {"flags"},
    {"rundir"},
    {"analysis"},
    {"store"},  # its noise priors pool through analysis.prior; its rows keep a run's own σ
    {"verify"},
    {"report"},
    {"run"},
    {"ingest"},
    {"publish"},
    {"cli", "__main__"},
]


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _package_of(module: str) -> str:
    return module.split(".", 2)[1] if "." in module else ""


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import in the module."""
    tree = ast.parse(MODULES[module].read_text())
    out: list[tuple[str, list[str], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            names = [a.name for a in node.names]
            # `from pkg import submodule` imports the submodule
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
            plain = [n for n in names if f"{target}.{n}" not in MODULES]
            if target in MODULES and (plain or not subs):
                out.append((target, plain, node.lineno))
            out.extend((s, [], node.lineno) for s in subs)
        elif isinstance(node, ast.Import):
            out.extend((a.name, [], node.lineno) for a in node.names if a.name in MODULES)
    return [(t, n, line) for t, n, line in out if t.startswith("matrixrun") and t != module]


EDGES = {m: _imports(m) for m in MODULES}


def _layer(module: str) -> int:
    package = _package_of(module)
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    if module == "matrixrun":
        return -1
    raise AssertionError(f"{module}: its package {package!r} is in no layer of {__file__}")


def test_every_package_has_a_layer() -> None:
    for module in MODULES:
        _layer(module)


def test_no_import_cycle() -> None:
    graph = {m: {t for t, _, _ in EDGES[m]} for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles (function-level imports included): {cycles}"


def test_imports_only_downward() -> None:
    upward = [
        f"{MODULES[m].relative_to(ROOT.parent)}:{line} imports {t}"
        for m in MODULES
        for t, _, line in EDGES[m]
        if t in MODULES and _layer(t) > _layer(m)
    ]
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def test_no_private_name_used_outside_its_module() -> None:
    private = [
        f"{MODULES[m].relative_to(ROOT.parent)}:{line} takes {n} from {t}"
        for m in MODULES
        for t, names, line in EDGES[m]
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    for m, path in MODULES.items():
        tree = ast.parse(path.read_text())
        aliases = {
            (a.asname or a.name): f"{_resolve(m, node)}.{a.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for a in node.names
            if f"{_resolve(m, node)}.{a.name}" in MODULES
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                private.append(
                    f"{path.relative_to(ROOT.parent)}:{node.lineno} uses "
                    f"{aliases[node.value.id]}.{node.attr}"
                )
    assert not private, "private names used outside their module:\n" + "\n".join(private)


@pytest.mark.parametrize("package", ["core"])
def test_core_imports_nothing_else(package: str) -> None:
    leaks = [
        f"{m} imports {t}"
        for m in MODULES
        if _package_of(m) == package
        for t, _, _ in EDGES[m]
        if _package_of(t) != package and t != "matrixrun"
    ]
    assert not leaks, leaks


#: Where tuning constants must not be defined: they live in `core/tuning.py` (issue 31).
NO_TUNING_HERE = ("matrixrun.analysis", "matrixrun.verify", "matrixrun.spec.design")


def _numeric_constants(path: Path) -> list[tuple[str, int]]:
    """Module-level `UPPER_CASE = <number>` assignments: (name, line)."""
    out = []
    for node in ast.parse(path.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        value = getattr(node, "value", None)
        if isinstance(value, ast.UnaryOp):
            value = value.operand
        if (
            isinstance(target, ast.Name)
            and target.id.isupper()
            and isinstance(value, ast.Constant)
            and isinstance(value.value, int | float)
            and not isinstance(value.value, bool)
        ):
            out.append((target.id, node.lineno))
    return out


def test_tuning_constants_live_in_one_module() -> None:
    """The analysis's and the policy's numbers are read in one place, each with its why."""
    scattered = [
        f"{MODULES[m].relative_to(ROOT.parent)}:{line} defines {name}"
        for m in MODULES
        if m.startswith(NO_TUNING_HERE)
        for name, line in _numeric_constants(MODULES[m])
    ]
    assert not scattered, "tuning constants outside core/tuning.py:\n" + "\n".join(scattered)
    path = MODULES["matrixrun.core.tuning"]
    lines = path.read_text().splitlines()
    found = _numeric_constants(path)
    assert len(found) >= 20, found
    names = {n for n, _ in found}
    for name, line in found:
        above = lines[line - 2].strip()  # the line before it (lines are 1-based)
        grouped = above.split(" =")[0] in names
        assert above.startswith("#:") or grouped, f"core/tuning.py:{line} {name} says no why"


def test_the_tuning_check_sees_a_scattered_constant(tmp_path: Path) -> None:
    stray = tmp_path / "stray.py"
    stray.write_text('"""x"""\n\nLEVEL = 0.95\nZ: float = -1.96\nNAME = "a"\nFLAG = True\n')
    assert _numeric_constants(stray) == [("LEVEL", 3), ("Z", 4)]


#: The analysis in the order a run directory goes through it (docs/architecture.md, "The
#: analysis: one pass"): primitives (a point's x and series, a cell's samples, the noise
#: model's parts and the `NoiseModel` value), the noise stage (`warm`, which sets warm runs
#: aside with the stage's own σ, and `noise`, which gathers one `NoiseModel` per metric), then
#: one cell compared with it, the axis over the compared cells, the reruns last, capacity
#: after the pass, and the package that runs them in that order. A module imports only
#: modules before it.
ANALYSIS_ORDER = [
    "stats",
    "samples",
    "points",
    "moderation",
    "components",
    "variance",
    "noise_model",
    "prior",
    "launches",
    "warm",
    "noise",
    "comparison",
    "axis",
    "reruns",
    "capacity",
    "",  # matrixrun.analysis: `analyse`
]
#: What the stages after the noise stage must not reach behind it to: they receive its
#: `NoiseModel` and use nothing else of the noise model's estimation.
NOISE_STAGE_PARTS = {"moderation", "components", "variance", "prior", "launches", "warm"}
#: The pass as a walk through it sees it (analysis/__init__.py's docstring): its steps in
#: order, each a group of modules (the noise stage is `noise` with its parts), and after them
#: `capacity`, which `run.outputs.analyse_run` calls after `analyse`. A step is entered once:
#: every call into its modules comes after every earlier step's and before any later step's
#: (comparison is called once per cell, all in one stretch). Primitives are values and their
#: arithmetic, which any step may call at any time; the package is the driver.
PASS_STEPS: list[tuple[str, set[str]]] = [
    ("the noise stage", {"warm", "noise", "moderation", "components", "prior", "launches"}),
    ("comparison", {"comparison"}),
    ("axis", {"axis"}),
    ("reruns", {"reruns"}),
    ("capacity", {"capacity"}),
]
PRIMITIVES = {"stats", "samples", "points", "variance", "noise_model"}


def _analysis_name(module: str) -> str | None:
    if module == "matrixrun.analysis":
        return ""
    prefix = "matrixrun.analysis."
    return module[len(prefix) :] if module.startswith(prefix) else None


def test_every_analysis_module_has_its_place_in_the_pass() -> None:
    """Each module is in ANALYSIS_ORDER (its imports), and in exactly one of: a step of the
    pass, the primitives, the driver; the steps' modules come in the steps' order."""
    names = {_analysis_name(m) for m in MODULES} - {None}
    assert names == set(ANALYSIS_ORDER), "place the module in ANALYSIS_ORDER"
    placed = [n for _, mods in PASS_STEPS for n in mods] + [*PRIMITIVES, ""]
    assert sorted(placed) == sorted(names), "place the module in PASS_STEPS or PRIMITIVES"
    spans = [[ANALYSIS_ORDER.index(n) for n in mods] for _, mods in PASS_STEPS]
    assert all(max(a) < min(b) for a, b in itertools.pairwise(spans))


def _against_the_pass(edges: dict[str, list[tuple[str, list[str], int]]]) -> list[str]:
    against = []
    for m, found in edges.items():
        here = _analysis_name(m)
        if here is None:
            continue
        for t, _, line in found:
            there = _analysis_name(t)
            if there is None:
                continue
            if ANALYSIS_ORDER.index(there) >= ANALYSIS_ORDER.index(here):
                against.append(f"{MODULES[m].relative_to(ROOT.parent)}:{line} imports {t}")
            late = ANALYSIS_ORDER.index(here) > ANALYSIS_ORDER.index("noise") and here != ""
            if late and there in NOISE_STAGE_PARTS:
                against.append(
                    f"{MODULES[m].relative_to(ROOT.parent)}:{line} reaches behind the noise "
                    f"stage to {t}: take it from the NoiseModel"
                )
    return against


def test_the_analysis_imports_follow_its_pass() -> None:
    against = _against_the_pass(EDGES)
    assert not against, "analysis imports against its pass:\n" + "\n".join(against)


def test_the_pass_check_sees_a_step_back() -> None:
    """A comparison that reached into the noise model's estimate, or a noise stage that
    called the comparison, would fail the test above."""
    back: dict[str, list[tuple[str, list[str], int]]] = {
        "matrixrun.analysis.comparison": [("matrixrun.analysis.components", [], 1)],
        "matrixrun.analysis.noise": [("matrixrun.analysis.comparison", [], 2)],
    }
    assert len(_against_the_pass(back)) == 2


def _step_of(module: str) -> str | None:
    """The step of the pass an analysis module belongs to; None for a primitive, the driver
    or a module outside the analysis."""
    name = _analysis_name(module)
    return next((step for step, mods in PASS_STEPS if name in mods), None)


def _walk(run_dir: Path) -> list[str]:
    """The steps a run directory's analysis enters, in order: one entry per call into a
    function of a step's module from outside that module (`sys.setprofile`; the analysis is
    imported before the trace starts, so imports are not in it)."""
    import sys

    from matrixrun.analysis import analyse  # noqa: F401  imported before the trace
    from matrixrun.run.outputs import analyse_run

    entered: list[str] = []

    def profile(frame: FrameType, event: str, _: object) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        step = _step_of(module)
        if step is not None and caller != module:
            entered.append(step)

    sys.setprofile(profile)
    try:
        analyse_run(run_dir)
    finally:
        sys.setprofile(None)
    return entered


def _out_of_pass(entered: list[str]) -> list[str]:
    """Each step the walk entered again after a later step had begun: what breaks "each
    step entered once"."""
    order = [step for step, _ in PASS_STEPS]
    back = []
    furthest = 0
    for i, step in enumerate(entered):
        at = order.index(step)
        if at < furthest:
            back.append(f"entry {i}: {step} after {order[furthest]} had begun")
        furthest = max(furthest, at)
    return back


def test_the_walk_from_run_into_the_analysis_enters_each_step_once(tmp_path: Path) -> None:
    """A committed run's analysis, as `run` calls it (`run.outputs.analyse_run`), traced: the
    noise stage, then every comparison, then the axis, then the reruns, none returned to. The
    run has warm runs set aside (the noise stage judges them with its own σ, no second noise
    stage). The issue's walk returned to noise.py 9 times (the warm-up check ran the noise
    stage first; the comparison and the reruns called back into noise.py's model), and the
    axis and the comparison took turns per series."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ROOT.parent / "reports" / "runs" / "h200_transformers_aa_cold", run)
    entered = _walk(run)
    assert [s for s, _ in itertools.groupby(entered)] == [
        "the noise stage",
        "comparison",
        "axis",
        "reruns",
    ]
    assert not _out_of_pass(entered)
    assert json.loads((run / "verdict.json").read_text())["warm_aside"], "no warm run set aside"


def test_the_walk_check_sees_a_step_entered_again() -> None:
    walk = ["the noise stage", "comparison", "axis", "comparison", "reruns", "the noise stage"]
    assert _out_of_pass(walk) == [
        "entry 3: comparison after axis had begun",
        "entry 5: the noise stage after reruns had begun",
    ]


#: What rendering a report must not load: the process-management code of the engines, the
#: runner, the load client, the simulator and the verify policy (issue 43). The report reads
#: the run directory alone, so a machine without any of them renders it.
NOT_FOR_RENDERING = ("engines", "run", "load", "sim", "verify", "analysis")


def test_rendering_a_report_loads_no_stage_that_measures() -> None:
    import subprocess
    import sys

    run_dir = ROOT.parent / "reports" / "runs" / "h200_transformers_aa"
    code = (
        "import sys; from matrixrun.report import report_text; "
        f"report_text({str(run_dir)!r}); "
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('matrixrun.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    assert "matrixrun.report.document" in loaded  # it did render
    assert not [m for m in loaded if _package_of(m) in NOT_FOR_RENDERING]


#: A path in a docstring or a `#:` comment: `dir/module.py`, `pkg/module` (a dotted name
#: after it, `engines/sglang.render_flags`, is the module's), `docs/x.md`, or a bare
#: `module.py`. Placeholders (`<name>`) are no path.
DOC_PATH = re.compile(
    r"(?<![\w./<>-])((?:[A-Za-z_][\w-]*/)+[A-Za-z_][\w-]*(?:\.[a-z]\w*)*|[A-Za-z_]\w*\.py)"
    r"(?![\w/<-])"
)
#: Where a path may start to be this repository's: matrixrun's packages and the checkout's
#: top folders. Any other first part is prose ("and/or", "tok/s") or another project's tree.
OURS = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} | {
    "matrixrun",
    "tests",
    "scripts",
    "benchmarks",
    "docs",
    "spec",
    "reports",
}
#: Files of other projects that docstrings cite by the name they have there, and examples.
ELSEWHERE = {
    "flush_wrapper.py",  # SGLang
    "serving_completions.py",  # SGLang
    "cli/utils.py",  # genai-bench
    "token_benchmark_ray.py",  # llmperf
    "benchmark_serving.py",  # vLLM
    "benchmarks/serve.py",  # vLLM
    "benchmarks/benchmark_serving.py",  # vLLM
    "benchmarks/sweep/serve.py",  # vLLM
    "spec/x.yaml",  # examples of a path
    "reports/runs/x",
    "reports/x.md",
}


def _doc_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring and every `#:` comment of a module."""
    source = path.read_text()
    out = [
        (getattr(node, "lineno", 1), doc)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and (doc := ast.get_docstring(node, clean=False))
    ]
    lines = source.splitlines()
    return out + [(i, x) for i, x in enumerate(lines, 1) if x.strip().startswith("#:")]


def _doc_path_exists(folder: Path, name: str) -> bool:
    """Whether `name` is a file or folder in `folder` or one of the folders above it, up to
    the checkout (`report/sections/setup.py` from anywhere in matrixrun, `trace.py` beside
    it), as written, as a module (`pkg/module`), or as a module with a name after it."""
    tries = [name, f"{name}.py"]
    stem = name
    while "." in stem:
        stem = stem.rsplit(".", 1)[0]
        tries.append(f"{stem}.py")
    for here in [folder, *folder.parents]:
        if any((here / t).exists() for t in tries):
            return True
        if here == ROOT.parent:
            break
    return False


def _missing_doc_paths(source: Path, folder: Path) -> list[tuple[int, str]]:
    """(line, path) of each path `source`'s docstrings name that is not there, read as if
    `source` lay in `folder`."""
    return [
        (line, name)
        for line, text in _doc_texts(source)
        for name in (m.group(1) for m in DOC_PATH.finditer(text))
        if name not in ELSEWHERE and ("/" not in name or name.split("/")[0] in OURS)
        if not _doc_path_exists(folder, name)
    ]


def test_every_module_path_a_docstring_names_exists() -> None:
    """A docstring that points to a module sends the reader there: five pointed to modules
    that had moved or gone (issue 43). Each path named in a docstring exists."""
    missing = [
        f"{path.relative_to(ROOT.parent)}:{line} names {name}"
        for path in sorted(MODULES.values())
        for line, name in _missing_doc_paths(path, path.parent)
    ]
    assert not missing, "docstrings naming paths that do not exist:\n" + "\n".join(missing)


def test_the_docstring_path_check_sees_a_moved_module(tmp_path: Path) -> None:
    """Read as if it were in matrixrun/sim/: the model that moved to core/ and a module that
    is gone are found; what is there, a module's function, and prose are not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""`profile.py` is the model; `server.py` serves; `engines/sglang.render_flags`,\n'
        '`run/gone.py`, tok/s and and/or."""\n\n#: see core/profile.py\nX = 1\n'
    )
    assert _missing_doc_paths(probe, ROOT / "sim") == [(1, "profile.py"), (1, "run/gone.py")]

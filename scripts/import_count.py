"""How many of the package's own import statements sit inside functions (issue 31).

Why: an import inside a function hides an edge of the module graph from a reader (and from
tools that read only the top of a file); it belongs there only to keep `matrixrun` start-up
light (the CLI's one dispatch table, `cli/main.py`), to keep an optional dependency optional
(matplotlib, submitit, uvloop, tokenizers, psycopg), or to keep one stage from loading another
(rendering a report never imports the analysis: `run/outputs.analyse_run`). This counts, over
every module of the package, the import statements that import the package itself (`matrixrun…`
or relative) and how many of them are inside a function body; with `--all`, every import
statement (standard library and third party too). `--list` names each function-level one, file:line.

    python scripts/import_count.py            # internal: inside functions / all
    python scripts/import_count.py --all --list
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "matrixrun"


def _internal(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "matrixrun"
    return any(a.name.split(".")[0] == "matrixrun" for a in node.names)


def imports(path: Path) -> list[tuple[int, bool, bool]]:
    """(line, internal, inside a function) for every import statement of one module."""
    found: list[tuple[int, bool, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child.lineno, _internal(child), in_function))
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="count every import, not only ours")
    parser.add_argument("--list", action="store_true", help="name each function-level import")
    args = parser.parse_args()
    total = inside = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, internal, in_function in imports(path):
            if not (internal or args.all):
                continue
            total += 1
            inside += in_function
            if in_function and args.list:
                print(f"{path.relative_to(PACKAGE.parent)}:{line}")
    which = "import statements" if args.all else "internal import statements"
    print(f"{inside} of {total} {which} sit inside functions")


if __name__ == "__main__":
    main()

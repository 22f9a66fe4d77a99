"""The form check on a rendered document: GitHub would not complain about raw HTML or ragged
tables, but readers would see them (a template bug must never cost the report of a finished
run, so `report.render` appends problems as a visible note rather than raising)."""

from __future__ import annotations

import re

#: GitHub's limit on one comment's body, in characters.
COMMENT_LIMIT = 65_536

_PIPE = re.compile(r"(?<!\\)\|")


#: The only HTML the document may hold: GitHub's collapsible sections, one tag per line, the
#: summary as plain text (GitHub renders no Markdown inside it).
_COLLAPSIBLE = re.compile(r"(<details>|</details>|<summary>[^<>]*</summary>)")


def _collapsible(block: str) -> bool:
    """An HTML block made only of `<details>`, `</details>` and `<summary>text</summary>`
    lines (what `<details>` needs to collapse detail on GitHub)."""
    lines = [x.strip() for x in block.strip().splitlines()]
    return bool(lines) and all(_COLLAPSIBLE.fullmatch(x) for x in lines)


def table_cells(line: str) -> int:
    """Cells in one GFM table line: split on unescaped pipes, outer pipes optional."""
    text = line.strip()
    text = text.removeprefix("|")
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return len(_PIPE.split(text))


def check_markdown(text: str, limit: int = COMMENT_LIMIT) -> list[str]:
    """Problems GitHub would not complain about but readers would see: raw HTML (other than
    `<details>`/`<summary>` lines), unbalanced `<details>`, table rows
    whose cell count differs from the header, lines that look like table rows but are not part
    of any table, and a body over the comment limit. Empty when the document is fine."""
    from markdown_it import MarkdownIt

    problems: list[str] = []
    if len(text) > limit:
        problems.append(f"{len(text):,} characters, over the {limit:,} limit")
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    lines = text.splitlines()
    in_table: set[int] = set()
    in_code: set[int] = set()
    for tok in tokens:
        if (tok.type == "html_block" and not _collapsible(tok.content)) or any(
            c.type == "html_inline" for c in (tok.children or [])
        ):
            line = tok.map[0] + 1 if tok.map else "?"
            problems.append(f"line {line}: raw HTML")
        if tok.type in ("fence", "code_block") and tok.map:
            in_code.update(range(*tok.map))
        if tok.type == "table_open" and tok.map:
            start, end = tok.map
            in_table.update(range(start, end))
            want = table_cells(lines[start])
            for number in range(start, end):
                got = table_cells(lines[number])
                if got != want:
                    problems.append(
                        f"line {number + 1}: table row has {got} cells, the header {want}"
                    )
    opened = sum(1 for x in lines if x.strip() == "<details>")
    closed = sum(1 for x in lines if x.strip() == "</details>")
    if opened != closed:
        problems.append(f"{opened} <details> but {closed} </details>")
    for number, line in enumerate(lines):
        stripped = line.lstrip("> ").strip()
        if stripped.startswith("|") and number not in in_table and number not in in_code:
            problems.append(f"line {number + 1}: looks like a table row but is not in a table")
    return problems

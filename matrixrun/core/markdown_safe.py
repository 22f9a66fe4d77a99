"""Strings from a user or a server, made inert before they reach Markdown.

The report is posted as a GitHub comment, so everything a spec author or a server wrote (the
title, arm names, hypothesis, notes, error messages, log tails, flag values) is untrusted
there: raw HTML passes through GitHub's Markdown (`<details>` left open folds away the rest of
the comment; `<img onerror>` is stripped by GitHub but not by every renderer), a newline in a
title starts a new heading or table, a `|` ends a table cell, a backtick opens a code span
that swallows what follows. Each helper here makes a string render as exactly its characters
in one place of a document:

- `md_text`: inline prose (a sentence, a list item),
- `md_cell`: one GFM table cell (also escapes `|`),
- `md_heading`: the text after `## ` (also a trailing `#` run, which would close the heading),
- `md_code`: an inline code span holding the string verbatim (a command line, a flag value).

Pure functions, no Markdown parser needed; the tests check them with markdown-it-py. The
report templates call them (see docs/reliability.md for the places), together with
`matrixrun.core.redact.redact_text` first: redact, then escape.
"""

from __future__ import annotations

import re

#: Line and paragraph breaks of every kind (a title must stay on its line).
_BREAKS = re.compile(r"\r\n|[\n\r\v\f\x85\u2028\u2029]")
#: Other control characters: invisible, and some renderers act on them.
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
#: Characters with Markdown meaning inline: emphasis, links, code, escapes, HTML, entities.
_INLINE = re.compile(r"([\\`*_\[\]<>|~!])")


def _one_line(text: str) -> str:
    return _CONTROLS.sub("", _BREAKS.sub(" ", text))


def md_text(text: object) -> str:
    """`text` as inline Markdown that renders as its own characters: HTML and entities
    escaped (`&amp;`, `&lt;`, `&gt;`), line breaks made spaces, control characters dropped,
    Markdown punctuation backslash-escaped (so `**x**` stays asterisks, `[a](b)` no link)."""
    s = _one_line(str(text)).replace("&", "&amp;")
    s = _INLINE.sub(r"\\\1", s)
    # `<` and `>` escaped by backslash are literal in CommonMark, but not for every renderer
    # of a comment preview: entities are literal everywhere
    s = s.replace("\\<", "&lt;").replace("\\>", "&gt;")
    # a line (the text may start one) that begins like a block: heading, quote, list, rule
    s = re.sub(r"^(\s*)([#>+=-])", r"\1\\\2", s)
    return re.sub(r"^(\s*\d+)([.)])(?=\s|$)", r"\1\\\2", s)


def md_cell(text: object) -> str:
    """`text` as one GFM table cell: `md_text` (which escapes `|` too), never empty-looking
    (an empty string stays empty: the cell is blank, the row keeps its columns)."""
    return md_text(text).strip()


def md_heading(text: object) -> str:
    """`text` as the content of an ATX heading (after `## `): one line, inline-escaped, and a
    closing `#` run escaped so it is kept as text."""
    s = md_text(text).strip()
    return re.sub(r"(#+)$", lambda m: "\\#" * len(m.group(1)), s) or "(untitled)"


def md_code(text: object, in_table: bool = False) -> str:
    """`text` verbatim in an inline code span: a fence of more backticks than any run inside
    it, padded when it starts or ends with a backtick; one line. In a table cell (`in_table`)
    a `|` must still be written `\\|` (GFM splits cells before it parses code spans)."""
    s = _one_line(str(text))
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    if (
        s.startswith("`")
        or s.endswith("`")
        or (s.startswith(" ") and s.endswith(" ") and s.strip())
    ):
        s = f" {s} "
    if in_table:
        s = s.replace("|", "\\|")
    return f"{fence}{s}{fence}" if s else ""

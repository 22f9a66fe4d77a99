"""The Markdown escaping helpers, checked by what markdown-it-py (CommonMark + GFM tables,
HTML on, as GitHub treats a comment) actually makes of their output."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from matrixrun.core.markdown_safe import md_cell, md_code, md_heading, md_text

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "<details><summary>folded",
    "title\n# injected heading\n| a | b |\n|---|---|",
    "a | b | c",
    "`unclosed code",
    "``double`` and ` single",
    "**bold** _em_ [link](http://x) ![img](http://y)",
    "&lt;script&gt; &amp;",
    "# starts like a heading",
    "> a quote",
    "- a list",
    "1. a list",
    "trailing hashes ##",
    "line\r\nbreak\u2028sep\x00nul",
    "back\\slash",
    "~~strike~~",
]


def md() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")


def flat(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for t in tokens:
        out.append(t)
        out.extend(flat(t.children or []))
    return out


def text_of(tokens: list[Token]) -> str:
    return "".join(t.content for t in flat(tokens) if t.type in ("text", "code_inline"))


ACTIVE = {"html_inline", "html_block", "link_open", "image", "strong_open", "em_open",
          "heading_open", "blockquote_open", "bullet_list_open", "ordered_list_open",
          "s_open", "hr"}  # fmt: skip


@pytest.mark.parametrize("raw", HOSTILE)
def test_text_renders_as_its_characters_and_nothing_else(raw: str) -> None:
    tokens = md().parse(md_text(raw))
    assert not {t.type for t in flat(tokens)} & ACTIVE
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    expected = " ".join(raw.replace("\r\n", "\n").replace("\u2028", "\n").split("\n"))
    assert text_of(tokens) == expected.replace("\x00", "")


@pytest.mark.parametrize("raw", HOSTILE)
def test_a_cell_stays_one_cell_of_one_row(raw: str) -> None:
    doc = f"| name | value |\n|---|---|\n| {md_cell(raw)} | x |\n"
    tokens = flat(md().parse(doc))
    assert not {t.type for t in tokens} & ACTIVE
    assert sum(t.type == "tr_open" for t in tokens) == 2
    assert sum(t.type == "td_open" for t in tokens) == 2
    cells = [t for t in tokens if t.type == "inline"][2:]
    expected = " ".join(raw.replace("\r\n", "\n").replace("\u2028", "\n").split("\n"))
    assert text_of(cells[:1]) == expected.replace("\x00", "").strip()


@pytest.mark.parametrize("raw", HOSTILE)
def test_a_heading_is_one_heading_with_all_its_text(raw: str) -> None:
    tokens = md().parse(f"## {md_heading(raw)}\n\nafter\n")
    kinds = [t.type for t in tokens]
    assert kinds.count("heading_open") == 1 and kinds[-3:] == [
        "paragraph_open", "inline", "paragraph_close"
    ]  # fmt: skip
    inner = flat(tokens[1:2])
    assert not {t.type for t in inner} & ACTIVE
    expected = " ".join(raw.replace("\r\n", "\n").replace("\u2028", "\n").split("\n"))
    assert text_of(tokens[1:2]) == expected.replace("\x00", "").strip()


@pytest.mark.parametrize("raw", [*HOSTILE, "`", "a`b``c", " x "])
def test_code_span_holds_the_string_verbatim(raw: str) -> None:
    tokens = flat(md().parse(md_code(raw)))
    code = [t for t in tokens if t.type == "code_inline"]
    assert len(code) == 1
    one_line = " ".join(raw.replace("\r\n", "\n").replace("\u2028", "\n").split("\n"))
    assert code[0].content == one_line.replace("\x00", "")


def test_code_span_in_a_table_keeps_the_row() -> None:
    doc = f"| argv |\n|---|\n| {md_code('--flag a|b', in_table=True)} |\n"
    tokens = flat(md().parse(doc))
    assert sum(t.type == "td_open" for t in tokens) == 1
    assert [t.content for t in tokens if t.type == "code_inline"] == ["--flag a|b"]


def test_empty_and_non_strings() -> None:
    assert md_cell("") == ""
    assert md_heading("") == "(untitled)"
    assert md_text(3.5) == "3.5"
    assert md_code("") == ""

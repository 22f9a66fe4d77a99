"""Every spec snippet in docs/ validates, flags included (issue 28): a ```yaml block is a whole
spec or a fragment of one (a few top-level sections), laid over a minimal spec and checked as
`matrixrun validate` checks it; an inline flag example (`` `key: value` → `--key value` ``) names
a flag the newest shipped SGLang list has. docs/gpu-node.md once showed `cuda_graph_bs`, a flag
0.5.23 no longer has (argparse exits on the ambiguous prefix)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from matrixrun.flags import check_file
from matrixrun.flags.shipped import shipped
from matrixrun.spec import read_spec

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"`([a-z][a-z0-9_]*): [^`]+` → `(--[a-z0-9-]+)")

BASE: dict[str, Any] = {
    "experiment": "docs-snippet",
    "title": "a snippet from the docs",
    "model": {"path": "/models/m"},
    "hardware": {"gpu": "NVIDIA H200", "count": 8},
    "engine": {"kind": "sglang"},
    "arms": {"a": {}, "b": {"moe_runner_backend": "flashinfer_cutlass"}},
}


def snippets() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in _BLOCK.finditer(text):
            line = text[: m.start()].count("\n") + 2
            out.append((f"{doc.relative_to(ROOT)}:{line}", m.group(1)))
    return out


@pytest.fixture(autouse=True)
def _shipped_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXRUN_FLAGS", "shipped")


def test_the_docs_have_snippets() -> None:
    assert len(snippets()) >= 4  # a guard against the pattern silently matching nothing


@pytest.mark.parametrize(("where", "text"), snippets(), ids=[w for w, _ in snippets()])
def test_every_yaml_snippet_in_docs_validates(where: str, text: str, tmp_path: Path) -> None:
    data = YAML(typ="safe").load(text)
    assert isinstance(data, dict), f"{where}: not a mapping"
    # a fragment that names no engine must validate in a spec of one of them (its flags say
    # which: a rehearsal profile keyed by vLLM's max_num_batched_tokens is a vLLM spec's)
    given = data.get("engine", {}).get("kind") if isinstance(data.get("engine"), dict) else None
    problems = []
    for kind in [given] if given else ["sglang", "vllm"]:
        spec = {**BASE, **data} if "experiment" not in data else data
        spec["engine"] = {**spec.get("engine", {}), "kind": kind}
        if kind == "vllm" and spec["arms"] is BASE["arms"]:
            spec["arms"] = {"a": {}, "b": {"max_num_seqs": 8}}
        path = tmp_path / f"snippet-{kind}.yaml"
        with path.open("w") as fh:
            YAML().dump(spec, fh)
        loaded = read_spec(path)  # raises SpecError with the issues
        found = check_file(loaded)
        if not found.errors:
            return
        problems.append("; ".join(map(str, found.errors)))
    raise AssertionError(f"{where}: " + " / ".join(problems))


def test_inline_flag_examples_name_real_flags() -> None:
    flags = shipped("sglang")
    assert flags is not None
    seen = 0
    for doc in DOCS:
        for key, option in _INLINE.findall(doc.read_text()):
            if key == "snake_case":  # the rule itself, not a flag
                continue
            seen += 1
            assert option == "--" + key.replace("_", "-")
            assert flags.lookup(option) is not None, f"{doc.name}: {option} is not in {flags.label}"
    assert seen >= 1

"""Issue 45's file datasets through `matrixrun run`, end to end: a ShareGPT-format JSON and a
Mooncake-format trace, written here as the public ones are, a spec for each derived from the
committed real-SGLang spec (spec/sglang_cpu.yaml), and what every such run directory must show.

Shared by the simulator's test (tests/test_datasets.py, in the default suite) and the real
server's (tests/test_sglang_real.py), so a rehearsal and a real run are held to the same
checks: every cell measured, prompt lengths as the model's tokenizer counts them (ShareGPT) or
as the trace gives them, the cached tokens of the trace's shared block, the trace's schedule,
and a report that names the dataset it ran.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / os.environ.get(
    "MATRIXRUN_SGLANG_SPEC", "spec/sglang_cpu.yaml"
)  # see test_sglang_real
MODEL_LINE = "model: {path: /tmp/matrixrun-sglang-cpu/tiny-llama}"
WORKLOAD = """workload: {dataset: shared_prefix, groups: 4, prompts_per_group: 4, system_len: 256,
           question_len: 32, output_len: 16, num_prompts: 16, warmup_requests: 1, seed: 1}"""
#: Two cells per arm, cheap ones: the point is the dataset, not the sweep.
CONCURRENCY = [1, 2]
#: The trace's offsets halved (`time_scale`), as SGLang's --mooncake-slowdown-factor 0.5.
TIME_SCALE = 0.5

#: Mooncake rows in file order; the second row in time (timestamp 1000) shares block 0 with
#: the first, and the file is not in time order (replay sorts by timestamp).
TRACE_ROWS = [
    {"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]},
    {"timestamp": 1500, "input_length": 100, "output_length": 3, "hash_ids": [3]},
    {"timestamp": 1000, "input_length": 560, "output_length": 6, "hash_ids": [0, 2]},
]
IN_TIME_ORDER = sorted(TRACE_ROWS, key=lambda r: r["timestamp"])
#: Mooncake's block size: a shared hash id is this many shared prompt tokens.
BLOCK = 512


def write_sharegpt(path: Path) -> Path:
    """Six usable conversations as the public ShareGPT file has them (an id, alternating
    human and gpt turns, some several exchanges long) and one with a single turn, which every
    client drops. Words of the form `w<n>` tokenize under any tokenizer of the tests."""
    convs: list[dict[str, Any]] = []
    for i in range(6):
        turns = []
        for k in range(1 + i % 3):  # 1 to 3 exchanges
            human = " ".join(f"w{3 + (37 * i + 11 * k + j) % 1900}" for j in range(6 + 5 * i))
            reply = " ".join(f"w{3 + (13 * i + j) % 1900}" for j in range(3 + 2 * i))
            turns += [{"from": "human", "value": human}, {"from": "gpt", "value": reply}]
        convs.append({"id": f"conv{i}", "conversations": turns})
    convs.append({"id": "lonely", "conversations": [{"from": "human", "value": "w5 w6 w7"}]})
    path.write_text(json.dumps(convs, indent=1))
    return path


def write_mooncake(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in TRACE_ROWS))
    return path


def first_exchanges(sharegpt: Path) -> list[tuple[str, str]]:
    """(prompt, reply) of each usable conversation: its first two turns."""
    convs = json.loads(sharegpt.read_text())
    return [
        (c["conversations"][0]["value"], c["conversations"][1]["value"])
        for c in convs
        if len(c["conversations"]) >= 2
    ]


def dataset_spec(tmp: Path, kind: str, data: Path, model: str) -> Path:
    """spec/sglang_cpu.yaml with `kind`'s workload over `data`, `model` as the model, one run
    per cell and two concurrencies."""
    if kind == "sharegpt":
        n = len(first_exchanges(data))  # every conversation: the counts are the file's
        workload = f"workload: {{dataset: sharegpt, path: {data}, num_prompts: {n}, "
    else:
        workload = (
            f"workload: {{dataset: trace, path: {data}, time_scale: {TIME_SCALE}, "
            f"num_prompts: {len(TRACE_ROWS)}, "
        )
    workload += "warmup_requests: 0, seed: 3}"
    text = SPEC.read_text()
    for old, new in {
        MODEL_LINE: f"model: {{path: {model}}}",
        WORKLOAD: workload,
        "sweep: {concurrency: [1, 4]}": f"sweep: {{concurrency: {CONCURRENCY}}}",
        "max_runs: 2": "max_runs: 1",
    }.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp / f"{kind}.yaml"
    path.write_text(text)
    return path


def records(out: Path, m: dict[str, Any]) -> list[dict[str, Any]]:
    """A measurement's per-request records (server time), in request order."""
    lines = (out / m["requests_file"]).read_text().splitlines()
    return sorted((json.loads(x) for x in lines if x), key=lambda r: r["i"])


def check_dataset_run(
    out: Path,
    kind: str,
    data: Path,
    count: Callable[[Sequence[str]], list[int]],
    arms: Sequence[str],
) -> None:
    """What a run of `dataset_spec(kind)` must show in its run directory. `count` gives the
    model's tokenizer's token counts of texts; `arms` are the arms that ran."""
    ms = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x]
    for arm in arms:
        done = {m["point"]["concurrency"] for m in ms if m["arm"] == arm and m["error"] is None}
        assert done == set(CONCURRENCY), (arm, [(m["arm"], m["error"]) for m in ms])
    if kind == "sharegpt":
        pairs = first_exchanges(data)
        counted = count([p for p, _ in pairs] + [r for _, r in pairs])  # one tokenizer load
        ins, outs = counted[: len(pairs)], counted[len(pairs) :]
    else:
        ins, outs = [[r[k] for r in TRACE_ROWS] for k in ("input_length", "output_length")]
    for m in ms:
        rs = records(out, m)
        assert all(r["err"] == "" for r in rs), rs
        # every request's lengths as the server reported them, against the file's
        assert sorted(r["in"] for r in rs) == sorted(ins), (m["arm"], rs)
        assert sorted(r["out"] for r in rs) == sorted(outs), (m["arm"], rs)
        if kind == "trace":
            _check_trace(m, rs)
    report = (out / "report.md").read_text()
    lengths = f"{_mean(ins)} / {_mean(outs)} tokens per request on average, as sent"
    if kind == "sharegpt":
        assert f"sharegpt, the file `{data}`: each conversation's first human turn" in report
        assert f"{lengths} (each reply's length)" in report
    else:
        assert f"{lengths} (the trace's input_length / output_length)" in report
        assert f"trace, the Mooncake-format file `{data}`" in report
        assert "shared 512-token blocks (hash_ids)" in report  # whole, not redacted
        assert f"the trace's own schedule (its timestamps × {TIME_SCALE})" in report
        assert "Prefix cache hit rate" in report
        assert "measured concurrency" not in report  # its schedule, not a short load


def _check_trace(m: dict[str, Any], rs: list[dict[str, Any]]) -> None:
    """The trace's lengths, its shared block found cached, and its schedule."""
    assert [r["in"] for r in rs] == [row["input_length"] for row in IN_TIME_ORDER]
    assert [r["out"] for r in rs] == [row["output_length"] for row in IN_TIME_ORDER]
    assert rs[0]["c"] == 0  # the cache was flushed before the cell
    assert rs[1]["c"] >= BLOCK  # block 0, left by the first request
    # records are in the server's time: a rehearsal's is the modelled time / its scale
    due = [row["timestamp"] / 1000 * TIME_SCALE / m["time_scale"] for row in IN_TIME_ORDER]
    assert all(r["start"] >= d - 0.005 for r, d in zip(rs, due, strict=True)), (rs, due)


def _mean(values: Sequence[int]) -> str:
    """A mean as the report's Setup writes it (one decimal, none when whole)."""
    m = round(sum(values) / len(values), 1)
    return str(int(m)) if m.is_integer() else str(m)

"""Workloads (issue 45): cells sized to their concurrency, and the datasets — ShareGPT-format
files, SGLang's generated shared prefix, Mooncake traces, random with range_ratio, Poisson and
gamma arrivals — identical for every arm. Every file is made here (tmp_path); nothing is
downloaded."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import dataset_runs
import numpy as np
import pytest
from test_runner import mr
from test_vocab import small_tokenizer
from tokenizers import Tokenizer

from matrixrun.core.errors import InputError, SpecError
from matrixrun.core.measurement import Measurement
from matrixrun.core.metrics import Metrics
from matrixrun.core.timescale import TimeScale
from matrixrun.load.cell import in_server_time
from matrixrun.load.client import LoadConfig
from matrixrun.load.datasets import Cell, DatasetConfig, Request
from matrixrun.load.datasets.build import arrivals, requests_for
from matrixrun.load.datasets.resolve import check_workload
from matrixrun.load.prompts import arrival_offsets, make_prompts
from matrixrun.report.sections import setup
from matrixrun.report.sections.failures import concurrency_limits
from matrixrun.rundir.settings import spec_facts
from matrixrun.spec import parse_spec

ROOT = Path(__file__).resolve().parent.parent
TINY = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()
WORKLOAD = "workload: {input_len: 16, output_len: 8, num_prompts: 8, warmup_requests: 1, seed: 3}"


def tiny(workload: str = WORKLOAD, sweep: str = "sweep: {concurrency: [1, 4]}") -> str:
    return TINY.replace(WORKLOAD, workload).replace("sweep: {concurrency: [1, 4]}", sweep)


# ------------------------------------------------------------------ cells sized to concurrency


def test_num_prompts_below_a_swept_concurrency_is_refused_naming_the_cells() -> None:
    text = tiny(sweep="sweep: {concurrency: [1, 4, 16, 64]}")
    with pytest.raises(SpecError) as err:
        parse_spec(text, "s.yaml")
    (issue,) = err.value.issues
    assert issue.key == "workload.num_prompts" and issue.line == 11
    assert "concurrency 16 and 64" in issue.message and "at least 64" in issue.message
    # an include above num_prompts is a cell too; excluded ones are not
    bad = tiny(sweep="sweep: {concurrency: [1, 4]}") + "include: [{concurrency: 32}]\n"
    with pytest.raises(SpecError, match="concurrency 32"):
        parse_spec(bad)
    ok = text + "exclude: [{concurrency: 16}, {concurrency: 64}]\n"
    parse_spec(ok)
    parse_spec(tiny("workload: {input_len: 16, output_len: 8, prompts_per_concurrency: 1}"))


def _measured(conc: float, nominal: int, arm: str = "slow", **extra: object) -> Measurement:
    metrics = Metrics(
        duration=10, completed=64, total_input_tokens=640, total_output_tokens=640,
        request_throughput=6.4, input_throughput=64, output_throughput=64, total_throughput=128,
        concurrency=conc,
    )  # fmt: skip
    return Measurement(
        cell_id=f"c{nominal}{arm}", point_id=f"p{nominal}", arm=arm, group_id=arm, slice="",
        point={"concurrency": nominal}, attempt=1, instance=f"{arm}#1", reason="first",
        metrics=metrics, started_at="2025-01-01T00:00:00Z", finished_at="2025-01-01T00:01:00Z",
        extra=dict(extra),
    )  # fmt: skip


def test_the_report_shows_measured_concurrency_where_it_fell_short() -> None:
    ms = [
        _measured(62.3, 256), _measured(63.9, 256),  # issue 45's README run
        _measured(60.1, 64),  # a full cell's ramp and tail: not a mislabelled load
        _measured(10.0, 256, arm="fast", capped={"after_s": 60}),  # said as capped already
    ]  # fmt: skip
    (line,) = concurrency_limits(ms, "concurrency")
    assert line.startswith("`slow` at concurrency 256: measured concurrency 62.3–63.9, short ")
    assert "nominal 256" in line
    rated = _measured(5.0, 64).model_copy(update={"point": {"concurrency": 64, "request_rate": 4}})
    assert concurrency_limits([rated], "concurrency") == []  # a rate, not the cap, sets the load


def test_the_report_names_each_dataset_and_its_lengths_as_sent() -> None:
    """Setup says what a dataset sent, not the spec's input_len / output_len (which describe
    `random` only; the committed real shared_prefix report said 512 where 288 were sent)."""
    ms = [_measured(4.0, 4)]  # 64 requests, 640 tokens in and 640 out: 10 / 10 each
    shared = (
        "{dataset: shared_prefix, groups: 2, prompts_per_group: 4, system_len: 64, "
        "question_len: 8, output_len: 8, num_prompts: 8}"
    )
    rows = dict(setup.workload(spec_facts(parse_spec(tiny(f"workload: {shared}"))), ms))
    assert rows["dataset"] == (
        "shared_prefix: 2 groups × 4 prompts, each group sharing a system prompt of 64 "
        "tokens, then a question of 8 tokens (sent as token ids)"
    )
    assert rows["input / output length"] == (
        "10 / 10 tokens per request on average, as sent (system prompt + question / output_len)"
    )
    fixed = "{dataset: sharegpt, path: sg.json, output_len: 8, num_prompts: 8}"
    rows = dict(setup.workload(spec_facts(parse_spec(tiny(f"workload: {fixed}"))), []))
    assert rows["dataset"].startswith("sharegpt, the file `sg.json`: each conversation's")
    assert rows["input / output length"] == "the dataset's own (nothing measured)"
    assert rows["request rate"] == "inf (all at once)"
    rows = dict(setup.workload(spec_facts(parse_spec(tiny())), ms))  # random: the spec's
    assert rows["dataset"] == "random token ids"
    assert rows["input / output length"] == "16 / 8 tokens"


# ------------------------------------------------------------------------------- datasets


def _sharegpt(path: Path, n: int = 40) -> Path:
    """A ShareGPT-format file as the public one is: conversations of alternating turns, some
    unusable (one turn, a gpt-first exchange, a one-word prompt)."""
    convs = [
        {"id": f"c{i}", "conversations": [
            {"from": "human", "value": " ".join(f"w{3 + (i * 7 + k) % 500}" for k in range(5 + i))},
            {"from": "gpt", "value": " ".join(f"w{3 + (i + k) % 900}" for k in range(3 + i % 9))},
            {"from": "human", "value": "w5 w6"},
        ]}
        for i in range(n)
    ]  # fmt: skip
    convs += [
        {"id": "one-turn", "conversations": [{"from": "human", "value": "w3 w4 w5"}]},
        {"id": "short", "conversations": [
            {"from": "human", "value": "w9"}, {"from": "gpt", "value": "w9 w9 w9"}]},
        {"id": "long", "conversations": [
            {"from": "human", "value": "w7 " * 1100}, {"from": "gpt", "value": "w8 w8 w8 w8"}]},
    ]  # fmt: skip
    path.write_text(json.dumps(convs))
    return path


def _cell(ds: DatasetConfig, count: int, **kw: object) -> list[Request]:
    return list(
        requests_for(
            ds, Cell(**{"seed": 3, "count": count, "input_len": 16, "output_len": 8, **kw})
        )
    )  # type: ignore[arg-type]


def test_random_range_ratio_draws_lengths_as_sglang_and_stays_prefix_stable() -> None:
    ds = DatasetConfig(range_ratio=0.25)
    reqs = _cell(ds, 200, input_len=64, output_len=32)
    assert {len(r.prompt) for r in reqs} <= set(range(16, 65)) and len(
        {len(r.prompt) for r in reqs}
    ) > 20
    assert {r.output_len for r in reqs} <= set(range(8, 33))
    full = make_prompts(3, 200, 64)
    assert all(r.prompt == full[i][: r.prompt_tokens] for i, r in enumerate(reqs))
    assert [r.prompt for r in _cell(DatasetConfig(), 5, input_len=64)] == make_prompts(3, 5, 64)


def test_sharegpt_first_human_turn_reply_length_and_filters(tmp_path: Path) -> None:
    model = small_tokenizer(tmp_path / "m", 2048)
    path = str(_sharegpt(tmp_path / "sg.json"))
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    ds = DatasetConfig(kind="sharegpt", path=path, tokenizer=str(model))
    reqs = _cell(ds, 40)
    prompts = {
        tuple(tok.encode(p[0]["value"]).ids): p
        for p in (c["conversations"] for c in json.loads(Path(path).read_text()))
    }
    for r in reqs:
        conv = prompts[tuple(r.prompt)]  # type: ignore[arg-type]
        assert r.prompt_tokens == len(r.prompt)  # type: ignore[arg-type]
        assert r.output_len == len(tok.encode(conv[1]["value"]).ids)
    assert len({tuple(r.prompt) for r in reqs}) == 40  # type: ignore[arg-type]
    assert all(r.prompt_tokens >= 2 for r in reqs)  # the one-word prompt dropped (sglang: < 2)
    assert _cell(ds, 40) == reqs and _cell(ds, 10) == reqs[:10]  # seeded, prefix-stable
    assert _cell(ds, 40, seed=4) != reqs
    # vLLM's filter drops the 1,100-token prompt (which SGLang's keeps without a context_len)
    # and the five 3-token replies; SGLang's drops only the one-token prompt
    assert max(r.prompt_tokens for r in _cell(ds, 41)) > 1024
    with pytest.raises(InputError, match=r"has 35 conversations that pass the vllm length filter"):
        _cell(ds.model_copy(update={"length_filter": "vllm"}), 41)
    capped = _cell(ds.model_copy(update={"context_len": 30}), 15)
    assert all(r.prompt_tokens + r.output_len <= 30 for r in capped)
    fixed = _cell(ds.model_copy(update={"fixed_output": True}), 5, output_len=77)
    assert {r.output_len for r in fixed} == {77}
    text = _cell(ds, 3, text=True)
    assert all(
        isinstance(r.prompt, str) and r.prompt_tokens == len(tok.encode(r.prompt).ids) for r in text
    )


def test_shared_prefix_groups_share_exact_token_prefixes() -> None:
    ds = DatasetConfig(kind="shared_prefix", groups=4, prompts_per_group=5, system_len=64,
                       question_len=8, id_low=64, id_high=1920)  # fmt: skip
    reqs = _cell(ds, 20, output_len=12)
    assert len(reqs) == 20 and all(r.prompt_tokens == 72 and r.output_len == 12 for r in reqs)
    ids = [t for r in reqs for t in r.prompt]  # type: ignore[union-attr]
    assert min(ids) >= 64 and max(ids) < 1920
    prefixes = [tuple(r.prompt[:64]) for r in reqs]
    assert len(set(prefixes)) == 4 and all(prefixes.count(p) == 5 for p in set(prefixes))
    assert len({tuple(r.prompt[64:]) for r in reqs}) == 20  # every question its own
    assert prefixes[:4] != sorted(prefixes[:4]) or len(set(prefixes[:4])) > 1  # interleaved
    with pytest.raises(InputError, match="shared_prefix makes 20 prompts"):
        _cell(ds, 21)


def _mooncake(path: Path) -> Path:
    rows = [
        {"timestamp": 1000, "input_length": 1200, "output_length": 10, "hash_ids": [0, 1, 2]},
        {"timestamp": 1500, "input_length": 700, "output_length": 20, "hash_ids": [0, 3]},
        {"timestamp": 1200, "input_length": 300, "output_length": 5, "hash_ids": [4]},
        {"timestamp": 4000, "input_length": 600, "output_length": 7, "hash_ids": [0]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_trace_keeps_lengths_shared_blocks_and_schedule(tmp_path: Path) -> None:
    ds = DatasetConfig(
        kind="trace", path=str(_mooncake(tmp_path / "t.jsonl")), id_low=64, id_high=1920
    )
    reqs = _cell(ds, 4)
    # timestamp order: 1000, 1200, 1500, 4000
    assert [r.prompt_tokens for r in reqs] == [1200, 300, 700, 600]
    assert [len(r.prompt) for r in reqs] == [1200, 300, 700, 600]
    assert [r.output_len for r in reqs] == [10, 5, 20, 7]
    assert reqs[0].prompt[:512] == reqs[2].prompt[:512] == reqs[3].prompt[:512]  # block 0
    assert reqs[0].prompt[512:700] != reqs[2].prompt[512:700]  # blocks 1 and 3 differ
    ids = [t for r in reqs for t in r.prompt]  # type: ignore[union-attr]
    assert min(ids) >= 64 and max(ids) < 1920
    cell = Cell(3, 4, 16, 8)
    assert arrivals(ds, cell, math.inf) == [0.0, 0.2, 0.5, 3.0]
    slow = ds.model_copy(update={"time_scale": 2.0})
    assert arrivals(slow, cell, math.inf) == [0.0, 0.4, 1.0, 6.0]
    # a rehearsal 4x faster replays the modelled schedule 4x faster on the server
    config = LoadConfig(base_url="http://h:1", num_prompts=4, input_len=16, output_len=8,
                        concurrency=4, dataset=slow)  # fmt: skip
    fast = in_server_time(config, TimeScale(4.0))
    assert arrivals(fast.dataset, cell, math.inf) == [0.0, 0.1, 0.25, 1.5]
    with pytest.raises(InputError, match="has 4 requests and a cell needs 5"):
        _cell(ds, 5)


def test_gamma_arrivals_keep_the_rate_and_change_the_spread() -> None:
    for shape in (0.25, 4.0):
        gaps = np.diff(arrival_offsets(1, 20000, 50.0, shape))
        assert np.mean(gaps) == pytest.approx(1 / 50, rel=0.05)
        assert np.var(gaps) / np.mean(gaps) ** 2 == pytest.approx(1 / shape, rel=0.1)
    assert arrival_offsets(1, 50, 50.0, 1.0) == arrival_offsets(1, 50, 50.0)  # Poisson as before


@pytest.mark.parametrize(
    ("workload", "key", "says"),
    [
        ("{dataset: sharegpt}", "workload.dataset", "needs workload.path"),
        ("{dataset: random, groups: 4}", "workload.groups", "shared_prefix only"),
        ("{dataset: trace, path: t.jsonl, request_rate: 4}", "workload.request_rate",
         "own schedule"),
        ("{dataset: shared_prefix, groups: 2, prompts_per_group: 2, num_prompts: 8}",
         "workload.num_prompts", "makes 4 prompts"),
    ],
)  # fmt: skip
def test_dataset_keys_are_checked_where_they_are_written(
    workload: str, key: str, says: str
) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(tiny(f"workload: {workload}"), "s.yaml")
    assert any(i.key == key and says in i.message for i in err.value.issues), err.value
    with pytest.raises(SpecError, match="sets each request's input_len itself"):
        parse_spec(
            tiny(
                "workload: {dataset: sharegpt, path: x.json}",
                "sweep: {concurrency: [1], input_len: [8, 16]}",
            )
        )


def test_a_text_dataset_without_its_tokenizer_is_refused_before_any_launch(tmp_path: Path) -> None:
    data = _sharegpt(tmp_path / "sg.json")
    spec = parse_spec(tiny(f"workload: {{dataset: sharegpt, path: {data}, num_prompts: 8}}"))
    with pytest.raises(InputError, match=r"dataset sharegpt needs the model's tokenizer\.json"):
        check_workload(spec, rehearse=True)
    spec = parse_spec(tiny(f"workload: {{dataset: sharegpt, path: {tmp_path}/none.json}}"))
    spec = spec.model_copy(
        update={
            "model": [
                spec.models[0].model_copy(
                    update={"tokenizer": str(small_tokenizer(tmp_path / "m"))}
                )
            ]
        }
    )
    with pytest.raises(InputError, match="cannot read the ShareGPT file"):
        check_workload(spec, rehearse=True)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sharegpt", "trace"])
def test_sharegpt_and_a_trace_rehearse_end_to_end_with_real_token_counts(
    tmp_path: Path, kind: str
) -> None:
    """A ShareGPT-format file and a Mooncake trace rehearse through `matrixrun run` with the
    specs the real server runs (tests/dataset_runs.py, tests/test_sglang_real.py): every cell
    measured, prompts counted by the model's tokenizer (ShareGPT) or as the trace gives them,
    the trace's shared block cached and its schedule kept, the dataset named in the report."""
    model = small_tokenizer(tmp_path / "m", 2048)
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    write = dataset_runs.write_sharegpt if kind == "sharegpt" else dataset_runs.write_mooncake
    data = write(tmp_path / ("sharegpt.json" if kind == "sharegpt" else "trace.jsonl"))
    spec = dataset_runs.dataset_spec(tmp_path, kind, data, str(model))
    run = tmp_path / "run"
    res = mr("run", str(spec), "--rehearse", "--out", str(run), gpus=None)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]

    def count(texts: Sequence[str]) -> list[int]:
        return [len(tok.encode(t).ids) for t in texts]

    dataset_runs.check_dataset_run(run, kind, data, count, arms=["fcfs", "lpm"])

"""Prompt ids within the model's vocabulary (issue 42): SGLang does not check input_ids, and an
id at or above the embedding's size kills its scheduler. The vocabulary is read from files made
here (config.json, a real `tokenizers` tokenizer.json, tokenizer_config.json), never a hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_runner import mr
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit

from matrixrun.core.errors import InputError
from matrixrun.engines.sim import rehearsal_engine
from matrixrun.load.datasets.resolve import check_workload, dataset_for
from matrixrun.load.prompts import make_prompts, make_warmup_prompts
from matrixrun.load.vocab import IdRange, Vocab, id_range, read_vocab
from matrixrun.plan import expand
from matrixrun.run.correctness import prompts_for
from matrixrun.run.measurer import Instance, Measurer, RunOptions
from matrixrun.run.record import RunDirRecorder
from matrixrun.rundir.results import RunDir
from matrixrun.spec import CorrectnessSpec, parse_spec, parse_spec_file

ROOT = Path(__file__).resolve().parent.parent
TINY = (ROOT / "tests" / "specs" / "tiny.yaml").read_text()


def small_tokenizer(folder: Path, size: int = 2048, top_special: int | None = None) -> Path:
    """A real tokenizer.json of `size` ids: <unk>, <s>, </s> at 0..2, words above, and
    optionally one more special token at `top_special` (as chat markers sit at the top)."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, size)}}
    if top_special is not None:
        vocab = {k: v for k, v in vocab.items() if v != top_special}
        vocab["<|eot|>"] = top_special
    tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = WhitespaceSplit()
    tok.add_special_tokens(["<unk>", "<s>", "</s>"] + (["<|eot|>"] if top_special else []))
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def spec_for(model: Path | str, extra: str = "") -> str:
    old = "model: {path: /models/tiny, vocab_size: 32000}"
    assert old in TINY
    return TINY.replace(old, f"model: {{path: {model}{extra}}}")


def test_config_json_gives_the_size_also_nested(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 2048}))
    assert read_vocab(str(tmp_path)) == Vocab(
        2048, frozenset(), f"vocab_size in {tmp_path}/config.json"
    )
    nested = tmp_path / "vl"
    nested.mkdir()
    (nested / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 4096}}))
    vocab = read_vocab(str(nested))
    assert vocab is not None and vocab.size == 4096
    assert read_vocab(str(tmp_path / "absent"), None) is None


def test_tokenizer_json_gives_size_and_special_ids(tmp_path: Path) -> None:
    small_tokenizer(tmp_path, 2048, top_special=1900)
    vocab = read_vocab(str(tmp_path))
    assert vocab is not None and vocab.size == 2048
    assert vocab.special == {0, 1, 2, 1900}
    # above the low specials and the scaled floor (64), below the top marker (not 1920)
    assert id_range(vocab) == IdRange(64, 1900)
    # the file itself may be named (model.tokenizer: .../tokenizer.json)
    assert read_vocab(str(tmp_path / "tokenizer.json")) == vocab


def test_the_smaller_of_config_and_tokenizer_and_added_tokens_decoder(tmp_path: Path) -> None:
    small_tokenizer(tmp_path, 3000)
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 2048}))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"added_tokens_decoder": {"5": {"content": "<x>"}, "2000": {"content": "<y>"}}})
    )
    vocab = read_vocab(str(tmp_path))
    assert vocab is not None and vocab.size == 2048  # the embedding is what a server indexes
    assert id_range(vocab) == IdRange(64, 1920)  # 5 < 64; 2000 is above the scaled top anyway


def test_large_vocabularies_keep_the_historical_range() -> None:
    """Every model we target (32k and more) sends exactly the prompts it always did."""
    for size in (32000, 128256, 151936):
        assert id_range(Vocab(size)) == IdRange(1000, 30000)
    assert id_range(Vocab(128256, frozenset(range(128000, 128256)))) == IdRange(1000, 30000)
    assert make_prompts(5, 3, 20, IdRange()) == make_prompts(5, 3, 20)
    with pytest.raises(InputError, match="ordinary token ids"):
        id_range(Vocab(40, frozenset(range(0, 30))))


def test_a_2048_token_model_gets_ids_below_2048_everywhere(tmp_path: Path) -> None:
    """Measured, warm-up and correctness-gate prompts of a 2,048-token model: every id below
    2048 and clear of its special tokens (today's fixed [1000, 30000) crashes the server)."""
    model = small_tokenizer(tmp_path / "tiny", 2048)
    spec = parse_spec(spec_for(model))
    ids = dataset_for(spec, spec.models[0], required=True).ids
    for prompts in (
        make_prompts(3, 64, 512, ids),
        make_warmup_prompts(3, 64, 512, ids),
        prompts_for(CorrectnessSpec(prompts=8, input_len=256), ids=ids),
    ):
        flat = [t for p in prompts for t in p]
        assert min(flat) >= 3 and max(flat) < 2048
        assert len(set(flat)) > 1000  # spread over the vocabulary, not a sliver of it


def test_the_runner_sends_every_arm_the_same_in_vocabulary_prompts(tmp_path: Path) -> None:
    model = small_tokenizer(tmp_path / "tiny", 2048)
    source = parse_spec_file(spec_for(model), "<spec>")
    spec = source.spec
    recorder = RunDirRecorder(RunDir(tmp_path / "run"))
    engine = rehearsal_engine(spec, "x")
    runner = Measurer(source, expand(spec), engine, recorder, RunOptions())
    configs = [
        runner._load_config(Instance(g, "x", None, "http://127.0.0.1:1"), g.cells[0])  # type: ignore[arg-type]
        for g in runner.plan.groups
    ]
    assert len({c.arm for g in runner.plan.groups for c in g.cells}) == 2
    assert len({c.dataset for c in configs}) == 1
    assert configs[0].dataset.id_high <= 1920


def test_model_vocab_size_says_it_where_no_file_can(tmp_path: Path) -> None:
    spec = parse_spec(spec_for("/nonexistent/model", ", vocab_size: 2048"))
    assert dataset_for(spec, spec.models[0], required=True).ids == IdRange(64, 1920)
    bad = mr("validate", str(_write(tmp_path, spec_for("/m", ", vocab_size: 1"))))
    assert bad.returncode == 2 and "model.vocab_size" in bad.stderr


def test_an_unreadable_vocabulary_is_refused_before_any_launch(tmp_path: Path) -> None:
    path = _write(tmp_path, spec_for(tmp_path / "no-such-model"))
    res = mr("run", str(path), "--out", str(tmp_path / "run"))
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot read the model's vocabulary" in lines[0]
    assert "set model.vocab_size" in lines[0] and str(tmp_path / "no-such-model") in lines[0]
    assert not (tmp_path / "run").exists()  # nothing launched, nothing written


def test_a_rehearsal_without_the_model_uses_the_simulators_vocabulary(tmp_path: Path) -> None:
    spec = parse_spec(spec_for("/models/tiny"))
    check_workload(spec, rehearse=True)  # no error: the simulator takes any id
    assert dataset_for(spec, spec.models[0]).ids == IdRange(1000, 30000)
    with pytest.raises(InputError, match=r"model\.vocab_size"):
        check_workload(spec, rehearse=False)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path

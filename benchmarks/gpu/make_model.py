"""Build, on the GPU node, a model that `transformers serve` can load, with no download.

A randomly initialised Llama of about 0.82B parameters (bf16) and a byte-level BPE tokenizer
trained here on local text (the Python standard library's sources: real text that every
machine has). The generation config's end-of-sequence token is cleared so that every request
runs to `max_tokens` (the server refuses `ignore_eos`); the harness checks the counts anyway.
Random weights serve the performance question (same shapes, same kernels as a trained model of
this size). Left as initialised, the answers are near-uniform noise: the top two logits of a
step are a few hundredths apart, so a different attention kernel (continuous batching's paged
one) flips greedy tokens by rounding alone, and the correctness gate called such an arm
suspect at 69% agreement (reports/runs/h200_transformers_cb-3, -4). So the weights are made
*decisive* (`decisive`): the token embeddings are scaled ×EMBED_SCALE over the layers' own
contributions, and the output head's row j is the embedding of σ(j), a fixed permutation of the
ordinary tokens: the next token is σ⁻¹ of the last one with a logit gap of ~10× the others'
spread, which rounding cannot flip. Every layer still runs on every step (the performance
question is unchanged); what the gate can then see is an engine path that computes a
different function, not one that rounds differently.

    python3 benchmarks/gpu/make_model.py /tmp/llama-0.8b
"""

from __future__ import annotations

import sys
import sysconfig
import time
from pathlib import Path


def corpus(limit_bytes: int = 40_000_000) -> list[str]:
    """Text to train the tokenizer on: the stdlib's .py files, up to `limit_bytes`."""
    texts, size = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        size += len(text)
        if size > limit_bytes:
            break
    return texts


#: Token embeddings' scale over the default init (std 0.02). By estimate, each layer adds
#: about 1 to the residual stream whatever its size (its input is normalised, its weights std
#: 0.02), 16 layers about 4 in all, so embeddings of std 20 (×1000) should keep the last
#: token's direction at cos ≈ 0.98 of the final hidden state. Measured on the H200 by `check`
#: (reports/runs/h200_transformers_cb-6/make_model.log): the greedy token is the designed one
#: on 100% of 1024 steps, smallest top-1 − top-2 gap 1729 against a logit spread of 47.
EMBED_SCALE = 1000.0
#: The special tokens (<s>, </s>, <pad>): the head never predicts them.
SPECIAL = 3


def decisive(model, seed: int = 0):  # type: ignore[no-untyped-def]
    """Scale the embeddings and set the head to a permutation of them (module docstring);
    returns the designed next token of each token id (the special ones map to themselves)."""
    import torch

    emb = model.model.embed_tokens.weight
    head = model.lm_head.weight
    vocab = emb.shape[0]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    sigma = SPECIAL + torch.randperm(vocab - SPECIAL, generator=gen)
    with torch.no_grad():
        emb.mul_(EMBED_SCALE)
        head.zero_()
        rows = torch.arange(SPECIAL, vocab)
        head[rows.to(head.device)] = emb[sigma.to(emb.device)] / emb.float().std().to(emb.dtype)
    # head row r is token σ[r − SPECIAL]'s embedding, so token t's next is r with σ[r−3] = t
    following = torch.arange(vocab)
    following[sigma] = rows
    return following


def check(model, following) -> str:  # type: ignore[no-untyped-def]
    """One forward pass over random tokens: how often the greedy next token is the designed
    one, and the smallest top-1 − top-2 logit gap (what rounding would have to overcome)."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(SPECIAL, len(following), (4, 256), generator=gen)
    with torch.no_grad():
        logits = model(input_ids=ids.to(model.device)).logits.float().cpu()
    top = logits.topk(2, dim=-1)
    hit = (top.indices[..., 0] == following[ids]).float().mean().item()
    gap = (top.values[..., 0] - top.values[..., 1]).min().item()
    spread = logits.std(dim=-1).median().item()
    return (
        f"greedy = the designed next token on {100 * hit:.1f}% of 1024 steps; smallest "
        f"top-1 − top-2 gap {gap:.1f} (logits' spread {spread:.1f})"
    )


def main(out: str) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    t0 = time.time()
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=32000,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(corpus(), trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    tok.save_pretrained(target)
    t1 = time.time()
    config = LlamaConfig(
        vocab_size=bpe.get_vocab_size(),
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=8,
        max_position_embeddings=4096,
        bos_token_id=0,
        eos_token_id=None,
        pad_token_id=2,
        torch_dtype="bfloat16",
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    try:
        print(check(model, decisive(model)))
    except Exception as exc:  # a device call is scarce: a plain model still serves the run
        print(f"decisive weights failed ({exc!r}): saving the plain random model instead")
    model.generation_config = GenerationConfig(
        bos_token_id=0, eos_token_id=None, pad_token_id=2, do_sample=False
    )
    model.save_pretrained(target)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"model: {params / 1e9:.2f}B params, vocab {config.vocab_size}; tokenizer "
        f"{t1 - t0:.1f}s, model {time.time() - t1:.1f}s -> {target}"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/llama-0.8b")

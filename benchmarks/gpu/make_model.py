"""Build, on the GPU node, a model that `transformers serve` can load, with no download.

A randomly initialised Llama of about 0.82B parameters (bf16) and a byte-level BPE tokenizer
trained here on local text (the Python standard library's sources: real text that every
machine has). The generation config's end-of-sequence token is cleared so that every request
runs to `max_tokens` (the server refuses `ignore_eos`); the harness checks the counts anyway.
Random weights serve the performance question (same shapes, same kernels as a trained model of
this size); answers are noise, but greedy noise, so the correctness gate still compares arms.

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
    )
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
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

"""Make a tiny randomly initialised Llama and its tokenizer, locally, for the CPU SGLang tests.

    SGLANG_PYTHON scripts/sglang_cpu/make_model.py OUT_DIR --vocab 32000

Run by the SGLang venv's python (it has torch, transformers and tokenizers); matrixrun never
imports any of them. No download: the tokenizer is a byte-level BPE trained on the standard
library's own .py files, the weights are random (hidden 128, 2 layers). The vocabulary size is
the tokenizer's, so `config.json`'s `vocab_size` and `tokenizer.json` agree, as in a real model.
A small vocabulary (2,048) is what made SGLang's scheduler die on out-of-range prompt ids
(issue 42); the tests build both.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from pathlib import Path

SPECIALS = ["<s>", "</s>", "<unk>"]


def _corpus(limit: int = 400) -> list[str]:
    """Up to `limit` standard-library .py files, sorted so every machine trains the same."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py"))[:limit]
    return [str(p) for p in files]


def make_tokenizer(out: Path, vocab: int) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(_corpus(), trainer)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": 2048,
                "chat_template": (
                    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n"
                    "{% endfor %}{% if add_generation_prompt %}<s>assistant: {% endif %}"
                ),
            },
            indent=1,
        )
    )
    size: int = tok.get_vocab_size()
    return size


def make_weights(out: Path, vocab: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=0,
        eos_token_id=1,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--vocab", type=int, default=32000)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    size = make_tokenizer(args.out, args.vocab)
    make_weights(args.out, size)
    print(json.dumps({"path": str(args.out), "vocab_size": size}))


if __name__ == "__main__":
    main()

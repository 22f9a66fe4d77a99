"""A stand-in for `python -m sglang.launch_server --help`: a real argparse parser with a few of
SGLang's options (and their shapes), so the flag check can run a local install's --help."""

from __future__ import annotations

import argparse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_server")
    p.add_argument("--model-path", "--model", type=str, required=False)
    p.add_argument("--host", type=str, default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    p.add_argument(
        "--moe-runner-backend", choices=["auto", "triton", "flashinfer_cutlass"], default="auto"
    )
    p.add_argument("--enable-local-only", action="store_true", help="Only in this build.")
    p.add_argument("--enable-tf32-matmul", action=argparse.BooleanOptionalAction)
    p.add_argument("--lora-paths", nargs="+", help="Several values.")
    p.add_argument("--kv-offload", nargs="?", const="cpu", help="An optional value.")
    p.add_argument(
        "--disable-old-thing",
        action="store_true",
        help="Deprecated. Use --new-thing-backend=disabled instead.",
    )
    p.add_argument(
        "--new-thing-backend",
        choices=["auto", "disabled"],
        help="Replaces the deprecated --disable-old-thing.",
    )
    return p


if __name__ == "__main__":
    parser().parse_args()

"""The engines' spec shorthands: a spec key → the flag the engine declares (`tp` is
`--tp-size` for SGLang, `--tensor-parallel-size` for vLLM).

A leaf, not a part of `engines/`, because three stages read the same tables: the engines render
flags with them, the flag check finds the declared name, and the report recognises a launch
argv's options as the spec's keys (`report.given`). Rendering a report must not load the
engines' process-management code to learn six names.
"""

from __future__ import annotations

#: Spec shorthands -> the flag SGLang declares (see `engines/sglang.py`'s docstring).
SGLANG = {"tp": "tp_size", "dp": "dp_size", "pp": "pp_size", "ep": "ep_size"}

#: Spec shorthands (and SGLang's spelling) -> the flag vLLM declares.
VLLM = {
    "tp": "tensor_parallel_size",
    "tp_size": "tensor_parallel_size",
    "dp": "data_parallel_size",
    "dp_size": "data_parallel_size",
    "pp": "pipeline_parallel_size",
    "pp_size": "pipeline_parallel_size",
}

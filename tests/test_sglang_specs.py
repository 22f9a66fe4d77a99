"""spec/sglang_gpu.yaml is spec/sglang_cpu.yaml without its CPU lines (docs/gpu-node.md,
"Checking a new SGLang release"): a GPU node's release check runs the experiment CI runs on
a CPU, so the two may differ only where a CPU needs what a GPU does not."""

from __future__ import annotations

from pathlib import Path

from matrixrun.spec import load_spec

SPEC = Path(__file__).resolve().parent.parent / "spec"


def test_the_gpu_spec_is_the_cpu_one_without_the_cpu_lines() -> None:
    cpu, gpu = load_spec(SPEC / "sglang_cpu.yaml"), load_spec(SPEC / "sglang_gpu.yaml")
    # the engine's CPU lines: a subset kept, with the CPU's values
    assert gpu.engine.args.items() <= cpu.engine.args.items()
    assert {"device", "attention_backend", "sampling_backend"}.isdisjoint(gpu.engine.args)
    assert gpu.engine.env.items() <= cpu.engine.env.items()
    assert {"SGLANG_USE_CPU_ENGINE", "PYTHONPATH"}.isdisjoint(gpu.engine.env)
    # everything the experiment is made of, the same
    same = ("model", "arms", "sweep", "workload", "metrics", "verify", "limits", "correctness",
            "hypothesis")  # fmt: skip
    for field in same:
        assert getattr(gpu, field) == getattr(cpu, field), field
    assert gpu.engine.kind == cpu.engine.kind == "sglang"

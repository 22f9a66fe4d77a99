"""Correctness gate: `agreement` as a table, response parsing, and `collect` against two real
simulator processes (identical arms agree; an arm that diverges after 5 tokens is caught at 5)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from simserver import start_sim

from matrixrun.core.errors import LoadError
from matrixrun.run.correctness import Answer, agreement, answer_of, collect, prompts_for
from matrixrun.spec import CorrectnessSpec

pytestmark = pytest.mark.timeout(120)

SETTINGS = CorrectnessSpec(prompts=4, input_len=16, max_new_tokens=12)


def profile_args() -> list[str]:
    data = {
        "name": "gate",
        "base": {"step_ms": [[1, 1]]},
        "effect_rules": [{"when": {"attention_backend": "buggy"},
                          "set": {"diverge_after_tokens": 5}}],
    }  # fmt: skip
    return ["--profile-json", json.dumps(data)]


# -- agreement (pure) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "ans", "share", "firsts", "first_min"),
    [
        ([[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 5]], 1.0, [None, None], None),
        ([[1, 2, 3, 4]], [[1, 2, 9, 4]], 0.5, [2], 2),  # the coincidence after 2 does not count
        ([[1, 2, 3, 4], [5, 6, 7, 8]], [[1, 2, 3, 4], [0, 6, 7, 8]], 0.5, [None, 0], 0),
        ([[1, 2, 3, 4]], [[1, 2]], 0.5, [2], 2),  # a short answer diverges where it stops
        ([[1, 2]], [[1, 2, 3]], 1.0, [2], 2),  # all reference tokens match, but not identical
        ([["a", "b"]], [["a", "c"]], 0.5, [1], 1),
        ([[]], [[]], 1.0, [None], None),
    ],
)
def test_agreement(ref: list[Answer], ans: list[Answer], share: float,
                   firsts: list[int | None], first_min: int | None) -> None:  # fmt: skip
    a = agreement(ref, ans)
    assert a.share_identical_tokens == pytest.approx(share)
    assert a.first_divergence == firsts and a.first_divergence_min == first_min
    assert a.prompts == len(ref) and a.identical_prompts == firsts.count(None)
    assert a.passes(share) and not a.passes(share + 0.01)


def test_agreement_needs_the_same_prompts() -> None:
    with pytest.raises(ValueError, match="2 answers for 1 reference"):
        agreement([[1]], [[1], [2]])


def test_prompts_are_fixed_and_seeded() -> None:
    a, b = prompts_for(SETTINGS), prompts_for(SETTINGS)
    assert a == b and len(a) == 4 and all(len(p) == 16 for p in a)
    assert prompts_for(SETTINGS, seed=1) != a


@pytest.mark.parametrize(
    ("api", "data", "answer"),
    [
        ("sglang", {"text": " t1 t2", "output_ids": [1, 2], "meta_info": {}}, [1, 2]),
        ("sglang", {"text": " t1 t2", "meta_info": {}}, ["t1", "t2"]),
        ("openai", {"choices": [{"text": "x", "token_ids": [7, 8]}]}, [7, 8]),
        ("openai", {"choices": [{"text": "ab", "logprobs": {"tokens": ["a", "b"]}}]}, ["a", "b"]),
        ("openai", {"choices": [{"text": " hello world", "logprobs": None}]},
         ["hello", "world"]),
    ],
)  # fmt: skip
def test_answer_of(api: Any, data: dict[str, Any], answer: Answer) -> None:
    assert answer_of(api, data) == answer


def test_answer_of_rejects_other_shapes() -> None:
    with pytest.raises(ValueError, match="neither"):
        answer_of("sglang", {"meta_info": {}})
    with pytest.raises(ValueError, match="no choices"):
        answer_of("openai", {"choices": []})


# -- collect against real simulator processes -----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("api", ["sglang", "openai"])
def test_identical_arms_agree_and_a_diverging_arm_is_caught(api: Any) -> None:
    args = profile_args()
    with (
        start_sim([*args, "--moe-runner-backend", "a"]) as (_, base),
        start_sim([*args, "--moe-runner-backend", "b"]) as (_, same),
        start_sim([*args, "--attention-backend", "buggy"]) as (_, bad),
    ):
        ref = asyncio.run(collect(base, api, SETTINGS, "m"))
        assert len(ref) == 4 and all(len(r) == 12 for r in ref)
        assert all(isinstance(t, int) for r in ref for t in r)
        ok = agreement(ref, asyncio.run(collect(same, api, SETTINGS, "m")))
        assert ok.share_identical_tokens == 1.0 and ok.first_divergence_min is None
        assert ok.identical_prompts == 4
        diverged = agreement(ref, asyncio.run(collect(bad, api, SETTINGS, "m")))
        assert diverged.share_identical_tokens == pytest.approx(5 / 12)
        assert diverged.first_divergence == [5, 5, 5, 5] and diverged.first_divergence_min == 5
        assert not diverged.passes(SETTINGS.floor)


@pytest.mark.slow
def test_collect_fails_with_the_reason() -> None:
    failing = {"name": "e", "base": {"step_ms": [[1, 1]]}, "effects": {"error_rate": 1.0}}
    with (
        start_sim(["--profile-json", json.dumps(failing)]) as (_, base),
        pytest.raises(LoadError, match=r"correctness prompt 0 .* answered HTTP 500"),
    ):
        asyncio.run(collect(base, "sglang", SETTINGS, None))
    with pytest.raises(LoadError, match="is the server up"):
        asyncio.run(collect("http://127.0.0.1:9", "sglang", SETTINGS, None, timeout_s=5))

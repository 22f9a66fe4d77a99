"""Plan expansion: groups per launch config, exclude/include, ABBA order, stable ids, cost."""

from __future__ import annotations

from pathlib import Path

from matrixrun.plan import expand
from matrixrun.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
# the example spec without its estimate and rehearsal blocks (the cases below edit the rest)
EXAMPLE = (ROOT / "spec" / "glm5_cutedsl.yaml").read_text().split("\nestimate:")[0] + "\n"


def test_example_plan_two_launches_five_cells_each() -> None:
    plan = expand(parse_spec(EXAMPLE))
    assert [g.arm for g in plan.groups] == ["flashinfer_cutlass", "flashinfer_cutedsl"]
    assert [c.x for c in plan.groups[0].cells] == [1, 10, 64, 256, 1024]
    assert [c.num_prompts for c in plan.groups[0].cells] == [8, 40, 256, 1024, 4096]
    assert plan.groups[1].flags == {"tp": 8, "moe_runner_backend": "flashinfer_cutedsl"}
    # arms share point ids (they are compared there) but never cell ids
    a, b = plan.groups
    assert [c.point_id for c in a.cells] == [c.point_id for c in b.cells]
    assert not {c.cell_id for c in a.cells} & {c.cell_id for c in b.cells}
    assert plan.cost.launches == 2 and plan.cost.cells == 10
    assert plan.cost.runs_worst_case == 30 and plan.cost.launches_worst_case == 6
    assert plan.cost.time_first_pass_s is None


def test_ids_are_stable_and_change_only_with_what_defines_the_cell() -> None:
    ids = [c.cell_id for c in expand(parse_spec(EXAMPLE)).cells()]
    assert ids == [c.cell_id for c in expand(parse_spec(EXAMPLE)).cells()]
    retitled = EXAMPLE.replace("title: CuteDSL", "title: Another title for CuteDSL")
    assert ids == [c.cell_id for c in expand(parse_spec(retitled)).cells()]
    longer = EXAMPLE.replace("output_len: 128", "output_len: 256")
    assert not set(ids) & {c.cell_id for c in expand(parse_spec(longer)).cells()}
    flag = EXAMPLE.replace(
        "{moe_runner_backend: flashinfer_cutedsl}",
        "{moe_runner_backend: flashinfer_cutedsl, cuda_graph_max_bs: 64}",
    )
    changed = {c.cell_id for c in expand(parse_spec(flag)).cells()}
    assert len(set(ids) & changed) == 5  # the baseline's cells keep their ids


def test_multi_axis_expansion_exclude_include_and_abba() -> None:
    plan = expand(load_spec(ROOT / "tests" / "specs" / "multi.yaml"))
    # 2 models x 2 hw x 2 chunk sizes = 8 slices, minus model-b on h200x4 (2) = 6 slices
    assert len(plan.slices) == 6
    assert len(plan.groups) == 12
    labels = [s.label for s in plan.slices]
    assert "model-a · h200x8 · chunked_prefill_size=4096" in labels
    assert not any(label.startswith("model-b · h200x4") for label in labels)
    for g in plan.groups:
        xs = [c.x for c in g.cells]
        if g.server_axes["chunked_prefill_size"] == 8192:
            assert 64 not in xs
        if g.slice == "model-a · h200x8 · chunked_prefill_size=4096":
            assert xs == [1, 8, 64, 256]  # the include adds a point
        assert g.flags["tp"] == g.hardware.args["tp"]
        assert g.flags["chunked_prefill_size"] == g.server_axes["chunked_prefill_size"]
    # ABBA: the first arm alternates across slices
    assert [g.arm for g in plan.groups[:4]] == ["base", "cand", "cand", "base"]
    c = plan.cost
    assert c.time_first_pass_s == 12 * 600 + c.cells * 120
    assert c.time_worst_case_s == c.time_first_pass_s + 3600  # capped by the budget
    assert c.launches_worst_case == 12 * 3 + 6  # fresh-server rounds + one A/A per slice


def test_single_slice_label_is_empty() -> None:
    plan = expand(parse_spec(EXAMPLE))
    assert [s.label for s in plan.slices] == [""]


def test_plan_warns_when_the_budget_cannot_buy_a_fresh_sigma() -> None:
    """glm5: two groups of 5 cells, launch 12m, cell 4m: a fresh-server σ with 6 df needs both
    groups relaunched and 6 runs (48m); a 30m budget gets a warning, 2h does not."""
    from matrixrun.plan.render import plan_text, sigma_cost

    spec = load_spec(ROOT / "spec" / "glm5_cutedsl.yaml")
    assert sigma_cost(expand(spec)) == (48 * 60, 2, 6)

    def text(budget: float) -> str:
        s = spec.model_copy(update={"verify": spec.verify.model_copy(update={"budget": budget})})
        return plan_text(s, expand(s))

    assert "warning: the rerun budget 30m is less than a fresh-server σ" in text(1800)
    assert "≈ 48m: 2 relaunch(es) and 6 runs" in text(1800)
    assert "warning" not in text(7200)

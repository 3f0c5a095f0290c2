"""bot.features.advise: every branch of the tree on hand-made analyses; citations exist in the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.features import render
from bot.features.advise import advise
from bot.features.analysis import Analysis
from bot.features.extract import build_table

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"
A2, A3 = "Atlas 800I A2", "Atlas 800I A3 超节点服务器"


@pytest.fixture(scope="module")
def table():
    return render.parse(render.render(build_table(DOCS), "t"))


def analysis(**layers) -> Analysis:
    return Analysis(source="hand-made", layers=layers)


def run(table, layers, hardware=A2, model="Wan2.1"):
    return advise(table, analysis(**layers), hardware, model, "references/mindiesd-features.md")


def fired(advice) -> dict[str, bool | None]:
    return {f.branch: f.fired for f in advice.findings}


def names(advice) -> list[str]:
    return [r.name for r in advice.recommendations]


def assert_cited_rows_exist(table, advice):
    keys = {(r.direction, r.name): r for r in table.rows}
    for rec in advice.recommendations:
        row = keys[(rec.direction, rec.citation.row)]
        assert table.anchors[rec.direction] == rec.citation.anchor
        assert list(row.sources) == rec.citation.sources


def test_compute_bound_matmul_led_goes_to_quantization(table):
    advice = run(table, {"compute": {"matmul_pct": 50, "attention_pct": 20}})
    assert fired(advice)["compute.matmul"] is True
    assert names(advice) == ["Linear量化"]
    rec = advice.recommendations[0]
    assert (
        rec.priority == "P0" and rec.category == "quantization" and "W8A8_DYNAMIC" in rec.variants
    )
    assert_cited_rows_exist(table, advice)


def test_compute_bound_attention_led_goes_to_attention(table):
    advice = run(table, {"compute": {"matmul_pct": 20, "attention_pct": 45}})
    assert fired(advice)["compute.attention"] is True
    got = names(advice)
    assert got[0] == "FA量化"  # quantization ranks above sparsity
    assert {
        "rf_v2（RainFusion2.0）",
        "ada_bsa（自适应块稀疏）",
        "sparse_attention",
        "attention_forward",
    } <= set(got)
    assert [r.priority for r in advice.recommendations][:2] == ["P0", "P1"]
    assert advice.recommendations[-1].priority == "P2"
    assert_cited_rows_exist(table, advice)


def test_not_compute_bound(table):
    advice = run(table, {"compute": {"matmul_pct": 30, "attention_pct": 30}})
    assert fired(advice)["compute"] is False
    assert advice.recommendations == []
    assert "no branch of the decision tree fired" in advice.nothing_applies
    assert "MatMul + Attention = 60% <= 60%" in advice.nothing_applies
    assert "memory" in advice.nothing_applies  # says which checks lacked inputs


def test_memory_bound(table):
    advice = run(table, {"system": {"peak_memory_gb": 63, "memory_capacity_gb": 64}})
    assert fired(advice)["memory"] is True
    assert names(advice) == ["CPU 卸载", "显存共享"]
    assert (
        run(table, {"system": {"peak_memory_gb": 40, "memory_capacity_gb": 64}}).recommendations
        == []
    )


def test_communication_by_share_when_overlap_is_unknown(table):
    advice = run(table, {"communication": {"comm_pct": 20}})
    assert fired(advice)["communication"] is True
    assert "20% of device time > 15%" in advice.findings[2].reason
    assert {"Tensor Parallel", "Ulysses Sequence Parallel", "CFG Parallel"} <= set(names(advice))
    assert_cited_rows_exist(table, advice)


def test_exposed_communication_decides_when_known(table):
    hidden = run(table, {"communication": {"comm_pct": 20, "exposed_comm_pct": 10}})
    assert fired(hidden)["communication"] is False
    exposed = run(table, {"communication": {"comm_pct": 5, "exposed_comm_pct": 35}})
    assert (
        fired(exposed)["communication"] is True
        and "exposed communication 35%" in exposed.findings[2].reason
    )


def test_compile_not_used(table):
    advice = run(table, {"compute": {"compiled": False}})
    assert fired(advice)["compile"] is True
    assert {"Pattern 融合", "ACLGraph 加速"} <= set(names(advice))
    assert all(r.priority == "P0" and r.category == "pattern" for r in advice.recommendations)
    assert run(table, {"compute": {"compiled": True}}).recommendations == []


def test_redundant_steps_go_to_caching(table):
    advice = run(table, {"pipeline": {"redundant_steps": True}})
    assert fired(advice)["cache"] is True
    # cache.md: "DiTCache 优先 … 推荐首先尝试", "AttentionCache 备选": the docs' order, not the alphabet
    assert names(advice) == ["DitCache", "时间步优化", "AttentionCache"]
    assert advice.recommendations[0].ranked_by.startswith("docs: 推荐首先")
    assert fired(run(table, {"pipeline": {"step_similarity": 0.95}}))["cache"] is True


def test_layer5_triggers(table):
    mm = run(table, {"operator": {"dit_matmul_pct": 51}})
    assert names(mm) == ["Linear量化"]
    fa = run(table, {"operator": {"fa_pct": 31}})
    assert "sparse_attention" in names(fa)
    vector = run(table, {"operator": {"vector_pct": 21}})
    assert "Pattern 融合" in names(vector) and "ACLGraph 加速" not in names(vector)
    host = run(table, {"operator": {"host_bound_pct": 21}})
    assert names(host) == ["ACLGraph 加速"]
    quiet = run(
        table,
        {"operator": {"dit_matmul_pct": 50, "fa_pct": 30, "vector_pct": 20, "host_bound_pct": 20}},
    )
    assert quiet.recommendations == [] and all(
        v is False for k, v in fired(quiet).items() if k.startswith("operator.")
    )


def test_priority_rule_orders_categories(table):
    advice = run(
        table,
        {
            "compute": {"matmul_pct": 50, "attention_pct": 20, "compiled": False},
            "communication": {"comm_pct": 30},
            "operator": {"fa_pct": 40},
            "pipeline": {"redundant_steps": True},
        },
    )
    order = ["pattern", "quantization", "sparsity", "communication", "generic"]
    cats = [r.category for r in advice.recommendations]
    assert cats == sorted(cats, key=order.index)
    assert (
        advice.recommendations[0].priority == "P0" and advice.recommendations[-1].priority == "P2"
    )
    assert [r.rank for r in advice.recommendations] == list(range(1, len(cats) + 1))
    assert_cited_rows_exist(table, advice)


def test_hardware_limit_filters_fa_quantization(table):
    layers = {"compute": {"matmul_pct": 20, "attention_pct": 45}}
    on_a3 = run(table, layers, hardware=A3)
    assert "FA量化" not in names(on_a3)
    skipped = {s.name: s.reason for s in on_a3.skipped}
    assert "仅 Atlas 800I A2" in skipped["FA量化"] and "Atlas 800I A3" in skipped["FA量化"]
    assert "FA量化" in names(run(table, layers, hardware="Atlas 800I A2 推理服务器"))


def test_model_support_filters_sparse_attention(table):
    layers = {"compute": {"matmul_pct": 20, "attention_pct": 45}}
    flux = run(table, layers, model="FLUX.1-dev")
    assert "sparse_attention" not in names(flux) and "FA量化" in names(flux)
    assert (
        "HunyuanVideo-1.5, Wan2.1, Wan2.2"
        in {s.name: s.reason for s in flux.skipped}["sparse_attention"]
    )
    assert "attention_forward" in names(flux)  # no model list declared: kept


def test_unknown_model_gets_features_with_a_warning_and_unknown_hardware_loses_limited_ones(table):
    advice = run(
        table, {"compute": {"matmul_pct": 20, "attention_pct": 45}}, hardware="910B", model="MyDiT"
    )
    assert any("MyDiT" in w and "未声明" in w for w in advice.warnings) and any(
        "910B" in w for w in advice.warnings
    )
    assert {"sparse_attention", "attention_forward"} <= set(names(advice))
    assert "FA量化" not in names(advice) and "FA量化" in [
        s.name for s in advice.skipped
    ]  # 仅 Atlas 800I A2


def test_parallel_strategies_follow_the_docs_preference(table):
    advice = run(table, {"communication": {"exposed_comm_pct": 45}})
    got = names(advice)
    assert got.index("Ulysses Sequence Parallel") < got.index("Tensor Parallel")
    ulysses = advice.recommendations[got.index("Ulysses Sequence Parallel")]
    assert ulysses.ranked_by == "docs: 推荐优先使用 (parallelism.md)"
    assert advice.recommendations[got.index("Tensor Parallel")].ranked_by.startswith(
        "docs: 不推荐优先使用"
    )
    # the expert load balancer is for MoE models only
    assert "动态专家负载均衡" not in got and "MoE" in next(
        s.reason for s in advice.skipped if s.name == "动态专家负载均衡"
    )
    moe = advise(
        table, analysis(communication={"exposed_comm_pct": 45}), A2, "Wan2.1", "f.md", moe=True
    )
    assert "动态专家负载均衡" in names(moe)


def test_matrix_hardware_of_the_model_is_used(table):
    # FLUX.1-dev is listed on A2 and A3 only: nothing on 300I DUO, with the reason
    advice = run(
        table,
        {"compute": {"matmul_pct": 50, "attention_pct": 20}},
        hardware="300I Duo",
        model="FLUX.1-dev",
    )
    assert advice.recommendations == []
    assert all("only on" in s.reason for s in advice.skipped) and any(
        "FLUX.1-dev" in w for w in advice.warnings
    )


def test_everything_filtered_says_why(table):
    advice = run(table, {"operator": {"dit_matmul_pct": 60}}, model="Stable Diffusion 1.5")
    assert (
        advice.recommendations == []
        and "excluded for this hardware or model" in advice.nothing_applies
    )
    assert [s.name for s in advice.skipped] == ["Linear量化"]


def test_thresholds_are_the_ones_the_reference_page_states():
    from bot.features import tree as adv

    page = (Path(__file__).parent.parent / "references" / "optimization-dimensions.md").read_text(
        encoding="utf-8"
    )
    for value in (
        adv.COMPUTE_BOUND_PCT,
        adv.COMM_PCT,
        adv.EXPOSED_COMM_PCT,
        adv.DIT_MATMUL_PCT,
        adv.FA_PCT,
        adv.VECTOR_PCT,
        adv.HOST_BOUND_PCT,
    ):
        assert f"{value:g} %" in page
    assert f"{adv.MEMORY_BOUND_RATIO:.0%}".replace("%", " %") in page
    assert "MindIE-SD pattern > quantization > sparsity > communication > generic" in page

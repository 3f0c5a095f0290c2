"""bot.model.rank on the features table built from the real MindIE-SD docs (tests/data/mindiesd-docs):
the order is advise's (priority, then strength), exclusions name their reason. Expected orders were
written by hand from references/optimization-dimensions.md and the table before running."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.features import render
from bot.features.analysis import Analysis
from bot.features.extract import build_table
from bot.model.rank import next_value, rank
from bot.model.spec import ModelSpec, SettingSpec

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"
A2, A3 = "Atlas 800I A2", "Atlas 800I A3"
SETTINGS = (
    SettingSpec("fused", (True,), "Pattern 融合"),
    SettingSpec("quant", (True,), "W8A8_DYNAMIC"),
    SettingSpec("window", (128, 64), "sparse_attention"),
    SettingSpec("fa_quant", (True,), "FP8_DYNAMIC"),
    SettingSpec("cache", (2, 4), "DitCache"),
    SettingSpec("cfg", (True,), "CFG Parallel"),
)
ALL_FIRING = {
    "compute": {"matmul_pct": 50, "attention_pct": 35, "vector_pct": 15, "compiled": False},
    "operator": {"dit_matmul_pct": 45, "fa_pct": 35, "vector_pct": 15},
    "pipeline": {"step_similarity": 0.95},
}


@pytest.fixture(scope="module")
def table():
    return render.parse(render.render(build_table(DOCS), "t"))


def spec(model: str = "Wan2.1") -> ModelSpec:
    return ModelSpec(
        project="p",
        name="m",
        dir=Path("examples/p/m"),
        features_model=model,
        benchmark=("b",),
        quality=("q",),
        min_cosine=0.99,
        settings_file=Path("examples/p/m/s.yaml"),
        settings=SETTINGS,
    )


CURRENT = {"fused": False, "quant": False, "window": 0, "fa_quant": False, "cache": 0, "cfg": False}


def test_order_follows_priority_and_excludes_hardware(table):
    r = rank(table, Analysis("hand-made", ALL_FIRING), A3, spec(), CURRENT, {})
    assert [(c.key, c.tier, c.category) for c in r.candidates] == [
        ("fused", 1, "pattern"),
        ("quant", 1, "quantization"),
        ("window", 1, "sparsity"),
        ("cache", 1, "generic"),
        ("cfg", 2, "communication"),
    ]
    assert any(
        e.startswith("fa_quant (FP8_DYNAMIC): hardware: the docs say 仅 Atlas 800I A2")
        for e in r.excluded
    )
    assert r.candidates[0].priority == "P0" and r.candidates[1].priority == "P1"
    assert r.candidates[1].citation.startswith(
        "references/mindiesd-features.md#matmul-量化 row 'W8A8_DYNAMIC'"
    )
    assert "quantization.md#" in r.candidates[1].citation


def test_on_a2_the_fa_quantization_ranks_after_the_stronger_matmul_finding(table):
    r = rank(table, Analysis("hand-made", ALL_FIRING), A2, spec(), CURRENT, {})
    keys = [c.key for c in r.candidates]
    assert keys[:3] == ["fused", "quant", "fa_quant"]  # MatMul finding 25 past its threshold, FA 5


def test_model_outside_the_support_matrix_is_ranked_with_a_warning(table):
    # advise: a model the matrix does not list has 未声明 support everywhere; nothing is excluded for it
    r = rank(table, Analysis("hand-made", ALL_FIRING), A3, spec("NoSuchModel"), CURRENT, {})
    assert [c.key for c in r.candidates] == ["fused", "quant", "window", "cache", "cfg"]
    assert any("not in the support matrix" in w for w in r.warnings)


def test_hardware_the_matrix_does_not_list_for_the_model_excludes_everything(table):
    # the matrix lists Wan2.1 on Atlas 800I A2 / A3 only: on a CPU nothing applies, not even tier 2
    r = rank(table, Analysis("hand-made", ALL_FIRING), "cpu", spec(), CURRENT, {})
    assert r.candidates == []
    assert len(r.excluded) == 6
    assert all(
        "the support matrix lists Wan2.1 only on Atlas 800I A2, Atlas 800I A3; this run is on cpu"
        in e
        for e in r.excluded
    )


def test_without_analysis_every_setting_is_tier_two_in_priority_order(table):
    r = rank(table, None, A2, spec(), CURRENT, {})
    assert [(c.key, c.tier) for c in r.candidates] == [
        ("fused", 2),
        ("quant", 2),
        ("fa_quant", 2),
        ("window", 2),
        ("cfg", 2),
        ("cache", 2),
    ]


def test_tried_values_and_values_beyond_a_quality_failure_are_skipped(table):
    s = SettingSpec("cache", (2, 3, 4, 8), "DitCache")
    assert next_value(s, 0, {}) == 2
    assert next_value(s, 2, {"cache": [(2, "better"), (4, "quality_fail")]}) == 3
    assert (
        next_value(s, 2, {"cache": [(2, "better"), (3, "not_better"), (4, "quality_fail")]}) is None
    )
    assert next_value(s, 0, {"cache": [(2, "quality_fail")]}) is None
    r = rank(
        table,
        Analysis("hand-made", ALL_FIRING),
        A3,
        spec(),
        {**CURRENT, "quant": True},
        {"quant": [(True, "better")], "fused": [(True, "not_better")]},
    )
    assert [c.key for c in r.candidates] == ["window", "cache", "cfg"]
    assert r.candidates[0].description == "window: 0 -> 128"

"""The rule of advise on every real docs layout: nothing is recommended (feature or variant) for
hardware or a model the docs exclude, across A2 / A3 / 300I Duo / A5 and models in and out of the matrix."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import third_party_corpus

from bot.features import hardware as hw
from bot.features import render
from bot.features.advise import advise, is_moe_row
from bot.features.analysis import Analysis
from bot.features.extract import build_table

EXPECTED = Path(__file__).parent / "data" / "mindiesd-layouts"
# The documents themselves are third-party and kept out of git: scripts/mindiesd_layouts.py fills them.
CORPUS = third_party_corpus("mindiesd-layouts", "newest-zh/supported_matrix.md") or EXPECTED
pytestmark = pytest.mark.skipif(
    not (CORPUS / "newest-zh").is_dir(),
    reason="MindIE-SD docs layouts not materialised: run python scripts/mindiesd_layouts.py (see its MANIFEST.txt)",
)
LAYOUTS = sorted(p.stem for p in (EXPECTED / "expected").glob("*.json"))
HARDWARE = ["A2", "Atlas 800I A3 超节点服务器", "300I Duo", "A5"]
MODELS = ["FLUX.1-dev", "Wan2.2", "Stable Diffusion 1.5", "MyMoEDiT"]
# Every branch of the decision tree fires: the widest set of candidate features.
EVERYTHING = {
    "system": {"peak_memory_gb": 63, "memory_capacity_gb": 64},
    "pipeline": {"redundant_steps": True},
    "compute": {"matmul_pct": 50, "attention_pct": 30, "compiled": False},
    "communication": {"exposed_comm_pct": 60},
    "operator": {"dit_matmul_pct": 60, "fa_pct": 40, "vector_pct": 30, "host_bound_pct": 30},
}


def excluded(table, row, hardware: str, model: str, moe: bool) -> str | None:
    """Independent statement of the rule, from the table's own cells."""
    if not hw.allows(row.hardware, hardware):
        return "hardware"
    if model in table.models:
        if table.models[model] and hardware not in table.models[model]:
            return "matrix hardware"
        if row.models is not None and model not in row.models:
            return "matrix model"
    if is_moe_row(row) and not moe:
        return "moe"
    return None


@pytest.mark.parametrize("layout", LAYOUTS)
def test_zero_recommendations_on_excluded_hardware_or_models(layout):
    table = render.parse(render.render(build_table(CORPUS / layout), "t"))
    by_key = {(r.direction, r.name): r for r in table.rows}
    checked = 0
    for hardware in HARDWARE:
        canonical = hw.normalize(hardware)
        for model in MODELS:
            for moe in (False, True):
                advice = advise(
                    table, Analysis("all", EVERYTHING), hardware, model, "f.md", moe=moe
                )
                for rec in advice.recommendations:
                    row = by_key[(rec.direction, rec.name)]
                    assert excluded(table, row, canonical, model, moe) is None, (
                        layout,
                        hardware,
                        model,
                        rec.name,
                    )
                    for name in rec.variants:
                        variant = by_key[(rec.direction, name)]
                        assert excluded(table, variant, canonical, model, moe) is None, (
                            layout,
                            hardware,
                            model,
                            name,
                        )
                    checked += 1
                if model not in table.models and advice.recommendations:
                    assert any("未声明" in w for w in advice.warnings)
    assert checked > 0


def test_a5_only_moe_quantization_is_offered_on_a5_only():
    table = render.parse(render.render(build_table(CORPUS / "newest-zh"), "t"))
    for hardware, expected in (("A5", True), ("A2", False), ("A3", False), ("300I Duo", False)):
        advice = advise(table, Analysis("all", EVERYTHING), hardware, "MyMoEDiT", "f.md", moe=True)
        fused = next(r for r in advice.recommendations if r.name == "Fused MoE")
        assert ("W8A8_MXFP8" in fused.variants) is expected, hardware
        assert ("W8A8_DYNAMIC" in fused.variants) is (hardware in ("A2", "A3")), hardware


def test_model_outside_the_matrix_gets_the_top_priority_features_with_a_warning():
    table = render.parse(render.render(build_table(CORPUS / "newest-zh"), "t"))
    advice = advise(table, Analysis("all", EVERYTHING), "A2", "MyDiT", "f.md")
    names = [r.name for r in advice.recommendations]
    assert "Pattern 融合" in names and "Linear量化" in names and "FA量化" in names
    assert advice.recommendations[0].priority == "P0"
    assert any("MyDiT" in w and "未声明" in w for w in advice.warnings)

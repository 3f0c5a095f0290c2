"""bot.features.extract on the real MindIE-SD 3.0.0 feature docs (tests/data/mindiesd-docs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.features import hardware as hw
from bot.features.extract import build_table
from bot.features.model import KIND_ALGORITHM, KIND_FEATURE, KIND_SWITCH, KIND_VALUE

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"


@pytest.fixture(scope="module")
def table():
    return build_table(DOCS)


def rows(table, **match):
    return [r for r in table.rows if all(getattr(r, k) == v for k, v in match.items())]


def test_fifteen_linear_quantization_algorithms_and_fa_fp8_dynamic(table):
    linear = rows(table, kind=KIND_ALGORITHM, parent="Linear量化")
    assert len(linear) == 15
    assert {r.name for r in linear} >= {"W8A16", "W8A8_TIMESTEP", "W4A4_MXFP4_DYNAMIC"}
    assert all(r.direction == "MatMul 量化" for r in linear)
    fa = rows(table, kind=KIND_ALGORITHM, parent="FA量化")
    assert [r.name for r in fa] == ["FP8_DYNAMIC"]
    assert all("quantize" in " ".join(r.api) for r in linear + fa)


def test_sparse_types(table):
    values = rows(table, kind=KIND_VALUE, parent="sparse_attention")
    assert {r.name for r in values} == {
        'sparse_type="rf_v2"',
        'sparse_type="rf_v3"',
        'sparse_type="ada_bsa"',
    }
    rf_v2 = next(r for r in values if r.name == 'sparse_type="rf_v2"')
    # parameters that only act for this type ride along; both docs that list it are cited
    assert set(rf_v2.params) >= {"txt_len", "latent_shape_q", "latent_shape_k"}
    assert {s.split("#")[0] for s in rf_v2.sources} == {"core_layers.md", "sparse.md"}


def test_two_cache_methods(table):
    methods = [r for r in table.rows if r.kind == KIND_VALUE and r.name.startswith("method=")]
    assert {r.name for r in methods} == {'method="attention_cache"', 'method="dit_block_cache"'}
    assert all(r.direction == "缓存加速" and r.parent == "CacheConfig" for r in methods)


def test_four_parallel_strategies(table):
    strategies = [
        r for r in rows(table, kind=KIND_FEATURE) if r.sources[0].startswith("parallelism.md")
    ]
    assert [r.name for r in strategies] == [
        "Tensor Parallel",
        "Ring Sequence Parallel",
        "Ulysses Sequence Parallel",
        "CFG Parallel",
    ]
    assert all(r.direction == "通信掩盖 / 并行" for r in strategies)


def test_five_fusion_patterns(table):
    switches = rows(table, kind=KIND_SWITCH, parent="Pattern 融合")
    assert len(switches) == 5
    assert [r.note for r in switches] == [
        "RMSNorm 融合",
        "RoPE 融合",
        "AdaLayerNorm 融合",
        "fastGELU 融合",
        "Mul+Add 融合",
    ]
    assert all(r.direction == "编译路径优化" for r in switches)


def test_first_support_table_has_29_models(table):
    first = table.matrix[0]
    assert len(first.models) == 29
    assert first.models[0] == "Stable Diffusion 1.5" and first.models[-1] == "Z-Image-Turbo"
    # model cells are links in the last table: the names, not the markdown, are kept
    assert "Wan2.1" in table.matrix[-1].models


def test_sparse_fa_supported_for_exactly_three_models(table):
    sparse_rows = [
        r for r in table.rows if "sparse" in r.name or r.sources[0].startswith("sparse.md")
    ]
    assert sparse_rows
    for row in sparse_rows:
        assert row.models == ("HunyuanVideo-1.5", "Wan2.1", "Wan2.2"), row.name


def test_fa_quantization_limited_to_atlas_800i_a2_and_no_other_limit(table):
    limited = [r for r in table.rows if r.hardware]
    assert {r.name for r in limited} == {"FA量化", "FP8_DYNAMIC"}
    for row in limited:
        assert row.hardware == (hw.HardwareLimit("仅", "Atlas 800I A2"),)


def test_every_row_cites_an_existing_heading(table):
    from bot.features import markdown as md

    anchors = {}
    for path in DOCS.glob("*.md"):
        anchors[path.name] = {s.anchor for s in md.parse(path.read_text(encoding="utf-8")).walk()}
    for row in table.rows:
        for source in row.sources:
            name, _, anchor = source.partition("#")
            assert anchor in anchors[name], source


def test_apis_come_from_import_lines_and_signatures(table):
    fwd = rows(table, name="attention_forward")[0]
    assert fwd.api[0] == "from mindiesd import attention_forward"
    assert fwd.api[1].startswith("attention_forward(query, key, value, attn_mask=None")
    offload = rows(table, name="CPU 卸载")[0]
    assert offload.api == (
        "from mindiesd.offload import enable_offload",
        "enable_offload(model, blocks, min_reserved_blocks_count=2)",
    )
    assert offload.direction == "显存优化"


def test_support_matrix_doc_is_not_a_feature_and_all_files_are_read(table):
    assert "supported_matrix.md" in table.files
    assert not any(s.startswith("supported_matrix.md") for r in table.rows for s in r.sources)
    assert {s.split("#")[0] for r in table.rows for s in r.sources} == {
        f for f in table.files if f != "supported_matrix.md"
    }
    assert table.warnings == []
    assert table.docs_version is None  # 3.0.0 docs state no version

"""bot.features.extract on modified copies of the docs: the layouts change between releases."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.features.classify import OTHER
from bot.features.extract import build_table
from bot.features.model import DocsError

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"


@pytest.fixture
def docs(tmp_path) -> Path:
    target = tmp_path / "features"
    shutil.copytree(DOCS, target)
    return target


def names(table) -> set[str]:
    return {r.name for r in table.rows}


def test_renamed_file_is_a_warning_and_its_features_stay(docs):
    before = build_table(docs)
    (docs / "cache.md").rename(docs / "caching.md")
    after = build_table(docs, previous_files=before.files)
    assert any("cache.md" in w and "missing" in w for w in after.warnings)
    assert {"DitCache", "AttentionCache"} <= names(after)
    assert any(s.startswith("caching.md#") for r in after.rows for s in r.sources)


def test_missing_file_is_a_warning_not_a_crash(docs):
    (docs / "core_layers.md").unlink()
    table = build_table(docs)
    assert any("sparse.md links to core_layers.md" in w for w in table.warnings)
    assert "attention_forward" not in names(table)
    assert {"Linear量化", "rf_v2（RainFusion2.0）"} <= names(table)


def test_missing_support_matrix_leaves_models_undeclared(docs):
    (docs / "supported_matrix.md").unlink()
    table = build_table(docs)
    assert all(r.models is None for r in table.rows)
    assert any("support-matrix" in w for w in table.warnings)


def test_unknown_file_lands_under_other_features(docs):
    (docs / "magic_boost.md").write_text(
        "# 神秘加速\n\n一种新特性。\n\n```python\n# 不是标题\nfrom mindiesd.magic import boost\n```\n\n"
        "| 参数 | 必选 | 说明 |\n|---|---|---|\n| `level` | 是 | 力度 |\n",
        encoding="utf-8",
    )
    table = build_table(docs)
    row = next(r for r in table.rows if r.name == "神秘加速")
    assert row.direction == OTHER
    assert row.api == ("from mindiesd.magic import boost",)
    assert row.params == ("level",)
    assert row.sources == ("magic_boost.md#神秘加速",)
    assert "不是标题" not in names(table)


def test_file_without_title_is_named_by_its_file(docs):
    (docs / "notes_only.md").write_text("Some text without any heading.\n", encoding="utf-8")
    table = build_table(docs)
    assert any(r.name == "notes_only" and r.sources == ("notes_only.md",) for r in table.rows)


def test_empty_or_missing_docs_dir_is_a_clear_error(tmp_path):
    with pytest.raises(DocsError, match="does not exist"):
        build_table(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.txt").write_text("x")
    with pytest.raises(DocsError, match=r"no \*\.md"):
        build_table(tmp_path / "empty")
    assert DocsError.exit_code == 2


def test_support_table_layout_change_is_read_by_column_name(docs):
    path = docs / "supported_matrix.md"
    text = path.read_text(encoding="utf-8")
    old_header = " |   模型     |  硬件  | Cache   | 并行 | 稀疏FA | 量化 | 融合算子 | 说明 |"
    assert old_header in text
    lines = text.split("\n")
    out = []
    for line in lines:
        cells = line.strip().strip("|").split("|") if line.lstrip().startswith("|") else None
        if (
            cells and len(cells) == 8
        ):  # the last table: move 稀疏FA to the end, drop the leading space
            cells = cells[:4] + cells[5:] + [cells[4]]
            out.append("|" + "|".join(c.replace("✅️", "✔").replace("✖️", "✘") for c in cells) + "|")
        else:
            out.append(line)
    path.write_text("\n".join(out), encoding="utf-8")
    table = build_table(docs)
    sparse = next(r for r in table.rows if r.name == "sparse_attention")
    assert sparse.models == ("HunyuanVideo-1.5", "Wan2.1", "Wan2.2")
    assert table.matrix[-1].columns[-1] == "稀疏FA"


def test_algorithm_table_with_changed_columns_still_yields_every_algorithm(docs):
    path = docs / "quantization.md"
    text = path.read_text(encoding="utf-8")
    text = text.replace(
        "| 算法 | 权重精度 | 说明 |\n|------|----------|------|",
        " | 算法 | 说明 | 权重精度 | 备注 |\n |:--|:--|:--|:--|",
    )
    path.write_text(text, encoding="utf-8")
    table = build_table(docs)
    assert len([r for r in table.rows if r.parent == "Linear量化" and r.kind == "算法"]) == 15


def test_hardware_spelling_variants_and_invented_limits(docs):
    path = docs / "cpu_offload.md"
    text = path.read_text(encoding="utf-8")
    text += (
        "\n- 硬件要求：仅 Atlas 800I A3 超节点服务器支持。\n"
        "- 在 Atlas 300I DUO 推理卡上默认算力 280T。\n"
    )
    path.write_text(text, encoding="utf-8")
    (docs / "share_memory.md").write_text(
        (docs / "share_memory.md").read_text(encoding="utf-8")
        + "\n本特性不支持Atlas 300I Duo推理卡。\n",
        encoding="utf-8",
    )
    table = build_table(docs)
    offload = next(r for r in table.rows if r.name == "CPU 卸载")
    assert [lim.render() for lim in offload.hardware] == [
        "仅 Atlas 800I A3"
    ]  # the 280T mention is no limit
    share = next(r for r in table.rows if r.name == "显存共享")
    assert [lim.render() for lim in share.hardware] == ["不支持 Atlas 300I DUO"]


def test_stated_docs_version_and_nested_layout(docs):
    nested = docs / "zh" / "features"
    nested.mkdir(parents=True)
    (docs / "sparse.md").rename(nested / "sparse.md")
    (docs / "cache.md").write_text(
        "> 文档版本：3.1.0\n\n" + (docs / "cache.md").read_text(encoding="utf-8"), encoding="utf-8"
    )
    table = build_table(docs)
    assert table.docs_version == "3.1.0"
    assert any(s.startswith("zh/features/sparse.md#") for r in table.rows for s in r.sources)


def test_truncated_docs_never_crash(docs):
    """Docs cut off anywhere (half a table, an open code fence) still build, and keep every file."""
    import random

    rng = random.Random(6)
    originals = {p: p.read_text(encoding="utf-8") for p in sorted(docs.glob("*.md"))}
    for _ in range(4):
        for path, text in originals.items():
            lines = text.split("\n")
            path.write_text("\n".join(lines[: rng.randrange(1, len(lines) + 1)]), encoding="utf-8")
        table = build_table(docs)
        assert {s.split("#")[0] for r in table.rows for s in r.sources} | {
            "supported_matrix.md"
        } >= {p.name for p in originals if p.name != "supported_matrix.md"}


def test_all_features_in_one_file_one_level_deeper(docs, tmp_path):
    """An older layout kept every feature in one document under one title: same rows come out."""
    import re

    expected = build_table(docs)
    merged = tmp_path / "merged"
    merged.mkdir()
    parts = ["# MindIE SD 特性介绍\n"]
    for path in sorted(docs.glob("*.md")):
        if path.name == "supported_matrix.md":
            shutil.copy(path, merged / path.name)
            continue
        lines, fence = [], False
        for line in path.read_text(encoding="utf-8").split("\n"):
            fence ^= line.strip().startswith("```")
            lines.append("#" + line if not fence and re.match(r"^#{1,5} ", line) else line)
        parts.append("\n".join(lines))
    (merged / "features.md").write_text("\n\n".join(parts), encoding="utf-8")
    table = build_table(merged)
    assert {(r.direction, r.name, r.kind) for r in table.rows} == {
        (r.direction, r.name, r.kind) for r in expected.rows
    }
    assert {r.name for r in table.rows if r.hardware} == {"FA量化", "FP8_DYNAMIC"}


def test_cross_reference_stub_merges_into_its_target_and_heading_hardware_limits(docs):
    (docs / "memory.md").write_text(
        "# 显存优化\n\n## 量化\n\n参考轻量化算法章节：[FA量化](./quantization.md#fa量化)\n\n"
        "## 显存压缩（A2/A3）\n\n一种压缩。\n",
        encoding="utf-8",
    )
    table = build_table(docs)
    assert "量化" not in names(table)
    fa = next(r for r in table.rows if r.name == "FA量化")
    assert "memory.md#量化" in fa.sources and [lim.render() for lim in fa.hardware] == [
        "仅 Atlas 800I A2"
    ]
    squeeze = next(r for r in table.rows if r.name == "显存压缩（A2/A3）")
    assert sorted(lim.render() for lim in squeeze.hardware) == [
        "仅 Atlas 800I A2",
        "仅 Atlas 800I A3",
    ]


def test_stub_to_a_missing_target_stays_a_row_with_a_warning(docs):
    (docs / "memory.md").write_text(
        "# 显存优化\n\n## 量化\n\n参考：[X](./gone.md#x)\n\n## 压缩\n\n压缩。\n", encoding="utf-8"
    )
    table = build_table(docs)
    assert "量化" in names(table) and any(
        "memory.md#量化 points to gone.md#x" in w for w in table.warnings
    )

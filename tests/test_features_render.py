"""bot.features.render: the features file is deterministic, parseable, and diffs by row."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from bot.features import render
from bot.features.extract import build_table

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"
REFERENCE = Path(__file__).parent.parent / "references" / "mindiesd-features.md"


def _body(text: str) -> str:
    """The file without its header facts (time, commit, docs dir differ with where it was built)."""
    return re.sub(r"^- (同步时间|来源提交|文档目录): .*$", "", text, flags=re.M)


def test_same_input_gives_byte_identical_output_apart_from_sync_time(tmp_path):
    copy = tmp_path / "docs"
    shutil.copytree(DOCS, copy)
    one = render.render(build_table(DOCS), "2026-01-01T00:00:00Z")
    two = render.render(build_table(copy), "2026-02-02T00:00:00Z")
    assert one != two
    assert _body(one) == _body(two)
    assert render.render(build_table(DOCS), "2026-01-01T00:00:00Z") == one


def test_sync_time_is_kept_when_nothing_else_changed():
    table = build_table(DOCS)
    first = render.render(table, "2026-01-01T00:00:00Z")
    again = render.render(table, "2030-01-01T00:00:00Z", previous=first)
    assert again is first
    changed = dataclasses.replace(table, rows=table.rows[1:])
    assert "2030-01-01T00:00:00Z" in render.render(changed, "2030-01-01T00:00:00Z", previous=first)


def test_parse_reads_back_every_row_and_the_header():
    table = build_table(DOCS)
    parsed = render.parse(render.render(table, "2026-01-01T00:00:00Z"))
    assert parsed.rows == table.rows
    assert parsed.files == table.files
    assert parsed.meta["docs_version"] == "未声明"
    assert len(parsed.models) == 29 and parsed.models["Wan2.1"] == [
        "Atlas 800I A2",
        "Atlas 800I A3",
    ]
    assert parsed.anchors["通信掩盖 / 并行"] == "通信掩盖--并行"


def test_diff_counts_added_removed_changed_rows():
    table = build_table(DOCS)
    old = table.rows
    new = [
        dataclasses.replace(r, models=()) if r.name == "DitCache" else r
        for r in old
        if r.name != "W8A16"
    ]
    new.append(dataclasses.replace(old[0], name="W2A2"))
    d = render.diff(old, new)
    assert [r.name for r in d.added] == ["W2A2"]
    assert [r.name for r in d.removed] == ["W8A16"]
    assert [(n.name, cols) for _, n, cols in d.changed] == [("DitCache", ["支持模型"])]
    text = render.summarize(d)
    assert text.startswith("新增 1 行，删除 1 行，变更 1 行。") and "DitCache: 支持模型" in text
    assert render.diff(old, old).empty


def test_committed_reference_is_current():
    """references/mindiesd-features.md is what the generator makes of the docs in tests/data."""
    fresh = render.render(build_table(DOCS), "x")
    assert _body(REFERENCE.read_text(encoding="utf-8")) == _body(fresh), (
        "regenerate: tunebot refresh-features --docs-dir tests/data/mindiesd-docs"
    )

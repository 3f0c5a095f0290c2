"""bot.features.refresh: regenerate the file in place."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.features.refresh import refresh_file

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"


def test_refresh_writes_then_keeps_the_file(tmp_path):
    out = tmp_path / "references" / "mindiesd-features.md"
    first = refresh_file(DOCS, out, now="2026-01-01T00:00:00Z")
    assert first.changed and out.exists() and len(first.diff.added) == len(first.table.rows)
    before = out.read_bytes()
    second = refresh_file(DOCS, out, now="2026-05-05T00:00:00Z")
    assert not second.changed and out.read_bytes() == before
    assert "2026-01-01T00:00:00Z" in out.read_text(encoding="utf-8")


def test_refresh_reports_rows_and_missing_files(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    out = tmp_path / "features.md"
    refresh_file(docs, out, now="t1")
    (docs / "DyEPLB.md").unlink()
    result = refresh_file(docs, out, now="t2")
    assert result.changed
    assert [r.name for r in result.diff.removed] == ["动态专家负载均衡"]
    assert any("DyEPLB.md" in w and "missing" in w for w in result.table.warnings)
    assert "DyEPLB.md" in out.read_text(encoding="utf-8")  # the warning is in the file too

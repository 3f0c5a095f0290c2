"""Every bad input to refresh-features / advise exits 2 with a message naming the problem (real files, real CLI)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.features import markdown as md

DOCS = Path(__file__).parent / "data" / "mindiesd-docs"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def docs(tmp_path) -> Path:
    target = tmp_path / "features"
    shutil.copytree(DOCS, target)
    return target


def refresh(docs: Path, out: Path):
    return invoke("refresh-features", "--docs-dir", str(docs), "--output", str(out))


def assert_refused(result, *words):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for w in words:
        assert w in result.output, result.output


def test_binary_md_is_refused(docs, tmp_path):
    (docs / "blob.md").write_bytes(bytes(range(256)) * 8)
    assert_refused(refresh(docs, tmp_path / "o.md"), "blob.md", "binary")
    assert not (tmp_path / "o.md").exists()


def test_gbk_doc_is_refused_not_silently_lossy(docs, tmp_path):
    (docs / "gbk.md").write_bytes(
        "# 量化\n\n- 限制与约束：仅Atlas 800I A2 推理服务器支持此特性。\n".encode("gbk")
    )
    assert_refused(refresh(docs, tmp_path / "o.md"), "gbk.md", "UTF-8", "GB18030")


@pytest.mark.parametrize(
    "table",
    [
        "| 算法 | 说明 |\n| W8A8 | x |\n| W4A4 | y |\n",  # no separator row
        "| 算法 | 说明 |\n|---|\n| W8A8 | x |\n",  # separator with the wrong column count
    ],
)
def test_broken_table_is_refused_with_its_line(docs, tmp_path, table):
    (docs / "broken.md").write_text("# 新特性\n\n" + table, encoding="utf-8")
    assert_refused(refresh(docs, tmp_path / "o.md"), "broken.md:3", "table")


def test_huge_files_and_tables_fail_fast_and_clearly(docs, tmp_path):
    big = docs / "big.md"
    with big.open("w", encoding="utf-8") as f:
        f.write("# x\n\n")
        f.write(("段落文字。" * 60 + "\n\n") * (md.MAX_DOC_BYTES // 900 + 10))
    start = time.process_time()
    assert_refused(refresh(docs, tmp_path / "o.md"), "big.md", "byte limit")
    big.write_text(
        "# t\n\n| 算法 | 说明 |\n|---|---|\n" + "| a | b |\n" * (md.MAX_TABLE_ROWS + 1),
        encoding="utf-8",
    )
    assert_refused(refresh(docs, tmp_path / "o.md"), "big.md", "rows")
    assert time.process_time() - start < 60  # a guard against quadratic parsing, not a speed figure


def test_output_that_is_a_directory_or_not_utf8(docs, tmp_path):
    assert_refused(refresh(docs, tmp_path), "is a directory")
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    assert_refused(refresh(docs, bad), "not UTF-8")


def test_advise_features_not_utf8(tmp_path):
    features = tmp_path / "f.md"
    features.write_bytes("# 表\n".encode("utf-16"))
    report = tmp_path / "a.json"
    report.write_text(json.dumps({"schema": "tunebot.analysis/v1", "layers": {}}), encoding="utf-8")
    result = invoke(
        "advise",
        "--report",
        str(report),
        "--hardware",
        "A2",
        "--model",
        "Wan2.1",
        "--features",
        str(features),
    )
    assert_refused(result, "not UTF-8")

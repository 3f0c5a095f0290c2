"""benchmarks/corpus_rewrites.py: its rewrites keep a kernel's meaning and lines, and its
comparison flags a changed judgement while reading a rewrite's own spelling back."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from test_strategies_spelling import GEMM

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import corpus_rewrites as cr  # noqa: E402

NAMES = {"block_M", "block_N", "bm"}
LINES = {7, 39}


@pytest.mark.parametrize("which", sorted(set(cr.REWRITES) - {"none"}))
def test_each_rewrite_changes_the_text_and_keeps_lines_and_meaning(which):
    out = cr.REWRITES[which](GEMM, NAMES, LINES)
    assert out is not None and out != GEMM
    ast.parse(out)
    if which == "decoy":  # appended after the last line: every line stays where it was
        assert out.splitlines()[: len(GEMM.splitlines())] == GEMM.splitlines()
        assert "def _unrelated_helper():\n    block_M = 7\n" in out
    else:
        assert len(out.splitlines()) == len(GEMM.splitlines())


def test_annotations_stay_out_of_prim_funcs_and_fit_the_literal():
    out = cr.REWRITES["annotate_all"](GEMM, set(), set())
    assert out is not None
    assert 'dtype: str="float16"' in out and "bm: int = 128" in out
    prim = out[out.index("@T.prim_func") : out.index("return main")]
    assert ": int" not in prim and ": str" not in prim


def test_a_rewrite_that_does_not_apply_says_so():
    plain = GEMM.replace("import tilelang.language as T\n", "from tilelang import language as T\n")
    assert cr.REWRITES["from_import"](plain, NAMES, LINES) is None
    assert (
        cr.REWRITES["alias"](GEMM.replace("T.", "TL.").replace("as T", "as TL"), NAMES, LINES)
        is None
    )


def _row(**items):
    tally = {k: 0 for k in ("produced", "correct", "refused")}
    tally.update({k: [] for k in cr.KEYS if k not in tally})
    tally.update(items)
    return {"first": dict(tally), "every": dict(tally)}


def test_compare_reads_the_spelling_back_and_flags_real_changes():
    base = {
        "a": _row(breaking=["a: block_M: `T.ceildiv(M, block_M)`"]),
        "b": _row(correct=2),
        "c": {"skipped": "not materialised"},
    }
    rewritten = {
        "a": _row(breaking=["a: block_M: `TL.ceildiv(M, block_M)`"]),  # the same item, respelled
        "b": _row(correct=1, noop=["b: block_N: 64 -> 32"]),
        "c": _row(),
    }
    result = cr.compare(base, rewritten)
    assert result["judged"] == 2 and result["crashed"] == []
    assert list(result["differ"]) == ["b"]
    assert "first correct: 2 -> 1" in result["differ"]["b"]
    assert "every noop new: b: block_N: 64 -> 32" in result["differ"]["b"]


def test_unknown_kernels_are_a_usage_error(tmp_path, capsys):
    assert cr.main(["alias", "no_such_kernel", "--json", str(tmp_path / "o.json")]) == 2
    assert "no_such_kernel" in capsys.readouterr().err

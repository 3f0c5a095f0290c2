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


# The kernel each rewrite is tried on: GEMM, or GEMM where that rewrite has nothing to change
# (its factory is decorated; its dtypes are strings already).
PLAIN = GEMM.replace("@tilelang.jit(", "JIT = dict(")
TYPED = GEMM.replace(
    'dtype="float16", accum_dtype="float32"', "dtype=T.float16, accum_dtype=T.float32"
)
BIG = GEMM.replace("matmul(1024, 1024, 1024, bm, bn)", "matmul(8192, 1024, 2048, bm, bn)")
SOURCES = {"kwargs": PLAIN, "dtype_str": TYPED, "kilo": BIG}


@pytest.mark.parametrize("which", sorted(set(cr.REWRITES) - {"none"}))
def test_each_rewrite_changes_the_text_and_keeps_lines_and_meaning(which):
    src = SOURCES.get(which, GEMM)
    out = cr.REWRITES[which](src, NAMES, LINES)
    assert out is not None and out != src
    ast.parse(out)
    if which == "decoy":  # appended after the last line: every line stays where it was
        assert out.splitlines()[: len(src.splitlines())] == src.splitlines()
        assert "def _unrelated_helper():\n    block_M = 7\n" in out
    else:
        assert len(out.splitlines()) == len(src.splitlines())


def test_keywords_go_only_to_plain_functions_bound_once():
    out = cr.REWRITES["kwargs"](PLAIN, NAMES, LINES)
    assert out is not None and "matmul(M=1024, N=1024, K=1024, block_M=bm, block_N=bn)" in out
    assert cr.REWRITES["kwargs"](GEMM, NAMES, LINES) is None  # @tilelang.jit may wrap the signature
    rebound = PLAIN.replace("    main()\n", "    matmul = print\n    main()\n")
    assert cr.REWRITES["kwargs"](rebound, NAMES, LINES) is None


def test_keyword_order_changes_only_one_line_calls_free_of_calls():
    out = cr.REWRITES["kwarg_order"](GEMM, NAMES, LINES)
    assert out is not None
    assert (
        '@tilelang.jit(pass_configs={"npuir.enable_auto_multi_buffer": False}, target="npuir")'
        in out
    )
    spread = "f(\n    a=1,\n    b=2,\n)\ng(a=h(), b=2)\n"
    assert cr.REWRITES["kwarg_order"](spread, NAMES, LINES) is None


def test_tl_alias_leaves_imports_and_attributes_alone():
    out = cr.REWRITES["tl_alias"](GEMM + "x = T.tilelang.y\n", NAMES, LINES)
    assert out is not None
    assert out.startswith("import tilelang as tl\nimport tilelang.language as T\n")
    assert "@tl.jit(" in out and "T.tilelang.y" in out
    assert cr.REWRITES["tl_alias"](GEMM.replace("bm = 128", "tl = 128"), NAMES, LINES) is None


def test_digits_and_dtypes_respell_values_only():
    assert "if N > 4_096:" in (cr.REWRITES["digits"](GEMM, NAMES, LINES) or "")
    out = cr.REWRITES["dtype_str"](
        TYPED + "def f(n: T.int32):\n    return T.float16(n)\n", NAMES, LINES
    )
    assert out is not None and 'dtype="float16", accum_dtype="float32"' in out
    assert "n: T.int32" in out and "T.float16(n)" in out  # an annotation and a call stay


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
        "d": _row(noop=['d: block_N: 1024 -> 2048 in tilelang.jit(dtype="float16")']),
    }
    rewritten = {
        "a": _row(breaking=["a: block_M: `TL.ceildiv(M, block_M)`"]),  # the same item, respelled
        "d": _row(noop=["d: block_N: 1_024 -> 2_048 in tl.jit(dtype=T.float16)"]),
        "b": _row(correct=1, noop=["b: block_N: 64 -> 32"]),
        "c": _row(),
    }
    result = cr.compare(base, rewritten)
    assert result["judged"] == 3 and result["crashed"] == []
    assert list(result["differ"]) == ["b"]
    assert "first correct: 2 -> 1" in result["differ"]["b"]
    assert "every noop new: b: block_N: 64 -> 32" in result["differ"]["b"]


def test_unknown_kernels_are_a_usage_error(tmp_path, capsys):
    assert cr.main(["alias", "no_such_kernel", "--json", str(tmp_path / "o.json")]) == 2
    assert "no_such_kernel" in capsys.readouterr().err


def test_tuple_bind_merges_literal_runs_outside_prim_funcs_and_says_where_they_went():
    lines = GEMM.splitlines()
    bm, bn = lines.index("    bm = 128") + 1, lines.index("    bn = 256") + 1
    out = cr.REWRITES["tuple_bind"](GEMM, NAMES, LINES)
    assert out is not None
    assert out.splitlines()[bm - 1] == "    bm, bn = 128, 256" and out.splitlines()[bn - 1] == ""
    assert cr.tuple_bind_moves(GEMM) == {bn: bm}
    # a name read by the next value, a comment, or a @prim_func body: left as written
    for src in (
        "a = 1\nb = a\n",
        "a = 1  # why\nb = 2\n",
        "@T.prim_func\ndef k():\n    a = 1\n    b = 2\n",
        "a = 1\na = 2\n",
    ):
        assert cr.REWRITES["tuple_bind"](src, set(), set()) is None, src


def test_kilo_respells_whole_values_off_the_knob_lines():
    src = "M = 8192\nblock_M = 2048\nx = 4096 // 2\ny = f(3072, n=2048)\nif M > 4096:\n    pass\n"
    out = cr.REWRITES["kilo"](src, {"block_M"}, set())
    assert out == (
        "M = 8 * 1024\nblock_M = 2048\nx = 4096 // 2\ny = f(3 * 1024, n=2 * 1024)\n"
        "if M > 4096:\n    pass\n"
    )
    assert cr.REWRITES["kilo"]("M = 1024\nN = 2000\n", set(), set()) is None


def test_compare_reads_moved_lines_back():
    base = {"a": _row(missed_knobs=["a: bn (line 9)"])}
    moved = {**_row(missed_knobs=["a: bn (line 8)"]), "moved": {"9": 8}}
    assert cr.compare(base, {"a": moved})["differ"] == {}
    assert cr.compare(base, {"a": {**moved, "moved": {}}})["differ"] != {}


def test_a_moved_binding_moves_the_expectations_knob_and_pipeline_lines():
    exp = {
        "block_size": {"bn": {"line": 9, "value": 256, "valid": {}}},
        "pipeline": [{"line": 9, "value": 2, "valid": [1, 2]}, {"line": 20, "value": 2}],
    }
    out = cr._moved_expectation(exp, {9: 8})
    assert out["block_size"]["bn"]["line"] == 8
    assert [p["line"] for p in out["pipeline"]] == [8, 20]
    assert exp["block_size"]["bn"]["line"] == 9  # the corpus's own expectation is left alone


def test_tabs_and_crlf_change_only_layout():
    for which in ("tabs", "crlf"):
        out = cr.REWRITES[which](GEMM, NAMES, LINES)
        assert out is not None
        assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(GEMM)), which
    tabbed = cr.tabs(GEMM, NAMES, LINES)
    assert tabbed is not None and "\n\t\t" in tabbed
    assert cr.tabs(tabbed, NAMES, LINES) is None  # already tab-indented
    crlf = cr.crlf(GEMM, NAMES, LINES)
    assert crlf is not None and crlf.count("\r\n") == GEMM.count("\n")
    assert cr.crlf(crlf, NAMES, LINES) is None

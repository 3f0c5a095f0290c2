"""V-prefix renames: style only, every aliased npuir_ call renamed, nothing else."""

from pathlib import Path

import libcst as cst

from bot.strategies import catalog
from bot.strategies.base import Refusal, Variant
from bot.strategies.source import changed_lines
from bot.strategies.vprefix import ALIASES, rename

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tilelang"


def test_alias_table_is_v_prefixed_and_one_to_one():
    assert all(v.startswith("v") and k.startswith("npuir_") for k, v in ALIASES.items())
    assert len(set(ALIASES.values())) == len(ALIASES)
    assert ALIASES["npuir_add"] == "vadd" and ALIASES["npuir_vtanh"] == "vtanh"


def test_renames_calls_only_and_keeps_the_rest(upstream_tilelang):
    src = (EXAMPLES / "flash_attention" / "flash_attention.py").read_text()
    v = rename(src)
    assert isinstance(v, Variant), v
    pairs = changed_lines(src, v.source)
    assert pairs and all(old.replace("T.npuir_", "T.v", 1) == new for old, new in pairs)
    assert "T.npuir_" not in v.source
    assert v.source.count("T.reduce_max") == src.count("T.reduce_max")  # no alias: untouched
    cst.parse_module(v.source)
    assert v.change.strategy == "vprefix" and catalog.is_style("vprefix")


def test_alias_of_the_language_module_is_respected(upstream_tilelang):
    src = "from tilelang import language as L\nL.npuir_exp(a, b)\nT.npuir_exp(a, b)\n"
    v = rename(src)
    assert isinstance(v, Variant)
    assert v.source == "from tilelang import language as L\nL.vexp(a, b)\nT.npuir_exp(a, b)\n"


def test_nothing_to_rename_refuses(upstream_tilelang):
    src = (EXAMPLES / "gemm_expert" / "gemm_expert.py").read_text()
    r = rename(src)
    assert isinstance(r, Refusal) and "no T.npuir_" in r.reason
    r = rename("import tilelang.language as T\nT.npuir_load_nd2nz(a, b)\n")  # no v-alias upstream
    assert isinstance(r, Refusal)


def test_deterministic(upstream_tilelang):
    src = (EXAMPLES / "rms_norm" / "rms_norm.py").read_text()
    assert rename(src) == rename(src)
    assert isinstance(rename(rename(src).source), Refusal)  # type: ignore[union-attr]


# --- with no TileLang installed, the file's own v-calls date its tree


def test_nothing_installed_and_no_v_call_refuses_with_why():
    src = "import tilelang.language as T\nT.npuir_add(a, b, c)\nT.npuir_cmp(a, b, c)\n"
    r = rename(src)
    assert isinstance(r, Refusal), r
    assert "no NPUIR TileLang is installed" in r.reason and "vadd, vcmp" in r.reason


def test_the_file_s_own_v_calls_allow_the_aliases_of_their_batch_and_earlier():
    # vcmp came with the February batch: vadd (January) exists there, vpow (March) may not
    src = (
        "import tilelang.language as T\nT.vcmp(a, b, c)\nT.npuir_add(a, b, c)\n"
        "T.npuir_pow(a, b, c)\n"
    )
    v = rename(src)
    assert isinstance(v, Variant), v
    assert "T.vadd(a, b, c)" in v.source and "T.npuir_pow(a, b, c)" in v.source
    assert v.change.old == ["npuir_add"]
    # a call of a March alias dates the tree to March: vpow too
    v = rename(src.replace("T.vcmp", "T.vsqrt"))
    assert isinstance(v, Variant) and "T.vpow(a, b, c)" in v.source, v
    # only an op of a later batch than the file shows: refused, naming the date
    r = rename("import tilelang.language as T\nT.vadd(a, b, c)\nT.npuir_pow(a, b, c)\n")
    assert isinstance(r, Refusal) and "7ce8b2e (2026-01-19)" in r.reason, r
    assert "npuir_pow only later" in r.reason


def test_vsigmoid_dates_a_tree_only_to_its_first_spelling():
    # `npuir_vsigmoid as vsigmoid` came on 2026-02-04, before the February batch's vabs
    src = "import tilelang.language as T\nT.vsigmoid(a, b)\nT.npuir_clamp(a)\nT.npuir_abs(a)\n"
    v = rename(src)
    assert isinstance(v, Variant), v
    assert "T.vclamp(a)" in v.source and "T.npuir_abs(a)" in v.source


def test_a_v_name_on_another_object_dates_nothing():
    src = "import tilelang.language as T\nops.vadd(a, b, c)\nT.npuir_add(a, b, c)\n"
    assert isinstance(rename(src), Refusal)


def test_the_batches_cover_the_alias_table_once_in_date_order():
    from bot.strategies.vprefix import _BATCHES, SINCE

    assert set(SINCE) == set(ALIASES.values())
    assert sum(len(names) for _, _, names in _BATCHES) == len(ALIASES)
    dates = [date for date, _, _ in _BATCHES]
    assert dates == sorted(dates)

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


def test_the_file_s_own_v_calls_allow_only_what_every_tree_with_them_has():
    # every known tree with vcmp has vadd (January) but not all have vpow (March)
    src = (
        "import tilelang.language as T\nT.vcmp(a, b, c)\nT.npuir_add(a, b, c)\n"
        "T.npuir_pow(a, b, c)\n"
    )
    v = rename(src)
    assert isinstance(v, Variant), v
    assert "T.vadd(a, b, c)" in v.source and "T.npuir_pow(a, b, c)" in v.source
    assert v.change.old == ["npuir_add"]
    # a March alias: every tree with it has vpow too
    v = rename(src.replace("T.vcmp", "T.vsqrt"))
    assert isinstance(v, Variant) and "T.vpow(a, b, c)" in v.source, v
    # only an op no tree with the file's v-calls is sure to alias: refused, naming them
    r = rename("import tilelang.language as T\nT.vadd(a, b, c)\nT.npuir_pow(a, b, c)\n")
    assert isinstance(r, Refusal) and "vpow: not every known upstream tree" in r.reason, r
    assert "T.vadd" in r.reason


def test_a_pull_request_tree_with_a_later_alias_alone_proves_no_batch_before_it():
    # pull request 524's head has vmin and vexp2 on a tree without the earlier vcmp
    src = "import tilelang.language as T\nT.vmin(a, b, c)\nT.npuir_cmp(a, b, c)\n"
    assert isinstance(rename(src), Refusal)
    # pull request 522's head has vnot without the other March aliases
    src = "import tilelang.language as T\nT.vnot(a, b)\nT.npuir_pow(a, b, c)\n"
    assert isinstance(rename(src), Refusal)


def test_vsigmoid_does_not_vouch_for_its_own_later_spelling():
    # `npuir_vsigmoid as vsigmoid` came first: a tree calling vsigmoid may lack npuir_sigmoid's
    src = "import tilelang.language as T\nT.vsigmoid(a, b)\nT.npuir_clamp(a)\nT.npuir_sigmoid(a)\n"
    v = rename(src)
    assert isinstance(v, Variant), v
    assert "T.vclamp(a)" in v.source and "T.npuir_sigmoid(a)" in v.source


def test_a_v_name_not_called_on_the_language_module_dates_nothing():
    for src in (
        "import tilelang.language as T\nops.vadd(a, b, c)\nT.npuir_add(a, b, c)\n",
        "import tilelang.language as T\nf = T.vadd\nT.npuir_add(a, b, c)\n",  # no call
        "import tilelang.language as T\n# T.vadd(a, b, c)\nT.npuir_add(a, b, c)\n",
    ):
        assert isinstance(rename(src), Refusal), src


def test_a_v_call_in_any_spelling_of_the_module_counts():
    for head in (
        "from tilelang.language import vmul\nvmul(a, b, c)\n",
        "import tilelang\ntilelang.language.vmul(a, b, c)\n",
        "from tilelang import language as L\nL.vmul(a, b, c)\n",
    ):
        src = head + "import tilelang.language as T\nT.npuir_add(a, b, c)\n"
        v = rename(src)
        assert isinstance(v, Variant) and "T.vadd(a, b, c)" in v.source, (head, v)


def test_a_file_that_tests_for_an_alias_by_name_is_not_renamed():
    src = (
        "import tilelang.language as T\nT.vmul(a, b, c)\n"
        "add = T.vadd if hasattr(T, 'vadd') else T.npuir_add\nT.npuir_add(a, b, c)\n"
    )
    r = rename(src)
    assert isinstance(r, Refusal) and "tests for vadd itself" in r.reason, r
    # a label that only names the op (a pytest marker) tests for nothing
    labelled = src.replace(
        "add = T.vadd if hasattr(T, 'vadd') else T.npuir_add\n", 'mark("vadd")\n'
    )
    assert isinstance(rename(labelled), Variant)


def test_the_implied_table_covers_the_alias_table_and_vouches_for_each_name_s_own_op():
    from bot.strategies.vprefix import IMPLIED

    assert set(IMPLIED) == set(ALIASES.values())
    for v, ops in IMPLIED.items():
        assert set(ops) <= set(ALIASES) and len(set(ops)) == len(ops)
        own = [k for k, a in ALIASES.items() if a == v]
        assert own[0] in ops or v == "vsigmoid", v

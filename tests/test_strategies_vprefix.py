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


def test_renames_calls_only_and_keeps_the_rest():
    src = (EXAMPLES / "flash_attention" / "flash_attention.py").read_text()
    v = rename(src)
    assert isinstance(v, Variant), v
    pairs = changed_lines(src, v.source)
    assert pairs and all(old.replace("T.npuir_", "T.v", 1) == new for old, new in pairs)
    assert "T.npuir_" not in v.source
    assert v.source.count("T.reduce_max") == src.count("T.reduce_max")  # no alias: untouched
    cst.parse_module(v.source)
    assert v.change.strategy == "vprefix" and catalog.is_style("vprefix")


def test_alias_of_the_language_module_is_respected():
    src = "from tilelang import language as L\nL.npuir_exp(a, b)\nT.npuir_exp(a, b)\n"
    v = rename(src)
    assert isinstance(v, Variant)
    assert v.source == "from tilelang import language as L\nL.vexp(a, b)\nT.npuir_exp(a, b)\n"


def test_nothing_to_rename_refuses():
    src = (EXAMPLES / "gemm_expert" / "gemm_expert.py").read_text()
    r = rename(src)
    assert isinstance(r, Refusal) and "no T.npuir_" in r.reason
    r = rename("import tilelang.language as T\nT.npuir_load_nd2nz(a, b)\n")  # no v-alias upstream
    assert isinstance(r, Refusal)


def test_deterministic():
    src = (EXAMPLES / "rms_norm" / "rms_norm.py").read_text()
    assert rename(src) == rename(src)
    assert isinstance(rename(rename(src).source), Refusal)  # type: ignore[union-attr]

"""Multi-buffer pass config: toggled where set, added where absent, mode-aware."""

from pathlib import Path

import libcst as cst
import pytest
from conftest import install_tilelang

from bot.strategies.base import Refusal, Variant
from bot.strategies.multibuffer import (
    FLAG,
    current,
    default_enabled,
    developer_mode,
    ignored_by_installed,
    set_flag,
)
from bot.strategies.source import changed_lines

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tilelang"


def kernel(name: str) -> str:
    return (EXAMPLES / name / f"{name}.py").read_text()


def test_existing_attribute_key_is_toggled():
    src = kernel("gemm_expert")
    assert current(src) is False
    v = set_flag(src, True)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [
        (
            "    tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,",
            "    tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: True,",
        )
    ]
    assert current(v.source) is True


def test_absent_flag_is_on_in_both_modes():
    # upstream jit_npu.py: pass_configs.get("npuir.enable_auto_multi_buffer", True), whatever the mode
    assert default_enabled()[0] is True
    assert developer_mode(kernel("layer_norm")) and current(kernel("layer_norm")) is True
    assert not developer_mode(kernel("vec_add")) and current(kernel("vec_add")) is True


@pytest.mark.parametrize(
    "value, developer",
    [
        ("Developer", True),
        ("Dev", True),
        ("dev", True),
        ("Expert", False),
        ("exp", False),
        ("E", False),
    ],
)
def test_mode_spellings(value, developer):
    assert (
        developer_mode(f'import os\nos.environ["TILELANG_ASCEND_MODE"] = "{value}"\n') is developer
    )
    assert developer_mode("import os\n") is False  # unset = Expert


def test_installed_tilelang_default_is_read_not_imported(tmp_path, monkeypatch):
    install_tilelang(
        tmp_path,
        monkeypatch,
        {"jit/jit_npu.py": 'x = cfg.get(\n    "npuir.enable_auto_multi_buffer",\n    False,\n)\n'},
    )
    default_enabled.cache_clear()
    try:
        value, origin = default_enabled()
        assert value is False and "installed TileLang" in origin
        src = "import tilelang\n@tilelang.jit(target='npuir')\ndef f():\n    pass\n"
        assert current(src) is False
        assert isinstance(set_flag(src, True), Variant)
    finally:
        default_enabled.cache_clear()
        set_flag.cache_clear()


def test_both_directions_where_the_flag_is_absent():
    src = kernel("vec_add")  # Expert mode, flag absent: on by default, so the move is "off"
    assert isinstance(set_flag(src, True), Refusal)
    v = set_flag(src, False)
    assert isinstance(v, Variant) and v.change.old is True and v.change.new is False
    back = set_flag(v.source, True)
    assert isinstance(back, Variant)


def test_tl_alias_is_a_jit_call():
    src = "import tilelang as tl\n\n@tl.jit(target='npuir')\ndef f():\n    pass\n"
    v = set_flag(src, False)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [
        ("@tl.jit(target='npuir')", f"@tl.jit(target='npuir', pass_configs={{\"{FLAG}\": False}})")
    ]


def test_double_star_options_are_not_given_a_second_pass_configs():
    src = 'import tilelang\n\n@tilelang.jit(target="npuir", **_jit_options())\ndef f():\n    pass\n'
    r = set_flag(src, False)
    assert isinstance(r, Refusal) and "**options" in r.reason and "twice" in r.reason


def test_manual_sync_kernels_do_not_get_automatic_multi_buffering():
    src = (
        "import tilelang as tl\n\n@tl.jit(pass_configs={\n"
        "    tl.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,\n"
        "    tl.PassConfigKey.NPUIR_DISABLE_HIVM_AUTO_INJECT_SYNC: True,\n})\ndef f():\n    pass\n"
    )
    assert current(src) is False
    r = set_flag(src, True)
    assert isinstance(r, Refusal) and "sync" in r.reason


def test_absent_flag_is_added_to_the_pass_configs_dict():
    src = kernel("layer_norm")  # Developer mode: auto multi-buffer is on; the variant turns it off
    v = set_flag(src, False)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [("", f'    "{FLAG}": False,')]
    assert current(v.source) is False


def test_absent_flag_without_dict_adds_pass_configs_to_the_jit_call():
    src = kernel("vec_add")
    v = set_flag(src, False)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [
        (
            '@tilelang.jit(out_idx=[-1], target="npuir")',
            f'@tilelang.jit(out_idx=[-1], target="npuir", pass_configs={{"{FLAG}": False}})',
        )
    ]
    cst.parse_module(v.source)


def test_string_key_in_keyword_dict():
    src = f'@tilelang.jit(pass_configs={{"{FLAG}": True}})\ndef f():\n    pass\n'
    v = set_flag(src, False)
    assert isinstance(v, Variant)
    assert v.source == f'@tilelang.jit(pass_configs={{"{FLAG}": False}})\ndef f():\n    pass\n'


def test_kernels_of_other_ascend_back_ends_are_not_given_the_npuir_flag():
    src = "import tilelang\n\n@tilelang.jit(out_idx=[-1])\ndef f():\n    pass\n"
    r = set_flag(src, False)
    assert isinstance(r, Refusal) and "exists only in the NPUIR compiler" in r.reason
    v = set_flag(src.replace("out_idx=[-1]", 'out_idx=[-1], target="npuir"'), False)
    assert isinstance(v, Variant)


def test_refusals_say_why():
    r = set_flag(kernel("gemm_expert"), False)
    assert isinstance(r, Refusal) and "already False" in r.reason
    r = set_flag(kernel("layer_norm"), True)
    assert isinstance(r, Refusal) and "absent, which already means True" in r.reason
    r = set_flag('import torch\nTARGET = "npuir"\n', False)
    assert isinstance(r, Refusal) and "no single pass_configs" in r.reason
    r = set_flag("import torch\nx = 1\n", False)
    assert isinstance(r, Refusal) and "not a TileLang-NPUIR kernel" in r.reason
    two = f'a = {{"{FLAG}": True}}\nb = {{"{FLAG}": False}}\n'
    r = set_flag(two, True)
    assert isinstance(r, Refusal) and "set 2 times" in r.reason


def test_deterministic():
    src = kernel("flash_attention")
    assert set_flag(src, False) == set_flag(src, False)


def test_a_flag_set_by_an_expression_is_not_planned_and_is_listed_with_its_reason():
    # upstream shape (tma_farn_split_d): the caller's dtype decides the flag
    from bot.config.schema import OpConfig
    from bot.strategies.planner import Planner

    src = (
        "import tilelang\n"
        "def build(dtype):\n"
        "    @tilelang.jit(\n"
        '        target="npuir",\n'
        "        pass_configs={\n"
        '            tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: dtype == "float16",\n'
        "        },\n"
        "    )\n"
        "    def k(block_m):\n"
        "        return block_m\n"
        "    return k\n"
    )
    assert current(src) is None
    op = OpConfig("p", "k", Path("x"), kernel_kind="vector", strategies=("multi_buffer",))
    specs, skipped = Planner(op).specs(src, ["multi_buffer"])
    assert specs == []
    why = [s for s in skipped if s.startswith("multi_buffer: ")]
    assert len(why) == 1, skipped
    assert 'line 6 is set by the expression `dtype == "float16"`' in why[0], why[0]
    # set twice: listed with that reason too
    two = f'import tilelang\na = {{"{FLAG}": True}}\nb = {{"{FLAG}": False}}\n'
    specs, skipped = Planner(op).specs(two, ["multi_buffer"])
    assert specs == [] and any("set 2 times (lines 2, 3)" in s for s in skipped), skipped


def test_an_installed_tilelang_that_never_reads_the_flag_refuses_it(tmp_path, monkeypatch):
    # jit_npu.py as it was before the flag was read (tile-ai/tilelang-ascend 7ce8b2e): a fixed
    # compiler option, no pass_configs lookup
    pkg = install_tilelang(
        tmp_path,
        monkeypatch,
        {
            "jit/jit_npu.py": 'def _npuir_to_bin():\n    opts = ["--enable-auto-multi-buffer=true"]\n'
        },
    )
    src = kernel("vec_add")
    for cache in (default_enabled, ignored_by_installed, set_flag):
        cache.cache_clear()
    try:
        r = set_flag(src, False)
        assert isinstance(r, Refusal) and "never reads npuir.enable_auto_multi_buffer" in r.reason
        (pkg / "jit" / "jit_npu.py").write_text(
            'x = cfg.get(\n    "npuir.enable_auto_multi_buffer",\n    True,\n)\n'
        )
        for cache in (default_enabled, ignored_by_installed, set_flag):
            cache.cache_clear()
        assert isinstance(set_flag(src, False), Variant)  # a tree that reads it: planned
    finally:
        for cache in (default_enabled, ignored_by_installed, set_flag):
            cache.cache_clear()

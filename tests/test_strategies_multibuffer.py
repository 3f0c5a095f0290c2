"""Multi-buffer pass config: toggled where set, added where absent, mode-aware."""

from pathlib import Path

import libcst as cst

from bot.strategies.base import Refusal, Variant
from bot.strategies.multibuffer import FLAG, current, developer_mode, set_flag
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
        ("    tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,",
         "    tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: True,")]
    assert current(v.source) is True


def test_absent_flag_follows_the_mode():
    assert developer_mode(kernel("layer_norm")) and current(kernel("layer_norm")) is True
    assert not developer_mode(kernel("vec_add")) and current(kernel("vec_add")) is False


def test_absent_flag_is_added_to_the_pass_configs_dict():
    src = kernel("layer_norm")  # Developer mode: auto multi-buffer is on; the variant turns it off
    v = set_flag(src, False)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [("", f'    "{FLAG}": False,')]
    assert current(v.source) is False


def test_absent_flag_without_dict_adds_pass_configs_to_the_jit_call():
    src = kernel("vec_add")
    v = set_flag(src, True)
    assert isinstance(v, Variant), v
    assert changed_lines(src, v.source) == [
        ('@tilelang.jit(out_idx=[-1], target="npuir")',
         f'@tilelang.jit(out_idx=[-1], target="npuir", pass_configs={{"{FLAG}": True}})')]
    cst.parse_module(v.source)


def test_string_key_in_keyword_dict():
    src = f'@tilelang.jit(pass_configs={{"{FLAG}": True}})\ndef f():\n    pass\n'
    v = set_flag(src, False)
    assert isinstance(v, Variant)
    assert v.source == f'@tilelang.jit(pass_configs={{"{FLAG}": False}})\ndef f():\n    pass\n'


def test_refusals_say_why():
    r = set_flag(kernel("gemm_expert"), False)
    assert isinstance(r, Refusal) and "already False" in r.reason
    r = set_flag(kernel("layer_norm"), True)
    assert isinstance(r, Refusal) and "Developer mode already means True" in r.reason
    r = set_flag("import torch\nx = 1\n", True)
    assert isinstance(r, Refusal) and "no single pass_configs" in r.reason
    two = f'a = {{"{FLAG}": True}}\nb = {{"{FLAG}": False}}\n'
    r = set_flag(two, True)
    assert isinstance(r, Refusal) and "set 2 times" in r.reason


def test_deterministic():
    src = kernel("flash_attention")
    assert set_flag(src, False) == set_flag(src, False)

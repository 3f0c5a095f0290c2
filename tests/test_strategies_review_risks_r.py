"""Review risks of bot/strategies/ left by an independent review, each on a self-written kernel:
a None fill's literal is the knob when the run leaves the parameter None (rebinding.py); a
string switch reads the value the call passes, not only the default (strings.py); an imported
helper that is handed the file's own factory is not that factory (imported.py); only a comment
about multi-buffering keeps the flag off (multibuffer.py); gemm operands resolve by scope and
positional transposes count (capacity.py `Scoped`, fractal.py, crossed.py)."""

from __future__ import annotations

from test_strategies_rebinding import BS, factory

from bot.config.schema import Knob
from bot.strategies import knobs
from bot.strategies.base import Variant
from bot.strategies.source import changed_lines


def bs(name: str) -> Knob:
    return Knob(name, "block_size", BS)


# 1. `if block_M is None: block_M = 64` with None passed (or the None default left alone)


def test_a_none_fill_is_the_knob_when_the_run_leaves_the_parameter_none():
    fill = "if block_M is None:\n    block_M = 64"
    for call in ("rows(1024)", "rows(1024, None)", "rows(1024, block_M=None)"):
        text = factory(fill, "M, block_M=None") + f"kernel = {call}\n"
        assert knobs.discover(text) == ["block_M"], call
        v = knobs.set_knob(text, bs("block_M"), 128)
        assert isinstance(v, Variant), (call, v)
        assert changed_lines(text, v.source) == [("        block_M = 64", "        block_M = 128")]


def test_a_none_fill_by_an_expression_is_dropped_naming_the_fill():
    text = factory("if block_M is None:\n    block_M = M // 8", "M, block_M=None")
    text += "kernel = rows(1024)\n"
    assert "block_M" not in knobs.discover(text)
    why = {d.name: d.reason for d in knobs.dropped(text)}["block_M"]
    assert "line 7" in why and "None" in why, why
    assert "set by an expression at line 5" not in why, why


# 2. a dtype switch decided by the value the run's call passes, not the parameter's default

SWITCHED = '''
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(M, N, block_M, dtype="float16"):
    is_fp32 = dtype == "float32"
    buf_dtype = "float32" if is_fp32 else "float16"

    @T.prim_func
    def main(A: T.Tensor((M, N), buf_dtype)):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, N), buf_dtype)
            T.copy(A[cid * block_M, 0], buf)

    return main


kernel = rows(4096, 1024, 32, {DTYPE})
'''


def test_a_dtype_switch_reads_the_value_the_call_passes():
    # UB holds 192 KiB: 64 rows of 1024 take 128 KiB in fp16 but 256 KiB in fp32
    legal, refused = knobs.legal_values(SWITCHED.replace("{DTYPE}", '"float32"'), "block_M", BS)
    assert 64 not in legal and any(v == 64 and "UB" in why for v, why in refused), refused
    legal, _ = knobs.legal_values(SWITCHED.replace("{DTYPE}", 'dtype="float32"'), "block_M", BS)
    assert 64 not in legal
    legal, _ = knobs.legal_values(SWITCHED.replace("{DTYPE}", '"float16"'), "block_M", BS)
    assert 64 in legal and 128 not in legal

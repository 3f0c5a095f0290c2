"""Everything derived from one kernel source shares one parse, whatever the caches evict.

A knob's site (a CST node) found through the binding must be replaced in the module of the
same parse. Separate caches of different sizes once let the binding keep a node from an old
parse while the site list was rebuilt from a new one: `set_knob` then failed with
"replace_node: target node not found" after enough other sources had been planned (the corpus
test met it at 224 kernels).
"""

from __future__ import annotations

import textwrap

from bot.config.schema import Knob
from bot.strategies import knobs
from bot.strategies.base import Variant

KERNEL = textwrap.dedent("""
    import tilelang
    import tilelang.language as T

    @tilelang.jit(target="npuir")
    def vec(M, block_M):
        @T.prim_func
        def main(A: T.Tensor((M,), "float16")):
            with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                buf = T.alloc_ub((block_M,), "float16")
                T.copy(A[cid * block_M], buf)

        return main

    kernel = vec(4096, 128)  # case {i}
""").lstrip()

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def test_a_knob_is_set_after_hundreds_of_other_sources_were_planned():
    source = KERNEL.format(i="first")
    knob = Knob("block_M", "block_size", BS)
    first = knobs.set_knob(source, knob, 64)
    assert isinstance(first, Variant)
    for i in range(300):  # more sources than any per-source cache holds
        other = KERNEL.format(i=i)
        assert isinstance(knobs.set_knob(other, knob, 256), Variant)
    again = knobs.set_knob(source, knob, 32)  # a value not asked before: not answered from cache
    assert isinstance(again, Variant), again
    assert "kernel = vec(4096, 32)" in again.source

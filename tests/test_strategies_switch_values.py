"""A block-like name whose literal is 0 or less is a switch, not a tile size
(`block_C=0`: no channel split, another kernel when set): it is dropped with the reason,
never tuned (bot/strategies/inventory.py)."""

from __future__ import annotations

from pathlib import Path

from bot.config.schema import OpConfig
from bot.strategies.planner import Planner

POOL = """\
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def pool(M, C, block_C=0, block_M=32):
    split = block_C if block_C > 0 else C
    c_num = C // split

    @T.prim_func
    def main(X: T.Tensor((M, C), "float32"), Y: T.Tensor((M, C), "float32")):
        with T.Kernel(T.ceildiv(M, block_M) * c_num, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, split), "float32")
            bm = cid // c_num
            bc = cid % c_num
            T.copy(X[bm * block_M, bc * split], buf)
            T.copy(buf, Y[bm * block_M, bc * split])

    return main


kernel = pool(1024, 256)
"""


def _plan(src: str):
    op = OpConfig(project="x", name="pool", dir=Path("ops/pool"), kernel_kind="mix")
    return Planner(op).specs(src, ["block_size"])


def test_a_block_set_to_zero_is_a_switch_and_is_not_tuned():
    specs, skipped = _plan(POOL)
    assert [s.key for s in specs] == ["block_M"]
    why = next(s for s in skipped if s.startswith("block_size: block_C: "))
    assert "set to 0 (default at line 6)" in why and "a switch" in why


def test_the_same_name_with_a_size_is_tuned():
    specs, _ = _plan(POOL.replace("block_C=0", "block_C=64"))
    assert {s.key for s in specs} == {"block_C", "block_M"}

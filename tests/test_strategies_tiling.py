"""Rules read from how a kernel walks its tiles and what it allocates (capacity, whole tile,
multiples, a block whose literal is the shape's own)."""

from __future__ import annotations

from bot.config.schema import Knob
from bot.strategies.base import Refusal, Variant
from bot.strategies.inventory import inventory
from bot.strategies.knobs import set_knob

ROW_SCALE = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def quant(N, block_M: int = 32, block_N: int = 32):
    M = T.symbolic("M")
    m_num = M // block_M
    n_num = N // block_N

    @T.prim_func
    def main(X: T.Tensor([M, N], "float16"), Y: T.Tensor([M, N], "int8"), S: T.Tensor([M, 1], "float32")):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, _):
            bm = cid // n_num
            bn = cid % n_num
            x_ub = T.alloc_shared([block_M, block_N], "float16")
            s_ub = T.alloc_shared([block_M, 1], "float32")
            T.copy(X[bm * block_M, bn * block_N], x_ub)
            T.copy(x_ub, Y[bm * block_M, bn * block_N])
            T.copy(s_ub, S[bm * block_M, 0])

    return main


def run(x):
    return quant(x.shape[-1])(x)
"""


def bs(name: str) -> Knob:
    return Knob(name, "block_size", (8, 16, 32, 64, 128))


def test_a_write_every_tile_makes_at_the_same_place_ties_the_block_to_the_extent():
    r = set_knob(ROW_SCALE, bs("block_N"), 16)
    assert isinstance(r, Refusal)
    assert "`S[bm * block_M, 0]` (line 21)" in r.reason and "overwrite" in r.reason
    assert "the current 32" in r.reason  # N is only known at run time
    # the other block indexes every write by its own tile position: free to move
    assert isinstance(set_knob(ROW_SCALE, bs("block_M"), 16), Variant)


def test_the_rule_is_not_applied_when_the_write_follows_the_tile():
    src = ROW_SCALE.replace("S[bm * block_M, 0]", "S[bm * block_M, bn]")
    assert isinstance(set_knob(src, bs("block_N"), 16), Variant)


def test_a_knob_split_into_parts_stays_a_multiple_of_the_part():
    src = (
        ROW_SCALE.replace(
            "x_ub = T.alloc_shared([block_M, block_N]",
            "x_ub = T.alloc_shared([block_M // 4, block_N]",
        )
        .replace("block_M: int = 32", "block_M: int = 8")
        .replace('M = T.symbolic("M")', "M = 96")
    )
    r = set_knob(src, Knob("block_M", "block_size", (2, 8, 12)), 2)  # 2 divides M = 96
    assert isinstance(r, Refusal) and "not a multiple of 4" in r.reason
    assert isinstance(set_knob(src, Knob("block_M", "block_size", (2, 8, 16)), 16), Variant)


def test_a_block_whose_literal_is_also_the_shape_is_dropped_not_edited():
    src = ROW_SCALE.replace(
        "    return quant(x.shape[-1])(x)", "    N = 1024\n    return quant(N, block_N=N)(x)"
    )
    inv = inventory(src)
    assert [k.name for k in inv.knobs] == ["block_M"]
    (dropped,) = [d for d in inv.dropped if d.name == "block_N"]
    assert "'N' (local at line 27)" in dropped.reason and "change the problem" in dropped.reason
    r = set_knob(src, bs("block_N"), 512)
    assert isinstance(r, Refusal) and "change the problem" in r.reason


def test_capacity_counts_the_memory_each_allocation_names():
    src = ROW_SCALE.replace(
        "alloc_shared([block_M, block_N]", "alloc_ub([block_M, block_N]"
    ).replace('M = T.symbolic("M")', "M = 65536")
    # x_ub: block_M x 32 fp16; UB holds 192 KiB -> block_M up to 3072 fits, 4096 does not
    assert isinstance(set_knob(src, Knob("block_M", "block_size", (32, 2048)), 2048), Variant)
    r = set_knob(src, Knob("block_M", "block_size", (32, 4096)), 4096)
    assert isinstance(r, Refusal)
    assert "UB buffers as allocated (x_ub (line 17))" in r.reason and "262144 bytes" in r.reason


OPEN_SIZE = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def scale(block_M=32):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor([M, 64], "float32"), Y: T.Tensor([M, 64], "float32")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            x = T.alloc_ub([block_M, 64], "float32")
            T.copy(X[cid * block_M, 0], x)
            T.copy(x, Y[cid * block_M, 0])

    return main


def get_inputs(seed=0):
    M = 192
    return (M,)
"""


def test_open_sizes_come_from_get_inputs_and_the_callers():
    # M is symbolic: without sizes only divisors of the current 32 are provably safe
    src = OPEN_SIZE.replace("    M = 192\n", "    M = None\n")
    r = set_knob(src, bs("block_M"), 64)
    assert isinstance(r, Refusal) and "only divisors of the current 32" in r.reason
    # get_inputs runs it with M = 192: 64 divides it, 128 does not
    assert isinstance(set_knob(OPEN_SIZE, bs("block_M"), 64), Variant)
    r = set_knob(OPEN_SIZE, bs("block_M"), 128)
    assert isinstance(r, Refusal)
    assert "does not divide 192" in r.reason and "(with M=192, a size this file" in r.reason
    # a caller that runs it with another size too: the block must fit both
    two = OPEN_SIZE + "\n\ndef run(x):\n    M = 96\n    return scale()(x)\n"
    r = set_knob(two, bs("block_M"), 64)
    assert isinstance(r, Refusal) and "does not divide 96" in r.reason

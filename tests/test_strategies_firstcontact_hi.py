"""heldout_h/heldout_i first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.strategies.base import Refusal, Variant
from bot.strategies.pipeline import set_depth

SHORT_LOOP = """
import tilelang.language as T


def build(total=96, chunk=32):
    steps = (total + chunk - 1) // chunk

    @T.prim_func
    def main(X: T.Tensor((total,), "float16"), Y: T.Tensor((total,), "float16")):
        with T.Kernel(1) as cid:
            buf = T.alloc_shared((chunk,), "float16")
            for i in T.Pipelined(steps, num_stages=2):
                T.copy(X[i * chunk], buf)
                T.copy(buf, Y[i * chunk])

    return main
"""


def test_depth_past_the_searched_range_is_refused():
    src = SHORT_LOOP.replace("total=96", "total=4096").replace("num_stages=2", "num_stages=4")
    r = set_depth(src, 5)
    assert isinstance(r, Refusal) and "deepest pipeline" in r.reason
    assert isinstance(set_depth(src, 3), Variant)


HEADS_FROM_PROBLEM = """
import tilelang.language as T


def attention(rows=512, heads=16, width=64, block_rows=32):
    block_h = heads

    @T.prim_func
    def main(Q: T.Tensor((rows, heads, width), "float16"), O: T.Tensor((rows, heads, width), "float16")):
        with T.Kernel(rows // block_rows) as bx:
            q = T.alloc_shared((block_rows, block_h, width), "float16")
            T.copy(Q[bx * block_rows, 0:heads, 0], q)
            T.copy(q, O[bx * block_rows, 0:heads, 0])

    return main
"""


def test_block_bound_to_a_problem_sized_default_is_dropped():
    from bot.strategies import inventory

    inv = inventory.inventory(HEADS_FROM_PROBLEM)
    assert [k.name for k in inv.knobs] == ["block_rows"]
    (why,) = [d.reason for d in inv.dropped if d.name == "block_h"]
    assert "'heads'" in why and "change the problem" in why


TWO_MODES = """
import sys

import tilelang
import tilelang.language as T


def scale(n, block_n=64):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // block_n) as bx:
            buf = T.alloc_shared((block_n,), "float16")
            T.copy(X[bx * block_n], buf)
            T.copy(buf, Y[bx * block_n])

    return main


if sys.argv[-1] == "offline":
    program = scale(4096, 128)
else:
    compiled = tilelang.jit(out_idx=[-1], target="ascendc")(scale)
    kernel = compiled(4096, 128)
"""


def test_a_decorator_applied_by_hand_is_a_second_call_site():
    from bot.strategies import inventory

    inv = inventory.inventory(TWO_MODES)
    assert inv.knobs == []
    (why,) = [d.reason for d in inv.dropped if d.name == "block_n"]
    assert "2 call sites" in why


def test_a_decorator_applied_by_hand_binds_like_a_call():
    from bot.strategies import inventory

    src = TWO_MODES.replace("    program = scale(4096, 128)\n", "    program = None\n")
    (knob,) = inventory.inventory(src).knobs
    assert (
        knob.name == "block_n"
        and knob.site.line == src.splitlines().index("    kernel = compiled(4096, 128)") + 1
    )


PASSED_TO_A_RUNNER = """
import tilelang.language as T

ROWS = 512
BLOCK_R = 64


def copy_rows(rows):
    tiles = rows // BLOCK_R

    @T.prim_func
    def main(X: T.Tensor((rows,), "float16"), Y: T.Tensor((rows,), "float16")):
        with T.Kernel(tiles) as bx:
            buf = T.alloc_shared((BLOCK_R,), "float16")
            T.copy(X[bx * BLOCK_R], buf)
            T.copy(buf, Y[bx * BLOCK_R])

    return main


def check(label, build, rows):
    kernel = build(rows)
    return label, kernel


if __name__ == "__main__":
    check("rows", copy_rows, ROWS)
"""


def test_a_factory_passed_to_a_runner_is_called_with_the_runners_arguments():
    from bot.strategies import inventory

    (knob,) = inventory.inventory(PASSED_TO_A_RUNNER).knobs
    ok, refused = knob.legal((32, 128, 512, 1024))
    assert ok == (32, 128, 512)  # rows = ROWS = 512 reaches copy_rows through check()
    assert [v for v, _ in refused] == [1024] and "divide 512" in refused[0][1]


TWO_FACTORIES = """
import tilelang.language as T


def plain_copy(M, N):
    block_R = 32
    tiles = T.ceildiv(M, block_R)

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(tiles) as bx:
            buf = T.alloc_shared((block_R, N), "float16")
            T.copy(X[bx * block_R, 0], buf)
            T.copy(buf, Y[bx * block_R, 0])

    return main


def halved_copy(M, N):
    block_R = 64
    half = block_R // 2

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_R), 2) as (bx, vid):
            buf = T.alloc_shared((half, N), "float16")
            T.copy(X[bx * block_R + vid * half, 0], buf)
            T.copy(buf, Y[bx * block_R + vid * half, 0])

    return main
"""


def test_each_factorys_own_local_is_its_own_knob():
    from bot.config.schema import Knob
    from bot.strategies import inventory, knobs

    inv = inventory.inventory(TWO_FACTORIES)
    assert [(k.name, k.site.line) for k in inv.knobs] == [
        ("plain_copy.block_R", 6),
        ("halved_copy.block_R", 20),
    ]
    assert inv.dropped == []
    v = knobs.set_knob(TWO_FACTORIES, Knob("halved_copy.block_R", "block_size", (16, 64)), 16)
    assert isinstance(v, Variant)
    assert v.change.description == "halved_copy.block_R: 64 -> 16 (local at line 20)"
    assert "    block_R = 32\n" in v.source and "    block_R = 16\n" in v.source
    odd = knobs.set_knob(TWO_FACTORIES, Knob("halved_copy.block_R", "block_size", (63, 64)), 63)
    assert isinstance(odd, Refusal) and "multiple of 2" in odd.reason

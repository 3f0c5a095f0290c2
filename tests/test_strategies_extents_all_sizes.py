"""A block past the extent it tiles only idles when the kernel handles the tail, so it is
refused only when it is past the extent of every size the op runs with: a file that runs the
op at 17 and at 77 rows has work for a 64-row block, and none for a 128-row one. Sizes a
test walks with `enumerate(cases)` count too. A rule that breaks the kernel (a block that must
divide the extent) still holds for every size (bot/strategies/constraints.py, containers.py)."""

from __future__ import annotations

from bot.strategies import inventory

CLIPPED = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def col_sum(block_M, block_N, dtype="float16"):
    M = T.symbolic("M")
    N = T.symbolic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), Out: T.Tensor((1, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, _):
            src = T.alloc_ub((block_M, block_N), dtype)
            acc = T.alloc_ub((1, block_N), dtype)
            for bn in T.serial(T.ceildiv(N, block_N)):
                remain_n = T.min(N - bn * block_N, block_N)
                T.vbrc(0, acc)
                for bm in T.serial(T.ceildiv(M, block_M)):
                    remain_m = T.min(M - bm * block_M, block_M)
                    T.copy(A[bm * block_M : bm * block_M + remain_m, bn * block_N : bn * block_N + remain_n], src)
                    T.vreduce(src, acc, dims=[0])
                T.copy(acc, Out[0:1, bn * block_N : bn * block_N + remain_n])

    return main


def test_col_sum():
    kernel = col_sum(32, 32)
    M, N = 17, 256
    kernel(torch.randn([M, N]).npu(), torch.empty([1, N]).npu())
    M, N = 77, 466
    kernel(torch.randn([M, N]).npu(), torch.empty([1, N]).npu())


if __name__ == "__main__":
    test_col_sum()
"""

ENUMERATED = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def masked_sum(M, block_N, dtype="float16"):
    N = T.symbolic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), Out: T.Tensor((1, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, _):
            src = T.alloc_ub((1, block_N), dtype)
            for bn in T.serial(T.ceildiv(N, block_N)):
                remain_n = T.min(N - bn * block_N, block_N)
                T.copy(A[0:1, bn * block_N : bn * block_N + remain_n], src)
                T.copy(src, Out[0:1, bn * block_N : bn * block_N + remain_n])

    return main


def build(M, N):
    return torch.randn(M, N).npu()


def check():
    M, block_N = 20, 32
    kernel = masked_sum(M, block_N)
    cases = [(64), (133), (499)]
    for i, (N) in enumerate(cases, 1):
        A = build(M, N)
        kernel(A, torch.empty(1, N).npu())


if __name__ == "__main__":
    check()
"""

FULL_TILES = (
    CLIPPED.replace("remain_m = T.min(M - bm * block_M, block_M)", "remain_m = block_M")
    .replace(
        "A[bm * block_M : bm * block_M + remain_m, bn * block_N : bn * block_N + remain_n]",
        "A[bm * block_M, bn * block_N]",
    )
    .replace("M, N = 17, 256", "M, N = 64, 256")
    .replace("M, N = 77, 466", "M, N = 96, 466")
)


def _knob(src: str, name: str) -> inventory.Knob:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


def test_a_block_past_the_smallest_size_is_kept_when_a_larger_one_has_work_for_it():
    ok, refused = _knob(CLIPPED, "block_M").legal((16, 64, 128, 256))
    # 64 tiles the 77-row run; past 77 a block idles in every run the file makes
    assert ok == (16, 64)
    assert [v for v, _ in refused] == [128, 256]
    why = dict(refused)[128]
    assert "extent 77" in why and "M=77" in why


def test_the_other_axis_takes_its_largest_size_too():
    ok, refused = _knob(CLIPPED, "block_N").legal((64, 256, 512))
    assert ok == (64, 256) and [v for v, _ in refused] == [512]
    assert "extent 466" in dict(refused)[512]


def test_sizes_walked_with_enumerate_are_sizes_the_op_runs_with():
    ok, refused = _knob(ENUMERATED, "block_N").legal((16, 256, 512, 1024))
    assert ok == (16, 256)
    assert [v for v, _ in refused] == [512, 1024]
    assert "extent 499" in dict(refused)[512] and "N=499" in dict(refused)[512]


def test_full_tiles_must_divide_every_size_whatever_the_others_allow():
    ok, refused = _knob(FULL_TILES, "block_M").legal((16, 48, 64))
    # 64 divides the 64-row run but not the 96-row one, where a partial tile reads past M
    assert ok == (16,)
    assert "does not divide 96" in dict(refused)[64] and "does not divide 64" in dict(refused)[48]
